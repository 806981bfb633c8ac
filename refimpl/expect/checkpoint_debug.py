"""What a checkpoint's determinism check and debug mode must report for a drifting module,
derived without a checkpoint.

torch documents the non-reentrant checkpoint's check (``determinism_check="default"``): the
recomputation must save as many tensors as the forward, with equal shape, dtype and device,
else ``torch.utils.checkpoint.CheckpointError``; and its debug mode (``debug=True``, or
``torch.utils.checkpoint.set_checkpoint_debug_enabled(True)``): "error messages will also
include a trace of the operators ran during the original forward computation as well as the
recomputation". With early stop (the default) the recomputation ends at its save that matches
the forward's last one, so a recomputation that only saves *more* is not detected, and the
ops after that save are never run.

Algorithm
    :func:`timeline` runs a program once, unwrapped, under a dispatch mode that logs each aten
    op when it completes (``aten.detach`` left out: a checkpoint detaches tensors itself) and a
    pack hook that logs each saved tensor's metadata and how many ops had completed before it.
    :func:`expected_report` compares the forward's timeline with the recomputation's: whether
    the check fires (with and without early stop), the ops of the recomputation every debug
    report shows (those run before the early stop, or all), and the first index where the
    two op logs part.

Invariant: nothing here runs a checkpoint; the timelines are the unwrapped module's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Report", "Timeline", "expected_report", "first_difference", "timeline"]

_NOT_LOGGED = (torch.ops.aten.detach.default,)


@dataclass
class Timeline:
    """One run: aten op names in completion order; per saved tensor, its (shape, dtype,
    device) and the number of ops completed before it was saved."""

    ops: list[str] = field(default_factory=list)
    saves: list[tuple[Any, ...]] = field(default_factory=list)
    ops_before_save: list[int] = field(default_factory=list)


class _Log(TorchDispatchMode):
    def __init__(self, line: Timeline) -> None:
        super().__init__()
        self.line = line

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func not in _NOT_LOGGED:
            self.line.ops.append(str(func))
        return out


def timeline(run: Callable[[], Any]) -> Timeline:
    """The :class:`Timeline` of ``run()``."""
    line = Timeline()

    def pack(t: torch.Tensor) -> torch.Tensor:
        line.saves.append((tuple(t.shape), t.dtype, t.device))
        line.ops_before_save.append(len(line.ops))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _Log(line):
        run()
    return line


def first_difference(a: list[str], b: list[str]) -> int | None:
    """The first index at which ``a`` and ``b`` differ, counting the end of the shorter one
    as a difference; None when they are equal."""
    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b) or a[index] != b[index]:
            return index
    return None


@dataclass(frozen=True)
class Report:
    """What a checkpoint with debug on must raise and show for one drift (module docstring).

    detected / detected_to_end  the check fires with early stop / with the recomputation run
                                to its end (or to its first save beyond the forward's count)
    forward                     the forward's ops
    recompute_shown             the recomputation's ops every report shows (early stop)
    recompute_to_end            the recomputation's ops without early stop
    first_difference            where ``forward`` and ``recompute_to_end`` part, or None
    """

    detected: bool
    detected_to_end: bool
    forward: list[str]
    recompute_shown: list[str]
    recompute_to_end: list[str]
    first_difference: int | None


def expected_report(fwd: Timeline, rec: Timeline) -> Report:
    """The :class:`Report` for a forward ``fwd`` and a recomputation ``rec``."""
    n_fwd, n_rec = len(fwd.saves), len(rec.saves)
    common = min(n_fwd, n_rec)
    metadata_differs = fwd.saves[:common] != rec.saves[:common]
    stops_early = n_rec >= n_fwd > 0  # the n_fwd-th save ends an early-stopping run
    shown = rec.ops[:rec.ops_before_save[n_fwd - 1]] if stops_early else list(rec.ops)
    # without early stop, a save beyond the forward's count fails at once
    to_end = rec.ops[:rec.ops_before_save[n_fwd]] if n_rec > n_fwd else list(rec.ops)
    saves = n_fwd > 0  # a forward that saves nothing is never recomputed, never checked
    return Report(detected=saves and (n_rec < n_fwd or metadata_differs),
                  detected_to_end=saves and (n_rec != n_fwd or metadata_differs),
                  forward=list(fwd.ops), recompute_shown=shown, recompute_to_end=to_end,
                  first_difference=first_difference(fwd.ops, to_end))
