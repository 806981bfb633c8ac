"""Plain facts about an FX graph that the layout pass needs, read off its example values.

This is the FX edge of the pass: everything after it (:mod:`refimpl.layout.decision`,
:mod:`refimpl.layout.plan`) works on the dataclasses produced here.

Example values come from ``node.meta["example_value"]`` (dynamo) or ``node.meta["val"]``
(make_fx); a graph with none at all (``fx.symbolic_trace``) is run once under fake tensors
(``FakeTensorProp``), so the pass never runs real compute and never mutates the caller's
tensors; the propagated values are taken off the graph again, so it keeps the metadata it
came with. A node dynamo left without one (grad-mode switches, higher-order-op bodies) is
*opaque*: the planner never lets it see a channels-last tensor (refimpl.layout.plan).

Aliasing is read from storages: nodes whose values share a storage form one alias class,
rooted at the earliest of them. A member is an *identity alias* when it has its root's size,
stride and offset (what an in-place op returns); anything else is a view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves

from refimpl.flops.formulas.conv import conv_flops
from refimpl.layout.decision import ConvSite
from refimpl.layout.ops import CONV, conv_operands, op_kind


@dataclass(frozen=True)
class NodeFact:
    """One node as the planner sees it."""

    name: str
    op: str                       # placeholder, call_*, get_attr, output
    kind: str | None              # conv, pointwise, inplace or None (refimpl.layout.ops)
    inputs: tuple[str, ...]       # tensor-valued argument nodes, in order
    first_input: str | None       # the first positional argument, if it is a node
    dense_4d: bool                # a static-shaped 4-d tensor
    alias_root: str | None        # earliest node sharing this value's storage
    identity_alias: bool          # same size, stride and offset as alias_root
    stride: tuple[int, ...] | None  # eager's strides (static tensors only)
    opaque: bool                  # no example value: what it does with its inputs is unknown


def example_values(gm: fx.GraphModule, example_inputs: list[Any]) -> dict[str, Any]:
    """node name -> its example value (fake tensors; propagated if the graph has none)."""
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    if any(("example_value" in n.meta or "val" in n.meta) for n in nodes):
        return {n.name: n.meta.get("example_value", n.meta.get("val")) for n in nodes
                if "example_value" in n.meta or "val" in n.meta}

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_inputs = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t
                   for t in example_inputs]
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fake_inputs)
    # Take the propagated values off the graph again: left there, a later call would read
    # them as a tracer's, and a node they miss (FakeTensorProp records no plain int before
    # torch 2.13, nor a dtype or device) would pass for one dynamo left opaque.
    propagated = {n.name: n.meta.pop("val", None) for n in gm.graph.nodes}
    return {n.name: propagated[n.name] for n in nodes}


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(d, int) for d in (*t.shape, *t.stride(), t.storage_offset()))


def _storage(value: Any):
    tensors = [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
    if len(tensors) != 1 or tensors[0].layout != torch.strided:
        return None
    return StorageWeakRef(tensors[0].untyped_storage())


def node_facts(gm: fx.GraphModule, values: dict[str, Any]) -> list[NodeFact]:
    """One :class:`NodeFact` per node, in graph order (the output node last)."""
    roots: dict[Any, str] = {}
    facts = []
    for node in gm.graph.nodes:
        value = values.get(node.name)
        tensor = value if isinstance(value, torch.Tensor) else None
        storage = _storage(value)  # None for the output node: it has no example value
        root = roots.setdefault(storage, node.name) if storage is not None else None
        static = tensor is not None and _static(tensor)
        identity = root is not None and static and _same_view(tensor, values[root])
        args = [a for a in tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
        first = node.args[0] if node.args and isinstance(node.args[0], fx.Node) else None
        facts.append(NodeFact(
            name=node.name, op=node.op, kind=op_kind(node, gm),
            inputs=tuple(a.name for a in args if isinstance(values.get(a.name), torch.Tensor)),
            first_input=first.name if first is not None else None,
            dense_4d=static and tensor.dim() == 4, alias_root=root, identity_alias=identity,
            stride=tuple(tensor.stride()) if static else None,
            opaque=node.op != "output" and node.name not in values))
    return facts


def _same_view(a: torch.Tensor, b: Any) -> bool:
    return (isinstance(b, torch.Tensor) and _static(b) and a.shape == b.shape
            and a.stride() == b.stride() and a.storage_offset() == b.storage_offset())


def conv_sites(gm: fx.GraphModule, values: dict[str, Any]) -> list[ConvSite]:
    """A :class:`ConvSite` for each 2-d conv whose input, weight and output are known."""
    sites = []
    for node in gm.graph.nodes:
        if op_kind(node, gm) != CONV:
            continue
        x, weight, groups = conv_operands(node, gm)
        x_val, out = values.get(getattr(x, "name", None)), values.get(node.name)
        w_val = values.get(weight.name) if isinstance(weight, fx.Node) else weight
        if not all(isinstance(v, torch.Tensor) for v in (x_val, w_val, out)):
            continue
        if out.dim() != 4 or w_val.dim() != 4:
            continue
        dims = (*x_val.shape, *w_val.shape, *out.shape)
        dynamic = not all(isinstance(d, int) for d in dims) or not isinstance(groups, int)
        flops = 0 if dynamic else conv_flops(x_val.shape, w_val.shape, out.shape,
                                             transposed=False)
        shape = tuple(w_val.shape) if not dynamic else (0, 0, 0, 0)
        sites.append(ConvSite(node.name, shape, groups if isinstance(groups, int) else 1,
                              flops, dynamic))
    return sites


def infer_is_inference(gm: fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Training when grad mode is on and an input or parameter requires grad."""
    if not torch.is_grad_enabled():
        return True
    tensors = [t for t in tree_leaves(list(example_inputs)) if isinstance(t, torch.Tensor)]
    return not any(t.requires_grad for t in (*tensors, *gm.parameters()))
