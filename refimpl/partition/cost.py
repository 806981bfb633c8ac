"""Cost model: bytes per value (from shape and dtype) and runtime per node by FLOPs.

Bytes
    A saved tensor keeps its whole storage alive, so a value costs the ``nbytes`` of its
    storage (for a fresh result: numel x element size; for a view: its base's storage),
    the figure the activation meter (``refimpl.memory``) reports. Symbols cost nothing;
    tuples cannot be saved as such (their elements, reached through ``getitem``, can).
Runtime by FLOPs (:func:`flops_runtime`, the default ``flops`` estimator)
    the FLOP table, ``refimpl.flops.formulas.count_flops``, on the node's fake values (0 for
    ops the table does not list: pointwise, views, reductions). The other estimator,
    ``profile``, times nodes: :mod:`refimpl.partition.runtime`.
Dynamic shapes
    A graph compiled with symbolic sizes is costed on the sizes of the call that compiled it
    (each symbol's hint), read WITHOUT a guard (:func:`hinted`): a guard on a size would
    specialise the graph to it, and dynamo would recompile on every new size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

try:  # torch >= 2.12
    from torch.fx.experimental.symbolic_shapes import optimization_hint
except ImportError:  # torch 2.10, 2.11: the same hint, read without a guard
    from torch.fx.experimental.symbolic_shapes import hint_int

    #: an unbacked size's stand-in (inductor's ``unbacked_symint_fallback``).
    UNBACKED_FALLBACK = 8192

    def optimization_hint(a, fallback: int | None = None) -> int:
        return hint_int(a, fallback=UNBACKED_FALLBACK if fallback is None else fallback)
from torch.utils._pytree import tree_map

from refimpl.flops.formulas import count_flops


def is_sym(val: Any) -> bool:
    return isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool)


def is_savable(val: Any) -> bool:
    """A tensor or a symbol can be handed to the backward graph; a tuple cannot."""
    return isinstance(val, torch.Tensor) or is_sym(val)


def _has_symbols(t: torch.Tensor) -> bool:
    return any(is_sym(d) for d in (*t.shape, *t.stride(), t.storage_offset()))


def hinted(val: Any) -> Any:
    """``val`` with every symbolic size replaced by its hint (the size of the call that
    compiled the graph), without installing a guard: a symbol becomes an int, a tensor with
    symbolic sizes a meta tensor of the hinted shape and strides; anything else as is."""
    if is_sym(val):
        return optimization_hint(val)
    if isinstance(val, torch.Tensor) and _has_symbols(val):
        shape = [optimization_hint(d) for d in val.shape]
        stride = [optimization_hint(d) for d in val.stride()]
        return torch.empty_strided(shape, stride, dtype=val.dtype, device="meta")
    return val


def value_bytes(val: Any) -> int:
    """Storage bytes a value keeps alive (tuples: the sum over their tensors); symbolic
    sizes at their hints (:func:`hinted`)."""
    if isinstance(val, torch.Tensor) and _has_symbols(val):
        storage = val.untyped_storage().nbytes()
        if is_sym(storage):
            return int(optimization_hint(storage))
        return int(storage)
    if isinstance(val, torch.Tensor):  # AOTAutograd's joint graph holds strided tensors
        return int(val.untyped_storage().nbytes())
    if isinstance(val, list | tuple):
        return sum(value_bytes(v) for v in val)
    return 0


def meta_args(node: fx.Node) -> tuple[tuple, dict]:
    """The node's args and kwargs with every input node replaced by its ``meta['val']``,
    symbolic sizes at their hints (:func:`hinted`)."""
    to_val = lambda a: hinted(a.meta.get("val")) if isinstance(a, fx.Node) else hinted(a)
    return tree_map(to_val, node.args), tree_map(to_val, node.kwargs)


def flops_runtime(node: fx.Node) -> float:
    """FLOPs of one call_function node, from the FLOP table (0 for unlisted ops)."""

    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return 0.0
    args, kwargs = meta_args(node)
    out = tree_map(hinted, node.meta.get("val"))
    return float(count_flops(node.target, args, kwargs, out))
