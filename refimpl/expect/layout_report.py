"""What a layout pass's report must say about a graph, written from eager's own tensors: the
2-d convolutions it decides on (weight, groups, FLOPs), inductor's rule on them, and the
plain facts of each node the plan rests on (op family, tensor inputs, 4-d-ness, strides,
alias class).

Everything is read off :func:`refimpl.expect.layout_nodes.eager_nodes`' record of the
original graph (eager ran it) and off the graph itself; nothing here reads refimpl's layout
pass (:mod:`refimpl.layout`).

The conv FLOPs are counted by definition: each of the ``N * out * H_out * W_out`` output
elements is a dot product of length ``in/groups * kh * kw``, one multiply and one add per
term, so ``2 * N * out * H_out * W_out * in/groups * kh * kw`` (torch's ``conv_flop_count``
for a forward conv). A conv site is a ``conv`` node of the record (a ``torch.conv2d`` call
with its input positional, or an ``nn.Conv2d`` with zero padding) whose output and weight
are 4-d and whose input has a value.

Invariant: every expectation is a function of eager's values and the graph's call forms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import fx

from refimpl.expect.layout import inductor_conv_class
from refimpl.expect.layout_nodes import AGNOSTIC, CONV, IN_PLACE, EagerNode, alias_roots

__all__ = ["INDUCTOR_COSTS", "EagerConvSite", "EagerFact", "eager_conv_sites", "eager_facts",
           "inductor_rule", "without_values"]

#: inductor's channels-last cost per conv class (torch/_inductor/graph.py, decide_layout_opt).
INDUCTOR_COSTS = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
#: a graph with at least this many nodes per conv is left alone (inductor's limit).
NODES_PER_CONV = 300
#: the report's name for each op family (refimpl's docstrings: conv, pointwise, inplace).
KIND_NAMES = {CONV: "conv", AGNOSTIC: "pointwise", IN_PLACE: "inplace", None: None}
#: ``torch.conv2d(input, weight, bias, stride, padding, dilation, groups)``: argument positions
_WEIGHT_AT, _GROUPS_AT = 1, 6


@dataclass(frozen=True)
class EagerConvSite:
    """One 2-d conv as eager ran it."""

    node: str
    weight_shape: tuple[int, int, int, int]
    groups: int
    flops: int

    @property
    def kind(self) -> str:
        """Its class in inductor's rule (:func:`inductor_conv_class`)."""
        return inductor_conv_class(self.weight_shape, self.groups)


def _weight_and_groups(node: fx.Node, gm: fx.GraphModule, shapes: dict) -> tuple:
    """(weight shape, groups) of a conv node, as its call form passes them."""
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        return tuple(module.weight.shape), module.groups
    args = node.args
    weight = node.kwargs.get("weight", args[_WEIGHT_AT] if len(args) > _WEIGHT_AT else None)
    groups = node.kwargs.get("groups", args[_GROUPS_AT] if len(args) > _GROUPS_AT else 1)
    return shapes[weight.name], groups


def eager_conv_sites(gm: fx.GraphModule, record: list[EagerNode]) -> list[EagerConvSite]:
    """The conv sites of ``gm`` in graph order (module docstring), FLOPs by definition."""
    shapes = {n.name: n.shape for n in record}
    nodes = {n.name: n for n in gm.graph.nodes}
    sites = []
    for entry in record:
        if entry.family != CONV or entry.shape is None or len(entry.shape) != 4:
            continue
        if shapes.get(entry.first_input) is None:  # an input without a value: no site
            continue
        weight, groups = _weight_and_groups(nodes[entry.name], gm, shapes)
        batch, out_channels, height, width = entry.shape
        _, group_inputs, kh, kw = weight
        flops = 2 * batch * out_channels * height * width * group_inputs * kh * kw
        sites.append(EagerConvSite(entry.name, weight, groups, flops))
    return sites


def inductor_rule(sites: Sequence[Any], node_count: int, is_inference: bool) -> bool:
    """Inductor's rule with its defaults, without inductor's mkldnn-on-CPU shortcut, over
    conv sites that each have ``flops`` and ``kind`` (:class:`EagerConvSite` or the layout
    strength properties' own): no conv, or at least
    :data:`NODES_PER_CONV` nodes a conv: no; inference: the FLOP-weighted cost is at most
    the FLOPs; training: no grouped or in_out conv, and not every conv small."""
    if not sites or node_count >= NODES_PER_CONV * len(sites):
        return False
    if is_inference:
        total = sum(s.flops for s in sites)
        return sum(s.flops * INDUCTOR_COSTS[s.kind] for s in sites) <= total
    kinds = {s.kind for s in sites}
    return not ({"grouped", "in_out"} & kinds) and kinds != {"small"}


def without_values(record: list[EagerNode], hidden: set[str]) -> list[EagerNode]:
    """``record`` as a pass sees a graph whose nodes ``hidden`` carry no example value (dynamo
    leaves some so): they hold no tensor (no shape, strides or storage), and no node counts
    them among its tensor inputs."""
    return [dataclasses.replace(
        n, tensor_inputs=tuple(i for i in n.tensor_inputs if i not in hidden),
        **({"shape": None, "stride": None, "storage": None, "value": None}
           if n.name in hidden else {})) for n in record]


@dataclass(frozen=True)
class EagerFact:
    """A node's plain facts as eager's values give them (the fields of refimpl's NodeFact)."""

    name: str
    op: str
    kind: str | None
    inputs: tuple[str, ...]
    first_input: str | None
    dense_4d: bool
    alias_root: str | None
    identity_alias: bool
    stride: tuple[int, ...] | None
    opaque: bool


def eager_facts(record: list[EagerNode], opaque: frozenset[str] = frozenset()
                ) -> list[EagerFact]:
    """One :class:`EagerFact` per node in graph order. The output node holds no value of its
    own (no strides, no alias class); a node's alias root is the earliest node sharing its
    storage, and it is an identity alias when it has that root's shape, strides and offset
    (the root is one of itself); the nodes ``opaque`` (those :func:`without_values` hid) are
    opaque, and no other."""
    roots = alias_roots(record)
    by_name = {n.name: n for n in record}
    facts = []
    for n in record:
        own = n.op != "output" and n.shape is not None
        root = roots.get(n.name)
        base: Any = by_name[root] if root is not None else None
        identity = base is not None and (n.shape, n.stride, n.storage) == (
            base.shape, base.stride, base.storage)
        facts.append(EagerFact(
            name=n.name, op=n.op, kind=KIND_NAMES[n.family], inputs=n.tensor_inputs,
            first_input=n.first_input, dense_4d=own and len(n.shape) == 4,
            alias_root=root, identity_alias=identity,
            stride=n.stride if own else None, opaque=n.name in opaque))
    return facts
