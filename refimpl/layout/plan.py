"""Which nodes run channels-last, and where layouts are converted: a plan on plain data.

Algorithm (one pass in graph order, given that the decision said yes):

1. a conv whose output is a static 4-d tensor is computed channels-last; a ``pointwise`` op
   with a channels-last input, and an ``inplace`` op whose first argument is channels-last,
   are computed channels-last too (refimpl.layout.ops);
2. an alias class (refimpl.layout.facts) is *plain* when every member but its root is an
   identity alias made by an ``inplace`` op, and no opaque node consumes a member. A
   channels-last node whose class is not plain (something views it, a layout-sensitive op
   mutates it, or an opaque node might) is *restored at definition*:
   its result is converted to eager's strides at once, so every view and every mutation
   acts on a tensor laid out exactly as in eager;
3. a channels-last value reaching any other consumer is restored to eager's strides right
   before that consumer (at its point in program order, so it reads the current value);
   graph outputs are restored once per alias class, so outputs that alias in eager still
   alias each other;
4. a conv whose input is not channels-last gets ``contiguous(memory_format=channels_last)``.

Invariant: every node outside the channels-last set, and the graph output, sees exactly the
values and strides it sees in eager; a channels-last tensor is never aliased by a view and
never mutated by a layout-sensitive op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.layout.facts import NodeFact
from refimpl.layout.ops import CONV, INPLACE, POINTWISE


@dataclass
class LayoutPlan:
    """The rewrite, as names: what runs channels-last, what is converted where."""

    channels_last: list[str] = field(default_factory=list)
    restore_at_definition: list[str] = field(default_factory=list)
    #: (value, consumer): restore ``value`` to eager's strides right before ``consumer``.
    restore_before: list[tuple[str, str]] = field(default_factory=list)
    #: outputs restored once per alias class: value -> the class root whose copy it uses.
    restore_outputs: dict[str, str] = field(default_factory=dict)
    #: convs whose input is converted to channels-last first.
    convert_inputs: list[str] = field(default_factory=list)


def plain_classes(facts: list[NodeFact]) -> set[str]:
    """Roots of alias classes whose non-root members are all in-place identity aliases and
    that no opaque node (one without an example value) consumes."""
    members: dict[str, list[NodeFact]] = {}
    roots = {f.name: f.alias_root for f in facts}
    for f in facts:
        if f.alias_root is not None:
            members.setdefault(f.alias_root, []).append(f)
    opaque = {roots[i] for f in facts if f.opaque for i in f.inputs}
    return {root for root, ms in members.items() if root not in opaque
            and all(f.name == root or (f.kind == INPLACE and f.identity_alias) for f in ms)}


def _computes_cl(f: NodeFact, visible: set[str]) -> bool:
    if not f.dense_4d:
        return False
    if f.kind == CONV:
        return True
    if f.kind == POINTWISE:
        return any(i in visible for i in f.inputs)
    return f.kind == INPLACE and f.first_input in visible


def plan_layout(facts: list[NodeFact]) -> LayoutPlan:
    """Steps 1-4 of the module docstring, for a graph the decision converts."""
    plain = plain_classes(facts)
    plan = LayoutPlan()
    visible: set[str] = set()  # channels-last values as their users see them
    for f in facts:
        if f.op == "output":
            _restore_outputs(f, visible, facts, plan)
            continue
        if not _computes_cl(f, visible):
            plan.restore_before += [(i, f.name) for i in dict.fromkeys(f.inputs) if i in visible]
            continue
        plan.channels_last.append(f.name)
        if f.kind == CONV and f.first_input not in visible:
            plan.convert_inputs.append(f.name)
        if f.alias_root in plain:
            visible.add(f.name)
        else:
            plan.restore_at_definition.append(f.name)
    return plan


def _restore_outputs(out: NodeFact, visible: set[str], facts: list[NodeFact],
                     plan: LayoutPlan) -> None:
    roots = {f.name: f.alias_root for f in facts}
    for name in out.inputs:
        if name in visible:
            plan.restore_outputs[name] = roots[name] or name
