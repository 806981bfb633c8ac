"""What a FLOP counter must report for a program that calls ``torch.cond``, and what the
call must return, by hand from the program's plain data
(:class:`refimpl.strategies.flop_cond.CondProgram`).

torch documents its counter's rule for ``torch.cond``: both branches are counted apart and,
per module and per op, the larger of the two counts is added (an upper bound on what any
call costs, whichever branch a later call takes). The call itself returns the branch the
predicate selects, under a counter as without one.

Counts: a square product of ``[n, n]`` matrices (``mm``, ``addmm``, ``bmm``) is ``2 n^3``
FLOPs; the ``empty`` step is an ``mm`` of 0 FLOPs (an empty inner dimension), still listed
under ``mm``. Products outside the module count under "Global" only; those of the module
(before, the cond's bound, after) under "Global" and ``CondBlock``. An op that appears in
either branch is listed, with its bound (0 when it counted 0).
"""

from __future__ import annotations

from typing import Any

import torch

MODULE = "CondBlock"
GLOBAL = "Global"


def step_counts(steps: tuple[str, ...], n: int) -> dict[Any, int]:
    """{op packet: FLOPs} of running ``steps`` on ``[n, n]`` matrices."""
    counts: dict[Any, int] = {}
    for step in steps:
        packet = getattr(torch.ops.aten, "mm" if step == "empty" else step)
        counts[packet] = counts.get(packet, 0) + (0 if step == "empty" else 2 * n ** 3)
    return counts


def _added(into: dict[Any, int], more: dict[Any, int]) -> dict[Any, int]:
    return {op: into.get(op, 0) + more.get(op, 0) for op in {*into, *more}}


def cond_counts(program: Any) -> dict[str, dict[Any, int]]:
    """{name: {op packet: FLOPs}} a counter must report for ``program`` (module docstring)."""
    n = program.size
    true, false = step_counts(program.true_steps, n), step_counts(program.false_steps, n)
    bound = {op: max(true.get(op, 0), false.get(op, 0)) for op in {*true, *false}}
    inside = _added(_added(step_counts(program.before, n), bound), step_counts(program.after, n))
    counts = {GLOBAL: _added(step_counts(program.outside, n), inside)}
    if inside:
        counts[MODULE] = inside
    return counts


def cond_result(program: Any, x: torch.Tensor) -> torch.Tensor:
    """What the module returns: ``before``, the branch ``pred`` selects, ``after``, each
    step by its definition (``y x``, ``y + y x``, ...), in plain torch without torch.cond."""
    def steps(names: tuple[str, ...], y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        for name in names:
            y = y + y @ w if name == "addmm" else y if name == "empty" else y @ w
        return y

    y = steps(program.before, x, x)
    y = steps(program.true_steps if program.pred else program.false_steps, y, y)
    return steps(program.after, y, x)
