"""Node by node, what a layout pass that converts a graph computes channels-last, and how many
conversions it inserts: the planning rule refimpl documents (docs/design.md, "Layout"),
written here again from eager's own tensors.

:func:`eager_nodes` runs the *original* graph (``fx.Interpreter``) and records, for each
node, plain facts read off the tensor eager computed: its shape and strides, its storage
(``untyped_storage().data_ptr()``, every value kept alive so no address is reused) and
storage offset, and which argument nodes hold tensors. :func:`planned_layout` applies the
rule to that record. Nothing here reads refimpl's layout pass (:mod:`refimpl.layout`); the op
families are listed below by hand, from torch's documented semantics.

The rule, one pass in graph order (given that the graph is converted):

1. a node whose value is a 4-d tensor *computes channels-last* when it is a conv (its
   input positional), a layout-agnostic out-of-place op with a channels-last input, or a
   layout-agnostic in-place op whose first argument is channels-last;
2. nodes whose values share one storage form an *alias class* rooted at the earliest. A
   class is *plain* when every member but its root is a layout-agnostic in-place op whose
   value has its root's size, strides and offset. A channels-last node of a plain class is
   *seen* channels-last by its users; one of any other class is restored to eager's strides
   at once (one conversion), so views and writes act on eager's layout;
3. a node that does not compute channels-last gets each distinct seen channels-last input
   restored right before it (one conversion each); the graph's outputs get one restore per
   alias class among their seen channels-last values;
4. a conv whose input is not seen channels-last gets its input converted (one conversion).

A conv of an input with one channel or a 1x1 image (both memory orders at once) gets the
layout torch picks for it, which may be contiguous: its result, and what computes
channels-last from it alone, is *undetermined* (:attr:`LayoutPlanned.undetermined`).

Invariant: the record depends only on the values eager computes, so :func:`planned_layout`
judges any backend's pass on the same graph.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils._pytree import tree_leaves

__all__ = ["EagerNode", "LayoutPlanned", "alias_roots", "eager_nodes", "layout_strides",
           "node_family", "planned_layout"]

CONV, AGNOSTIC, IN_PLACE = "conv", "layout-agnostic", "in place"

#: functions whose result's values do not depend on their inputs' memory layout (batch
#: norm, activations, pooling, arithmetic) and that accept any dense layout.
_AGNOSTIC_FUNCTIONS = (
    F.batch_norm, torch.batch_norm, torch.relu, F.relu, F.silu, F.gelu, F.hardtanh, F.relu6,
    torch.sigmoid, torch.tanh, F.max_pool2d, torch.max_pool2d, F.avg_pool2d,
    F.adaptive_avg_pool2d, operator.add, operator.mul, operator.sub, torch.add, torch.mul,
    torch.sub)
_IN_PLACE_FUNCTIONS = (torch.relu_, F.relu_, operator.iadd, operator.imul)
_AGNOSTIC_METHODS = ("relu", "sigmoid", "add", "mul", "sub")
_IN_PLACE_METHODS = ("relu_", "add_", "mul_", "sub_")
_AGNOSTIC_MODULES = (nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, nn.AvgPool2d,
                     nn.AdaptiveAvgPool2d, nn.SiLU)
#: activations that write into their input when given ``inplace=True`` (by keyword or in
#: the position their signature gives it), or a module built with ``inplace=True``.
_INPLACE_POSITION = {F.relu: 1, F.silu: 1, F.relu6: 1, F.hardtanh: 3}
_INPLACE_MODULES = (nn.ReLU, nn.SiLU)


def _is(target: Any, candidates: tuple) -> bool:
    return any(target is c for c in candidates)


def _inplace_flag(node: fx.Node) -> bool:
    position = next(p for f, p in _INPLACE_POSITION.items() if node.target is f)
    flag = node.kwargs.get("inplace", node.args[position] if len(node.args) > position
                           else False)
    return bool(flag)


def _function_family(node: fx.Node) -> str | None:
    if node.target is torch.conv2d:
        positional = bool(node.args) and isinstance(node.args[0], fx.Node)
        return CONV if positional else None
    if _is(node.target, tuple(_INPLACE_POSITION)) and _inplace_flag(node):
        return IN_PLACE
    if _is(node.target, _AGNOSTIC_FUNCTIONS):
        return AGNOSTIC
    return IN_PLACE if _is(node.target, _IN_PLACE_FUNCTIONS) else None


def _module_family(node: fx.Node, module: nn.Module) -> str | None:
    if type(module) is nn.Conv2d:
        positional = bool(node.args) and isinstance(node.args[0], fx.Node)
        return CONV if positional and module.padding_mode == "zeros" else None
    if type(module) in _INPLACE_MODULES and module.inplace:
        return IN_PLACE
    return AGNOSTIC if type(module) in _AGNOSTIC_MODULES else None


def node_family(node: fx.Node, gm: fx.GraphModule) -> str | None:
    """``conv``, ``layout-agnostic``, ``in place`` or None (an op that must see eager's
    strides: views, reshapes, ``cat``, ``clone``, linear, anything not listed)."""
    if node.op == "call_function":
        return _function_family(node)
    if node.op == "call_method":
        if node.target in _IN_PLACE_METHODS:
            return IN_PLACE
        return AGNOSTIC if node.target in _AGNOSTIC_METHODS else None
    if node.op == "call_module":
        return _module_family(node, gm.get_submodule(node.target))
    return None


@dataclass(frozen=True)
class EagerNode:
    """One node of the original graph, as eager ran it."""

    name: str
    op: str
    family: str | None
    tensor_inputs: tuple[str, ...]   # argument nodes whose value is a tensor, in order
    first_input: str | None          # the first positional argument, if it is a node
    shape: tuple[int, ...] | None    # None: the value is not one strided tensor
    stride: tuple[int, ...] | None
    storage: tuple[int, int] | None  # (storage address, storage offset)
    value: torch.Tensor | None       # a copy of the value as computed (later writes aside)


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}  # every value, kept alive: no address is reused
        self.copies: dict[str, torch.Tensor | None] = {}  # each tensor as computed

    def run_node(self, n: fx.Node) -> Any:
        value = super().run_node(n)
        self.values[n.name] = value
        self.copies[n.name] = value.detach().clone() if isinstance(value, torch.Tensor) \
            else None
        return value


def eager_nodes(gm: fx.GraphModule, inputs: list[Any]) -> list[EagerNode]:
    """Run ``gm`` eagerly on ``inputs`` (under no_grad; the caller passes copies) and record
    each node (module docstring); the output node last."""
    recorder = _Recorder(gm)
    with torch.no_grad():
        recorder.run(*inputs)
    values = recorder.values
    record = []
    for node in gm.graph.nodes:
        value = values.get(node.name)
        tensor = value if isinstance(value, torch.Tensor) and value.layout == torch.strided \
            else None
        leaves = [a for a in tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
        first = node.args[0] if node.args and isinstance(node.args[0], fx.Node) else None
        record.append(EagerNode(
            name=node.name, op=node.op, family=node_family(node, gm),
            tensor_inputs=tuple(a.name for a in leaves
                                if isinstance(values.get(a.name), torch.Tensor)),
            first_input=first.name if first is not None else None,
            shape=tuple(tensor.shape) if tensor is not None else None,
            stride=tuple(tensor.stride()) if tensor is not None else None,
            storage=((tensor.untyped_storage().data_ptr(), tensor.storage_offset())
                     if tensor is not None else None),
            value=recorder.copies.get(node.name)))
    return record


@dataclass
class LayoutPlanned:
    """What the rule expects: the nodes that compute channels-last, and how many
    conversions each step of the rule inserts."""

    channels_last: list[str]
    #: channels-last nodes whose layout torch picks (a conv of an input in both orders)
    undetermined: list[str] = field(default_factory=list)
    to_channels_last: int = 0       # step 4
    restored_at_definition: int = 0  # step 2
    restored_before: int = 0        # step 3, before a consumer
    restored_outputs: int = 0       # step 3, once per output alias class
    #: the same conversions by name: convs whose input is converted (step 4), nodes restored
    #: at definition (step 2), (value, consumer) restored before a consumer and output
    #: value -> the root of its alias class (step 3)
    convert_names: list[str] = field(default_factory=list)
    restore_at_definition_names: list[str] = field(default_factory=list)
    restore_before_names: list[tuple[str, str]] = field(default_factory=list)
    restore_output_roots: dict[str, str] = field(default_factory=dict)

    @property
    def conversions(self) -> int:
        return (self.to_channels_last + self.restored_at_definition + self.restored_before
                + self.restored_outputs)


def alias_roots(record: list[EagerNode]) -> dict[str, str]:
    """node -> the earliest node whose value shares its storage (tensor nodes only)."""
    first_of: dict[int, str] = {}
    return {n.name: first_of.setdefault(n.storage[0], n.name) for n in record
            if n.storage is not None and n.op != "output"}


def _plain_roots(record: list[EagerNode], roots: dict[str, str]) -> set[str]:
    """Roots of the plain alias classes (rule, step 2)."""
    by_name = {n.name: n for n in record}
    plain = set(roots.values())
    for node in record:
        root = roots.get(node.name)
        if root is None or root == node.name:
            continue
        base = by_name[root]
        same_view = (node.shape, node.stride, node.storage) == (base.shape, base.stride,
                                                                 base.storage)
        if not (node.family == IN_PLACE and same_view):
            plain.discard(root)
    return plain


def _computes_channels_last(node: EagerNode, seen: set[str]) -> bool:
    if node.shape is None or len(node.shape) != 4:
        return False
    if node.family == CONV:
        return True
    if node.family == AGNOSTIC:
        return any(i in seen for i in node.tensor_inputs)
    return node.family == IN_PLACE and node.first_input in seen


def _both_orders(node: EagerNode) -> bool:
    """A 4-d value with one channel or a 1x1 image: channels-last and contiguous at once."""
    return node.shape is not None and len(node.shape) == 4 and (
        node.shape[1] == 1 or node.shape[2] * node.shape[3] == 1)


def _undetermined(node: EagerNode, by_name: dict, seen: set[str], undetermined: list) -> bool:
    """Whether torch picks the layout of a node that computes channels-last."""
    if node.family == CONV:
        source = by_name.get(node.first_input)
        return source is None or _both_orders(source) or node.first_input in undetermined
    if node.family == IN_PLACE:
        return node.first_input in undetermined
    return any(i in undetermined for i in node.tensor_inputs if i in seen)


def planned_layout(record: list[EagerNode]) -> LayoutPlanned:
    """The rule of the module docstring, on :func:`eager_nodes`' record of a graph."""
    roots = alias_roots(record)
    plain = _plain_roots(record, roots)
    by_name = {n.name: n for n in record}
    planned = LayoutPlanned([])
    seen: set[str] = set()
    for node in record:
        if node.op == "output":
            planned.restore_output_roots = {i: roots[i] for i in node.tensor_inputs
                                            if i in seen}
            planned.restored_outputs = len(set(planned.restore_output_roots.values()))
            continue
        if not _computes_channels_last(node, seen):
            restored = [i for i in dict.fromkeys(node.tensor_inputs) if i in seen]
            planned.restore_before_names += [(i, node.name) for i in restored]
            planned.restored_before += len(restored)
            continue
        planned.channels_last.append(node.name)
        if _undetermined(node, by_name, seen, planned.undetermined):
            planned.undetermined.append(node.name)
        if node.family == CONV and node.first_input not in seen:
            planned.convert_names.append(node.name)
            planned.to_channels_last += 1
        if roots[node.name] in plain:
            seen.add(node.name)
        else:
            planned.restore_at_definition_names.append(node.name)
            planned.restored_at_definition += 1
    return planned


def layout_strides(shape: tuple[int, ...], stride: tuple[int, ...]) -> tuple:
    """(size, stride) of the dims of size > 1: where each element lies in memory (a dim of
    size 1 is never stepped along, so its stride places nothing)."""
    return tuple((n, s) for n, s in zip(shape, stride) if n > 1)


def channels_last_strides(shape: tuple[int, ...]) -> tuple:
    """:func:`layout_strides` of a dense channels-last tensor of ``shape`` (torch's own)."""
    dense = torch.empty(shape, device="meta", memory_format=torch.channels_last)
    return layout_strides(shape, tuple(dense.stride()))
