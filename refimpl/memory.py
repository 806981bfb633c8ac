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

Storages are told apart by identity, never by address: the input storages are held (strongly)
until the figure is computed and every counted storage is alive when it is counted, so no
address can be freed and reused by another storage while the meter compares them (a freed
input's address reused by a new activation once made the new one count as an input).

:func:`measure_held` is the wider figure, for held tensors that autograd does not save: every
new storage an op created during the forward and still alive when it returns (a selective
checkpoint's cache, a closure), found by a ``TorchDispatchMode`` that keeps a weak reference
to each op output's storage. The forward's own outputs are not counted unless autograd saved
them. Not for compiled callables (a dispatch mode is on the stack).

Invariant: the figure counts each storage once, whatever the number of views saved of it,
and never counts a storage that existed before the forward.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
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


class _Storages:
    """Distinct storages by identity, held alive (so no address is reused while compared)."""

    def __init__(self, tensors: Iterable[torch.Tensor] = ()) -> None:
        self.held: dict[int, torch.UntypedStorage] = {}
        for t in tensors:
            self.add(t)

    def add(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        self.held[id(storage)] = storage



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
    return _measure(fn, args, kwargs, track_ops=False)


def measure_held(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> SavedReport:
    """As :func:`measure_saved`, plus every new storage an op made that is still alive after
    the forward, outside autograd's saves (module docstring); the forward's outputs excluded."""
    return _measure(fn, args, kwargs, track_ops=True)


class _NewStorages(TorchDispatchMode):
    """Weak references to the storage of every strided tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                storage = t.untyped_storage()
                ref = self.refs.get(id(storage))
                if ref is None or ref() is not storage:  # new, or a dead one's id reused
                    self.refs[id(storage)] = weakref.ref(storage)
        return out

    def alive(self) -> list[torch.UntypedStorage]:
        return [s for s in (ref() for ref in self.refs.values()) if s is not None]


def _measure(fn: Callable[..., Any], args: tuple, kwargs: dict, track_ops: bool) -> SavedReport:
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    inputs = _Storages(_reachable_tensors([fn, args, kwargs], depth=3))
    handles: list[weakref.ref[_Handle]] = []

    def pack(t: torch.Tensor) -> _Handle:
        handle = _Handle(t)
        handles.append(weakref.ref(handle))
        return handle

    tracker = _NewStorages() if track_ops else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda h: h.tensor), tracker:
        outputs = fn(*args, **kwargs)
    # still held by an autograd graph: the handle is alive
    held = _Storages(h.tensor for h in (ref() for ref in handles)
                     if h is not None and isinstance(h.tensor, torch.Tensor)).held
    if isinstance(tracker, _NewStorages):
        returned = _Storages(t for t in tree_leaves(outputs) if isinstance(t, torch.Tensor))
        held = {**{id(s): s for s in tracker.alive() if id(s) not in returned.held}, **held}
    counted = {key: s for key, s in held.items() if key not in inputs.held}
    return SavedReport(sum(s.nbytes() for s in counted.values()), len(counted), len(handles),
                       outputs)


def saved_activation_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Bytes of storages created during ``fn``'s forward and still held for backward.

    Storage-deduplicated; inputs, parameters and their views are excluded (module docstring).
    """
    return measure_saved(fn, *args, **kwargs).bytes
