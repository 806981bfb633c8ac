"""The version check: what a recomputation reads must be what the forward read.

Eager autograd keeps the tensors a backward needs and raises ``RuntimeError: one of the
variables needed for gradient computation has been modified by an inplace operation`` when one
of them was changed in place after it was saved. A checkpoint keeps none of them: it reruns the
forward in the backward, reading the module's parameters, buffers and tensor inputs *as they
are then*. Changed in between (``with torch.no_grad(): weight.add_(1)``), the recomputation
silently computes other tensors than the forward did and the gradients are wrong. This check
makes the checkpoint as strict as eager: it raises instead.

Algorithm
    1. ``Reads.of(module, args, kwargs)`` (forward pre-hook) records, for every tensor the
       region reads from outside (each tensor leaf of the inputs, each parameter and buffer of
       the module, by name), a weak reference and its ``_version``.
    2. ``settle()`` (end of the forward) drops the tensors whose version changed *during* the
       forward: the region writes them itself (a batchnorm's running statistics), and its
       recomputation writes them again. The others' versions are now the reference.
    3. ``check()`` (start of every recomputation) raises :class:`ModifiedInPlaceError`, a
       RuntimeError as eager's, naming the first tensor whose version moved; a tensor that died
       cannot have been changed (a dead input was handed in by an outer checkpoint, whose own
       check covers it).

Invariant: a recomputation runs only if every tensor it reads from outside the region, other
than those the region writes itself, has the version it had when the forward ended.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from refimpl.checkpointing.options import ModifiedInPlaceError


@dataclass(frozen=True)
class Read:
    """One tensor the region reads: what to call it, a weak reference, its version."""

    name: str
    tensor: weakref.ref[torch.Tensor]
    version: int


def _read(name: str, tensor: torch.Tensor) -> Read:
    return Read(name, weakref.ref(tensor), tensor._version)


class Reads:
    """The tensors one checkpointed call reads from outside, and their versions (above)."""

    def __init__(self, owner: str, reads: list[Read]) -> None:
        self.owner, self.reads = owner, reads

    @classmethod
    def of(cls, module: nn.Module, args: tuple, kwargs: dict) -> Reads:
        """Step 1: the call's tensor inputs, then the module's parameters and buffers."""
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        reads = [_read(f"input {i}", t) for i, t in enumerate(inputs)]
        reads += [_read(f"parameter {n!r}", p) for n, p in module.named_parameters()]
        reads += [_read(f"buffer {n!r}", b) for n, b in module.named_buffers()]
        return cls(f"the checkpointed {type(module).__name__}", reads)

    def settle(self) -> None:
        """Step 2: forget what the forward wrote; the rest's versions are now the reference."""
        unchanged = [r for r in self.reads if _version(r) == r.version]
        self.reads = [_read(r.name, t) for r in unchanged if (t := r.tensor()) is not None]

    def check(self) -> None:
        """Step 3: raise :class:`ModifiedInPlaceError` if a read tensor changed since."""
        for read in self.reads:
            now = _version(read)
            if now is not None and now != read.version:
                tensor = read.tensor()
                raise ModifiedInPlaceError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: {read.name} of {self.owner} "
                    f"[{tensor.type()} {list(tensor.shape)}] is at version {now}; expected "
                    f"version {read.version} instead. The checkpoint recomputes its forward "
                    "in the backward from this tensor as it is now, which would give other "
                    "gradients than eager; do not change it in place between the forward and "
                    "the backward (or clone it before changing it)")


def _version(read: Read) -> int | None:
    tensor = read.tensor()
    return None if tensor is None else tensor._version
