"""Debug mode: the op logs of the forward and of the recomputation, for determinism errors.

Algorithm
    An :class:`OpLog` is a TorchDispatchMode that appends the name of every aten op it sees to
    a list and then runs the op unchanged. With ``debug=True`` one log is entered (last, so on
    top of any ``context_fn`` mode and seeing every op) around the forward and another around
    the recomputation. When the determinism check fails, :func:`explain` adds both logs and
    the first position where they differ to the error. ``aten.detach`` is not logged: the
    checkpoint itself detaches tensors in the recomputation, so its count legitimately differs.

Invariant: logging never changes a result; it composes with selective-checkpoint modes
because it only observes and forwards each op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_NOT_LOGGED = (torch.ops.aten.detach.default,)


@dataclass
class OpLogs:
    """The two lists a debug checkpoint fills: op names of the forward and the recomputation."""

    forward: list[str] = field(default_factory=list)
    recompute: list[str] = field(default_factory=list)


class OpLog(TorchDispatchMode):
    """Appends ``str(op)`` to ``names`` for every op dispatched while it is entered."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        if func not in _NOT_LOGGED:
            self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def first_difference(a: list[str], b: list[str]) -> int | None:
    """The first index where ``a`` and ``b`` differ (a length difference counts), else None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def explain(logs: OpLogs) -> str:
    """The debug section of a determinism error: where the two op logs part, then both."""
    fwd, rec = logs.forward, logs.recompute
    i = first_difference(fwd, rec)
    where = "the op logs are identical (the difference is in the saved tensors' metadata)" \
        if i is None else (f"first difference at op {i}: forward ran "
                           f"{fwd[i] if i < len(fwd) else '<end>'}, recomputation ran "
                           f"{rec[i] if i < len(rec) else '<end>'}")
    return (f"\ncheckpoint debug: {where}\n"
            f"ops in the forward ({len(fwd)}):\n  " + "\n  ".join(fwd) +
            f"\nops in the recomputation ({len(rec)}):\n  " + "\n  ".join(rec))
