"""The activation meter: bytes of new storages that a forward leaves held for backward.

This is the device-agnostic twin of the CUDA allocator figure the seeds read
(``requested_bytes.all.current`` after a forward minus before it).

Algorithm
    1. Before the forward, collect the storages that already exist and that the forward can
       reach: tensors in the arguments (any pytree), the parameters and buffers of modules
       among the arguments, the callable itself and, shallowly, what its closure, default
       arguments, the globals its code names, and its bound ``self`` hold. These are
       *inputs*: never counted, nor are their views.
    2. Run the forward under an outermost ``saved_tensors_hooks``. Every tensor autograd saves
       passes through the pack hook (eager ops, custom Functions, AOTAutograd's compiled
       Function, the inputs a checkpoint keeps); the hook wraps it in a handle and records it.
    3. When the forward has returned (its outputs still alive), keep the handles that are
       still alive, i.e. still held by an autograd graph, and sum ``nbytes`` over their
       distinct storages that are not inputs.

Invariant: the figure counts each storage once, whatever the number of views saved of it,
and never counts a storage that existed before the forward.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves


@dataclass(frozen=True)
class SavedReport:
    """What a forward left held for backward."""

    bytes: int
    storages: int  # distinct new storages held
    saved_tensors: int  # tensors autograd saved (views and repeats included)
    outputs: Any  # the forward's return value, kept so its graph can run backward


class _Handle:
    """What the pack hook returns; alive exactly as long as autograd holds the save."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    storage = t.untyped_storage()
    return (str(t.device), storage.data_ptr())


def _reachable_tensors(obj: Any, depth: int = 2) -> Iterable[torch.Tensor]:
    """Tensors that ``obj`` holds: itself, pytree leaves, module state, closure, ``self``."""
    if isinstance(obj, torch.Tensor):
        yield obj
        return
    if isinstance(obj, nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
        return
    if isinstance(obj, list | tuple | dict):  # containers cost no depth: [x] holds x
        for leaf in tree_leaves(obj):
            if leaf is not obj:
                yield from _reachable_tensors(leaf, depth)
        return
    if depth == 0:
        return
    for default in (getattr(obj, "__defaults__", None) or ()) + tuple(
            (getattr(obj, "__kwdefaults__", None) or {}).values()):
        yield from _reachable_tensors(default, depth - 1)
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            yield from _reachable_tensors(cell.cell_contents, depth - 1)
        except ValueError:  # an empty cell
            continue
    code, namespace = getattr(obj, "__code__", None), getattr(obj, "__globals__", {})
    for name in code.co_names if code is not None else ():
        if name in namespace and not isinstance(namespace[name], type(torch)):
            yield from _reachable_tensors(namespace[name], depth - 1)
    owner = getattr(obj, "__self__", None)
    if owner is not None:
        yield from _reachable_tensors(owner, depth - 1)
    wrapped = getattr(obj, "__wrapped__", None) or getattr(obj, "_torchdynamo_orig_callable", None)
    if wrapped is not None:
        yield from _reachable_tensors(wrapped, depth - 1)


def measure_saved(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> SavedReport:
    """Run ``fn(*args, **kwargs)`` and report the new storages it left held for backward."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    inputs = {_storage_key(t) for t in _reachable_tensors([fn, args, kwargs], depth=3)}
    handles: list[weakref.ref[_Handle]] = []

    def pack(t: torch.Tensor) -> _Handle:
        handle = _Handle(t)
        handles.append(weakref.ref(handle))
        return handle

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda h: h.tensor):
        outputs = fn(*args, **kwargs)
    held: dict[tuple[str, int], int] = {}
    for ref in handles:
        handle = ref()
        if handle is None or not isinstance(handle.tensor, torch.Tensor):
            continue
        key = _storage_key(handle.tensor)
        if key not in inputs:
            held[key] = handle.tensor.untyped_storage().nbytes()
    return SavedReport(sum(held.values()), len(held), len(handles), outputs)


def saved_activation_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Bytes of storages created during ``fn``'s forward and still held for backward.

    Storage-deduplicated; inputs, parameters and their views are excluded (module docstring).
    """
    return measure_saved(fn, *args, **kwargs).bytes
