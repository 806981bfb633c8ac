"""Drifting programs for the checkpoint's determinism check and debug mode: ``drifts()``.

A drawn :class:`Drift` is plain data: the ops a module runs in its forward, the ops it runs
when called again inside a backward (a checkpoint's recomputation), and whether that second
call sees its input with twice the rows. :class:`DriftingModule` runs it. Each op is one aten
op on the activation ``h`` (and the parameter ``w``), chosen for what autograd saves:

| op     | aten op            | saves for backward                                    |
| ------ | ------------------ | ----------------------------------------------------- |
| sin    | aten.sin.default   | its input (before the op runs)                        |
| exp    | aten.exp.default   | its result (after the op runs)                        |
| mul    | aten.mul.Tensor    | both factors, ``h`` and ``w``                         |
| square | aten.pow.Tensor_Scalar | its input                                          |
| double | aten._to_copy.default  | nothing; every later save is float64               |
| cat    | aten.cat.default   | nothing; every later activation has twice the rows    |

The recomputation is the forward truncated, extended, with one op replaced, or unchanged
with its input doubled: by a ``cat`` op (``same``), or by a tensor built outside every
dispatch mode (``widened``), so the two op logs are identical and only the saved tensors'
shapes differ. Only ``same`` and ``widened`` double the input: the first difference of the
other kinds is where their ops part (a doubling ``cat`` would make it op 0 every time). One
draw in two is *long*: the forward repeats its ops past 256 (CPython caches the ints up to
256, so a length compared by identity shows), truncated or extended at its end; its base
holds no ``cat`` (the rows would double on every repeat).

Invariant: ``forward`` is never empty; ``recompute`` differs from ``forward`` or ``doubled``
is set, so the second call always differs from the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

__all__ = ["KINDS", "LONG", "OPS", "Drift", "DriftingModule", "drifts"]

#: name -> the op on (activation, parameter); the table above
OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sin": lambda h, w: h.sin(),
    "exp": lambda h, w: h.exp(),
    "mul": lambda h, w: h * w,
    "square": lambda h, w: h.square(),
    "double": lambda h, w: h.double(),
    "cat": lambda h, w: torch.cat([h, h]),
}
#: how the recomputation's ops differ from the forward's
KINDS = ("truncate", "extend", "replace", "same", "widened")
#: a long forward runs at least this many ops
LONG = 260


@dataclass(frozen=True)
class Drift:
    """The forward's ops, the recomputation's ops, and whether its input has doubled rows."""

    forward: tuple[str, ...]
    recompute: tuple[str, ...]
    doubled: bool
    kind: str
    width: int


class DriftingModule(nn.Module):
    """Runs ``drift.forward`` on a call outside a backward and ``drift.recompute`` (on the
    input with doubled rows if ``drift.doubled``) on a call inside one. ``recomputing`` says
    which call this is; a test may replace it to run either program on purpose."""

    def __init__(self, drift: Drift) -> None:
        super().__init__()
        self.drift = drift
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, drift.width))
        self.recomputing: Callable[[], bool] = _in_backward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        again = self.recomputing()
        h = _doubled(x, self.drift.kind) if again and self.drift.doubled else x
        for name in self.drift.recompute if again else self.drift.forward:
            h = OPS[name](h, self.w)
        return h


def _doubled(x: torch.Tensor, kind: str) -> torch.Tensor:
    """``x`` with twice the rows: by a logged ``cat``, or (``widened``) with every dispatch
    mode (an op log) set aside, so no log sees an op."""
    if kind != "widened":
        return torch.cat([x, x])
    with _disable_current_modes():
        return torch.cat([x, x])


def _in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


@st.composite
def drifts(draw: st.DrawFn) -> Drift:
    """A :class:`Drift` (module docstring): a base of 1-4 ops, repeated past :data:`LONG` ops
    in one draw of two, and a recomputation of a drawn kind."""
    names = st.sampled_from(sorted(OPS))
    long = draw(st.booleans(), label="long")
    # a long forward repeats its base: without cat, whose every run doubles the rows
    base_names = names.filter(lambda n: n != "cat") if long else names
    base = tuple(draw(st.lists(base_names, min_size=1, max_size=4), label="base ops"))
    forward = base * (-(-LONG // len(base))) if long else base
    kind = draw(st.sampled_from(KINDS), label="kind")
    if kind == "truncate":
        low = len(forward) - 4 if long else 0
        recompute = forward[:draw(st.integers(max(low, 0), len(forward) - 1), label="cut")]
    elif kind == "extend":
        recompute = forward + tuple(draw(st.lists(names, min_size=1, max_size=3)))
    elif kind == "replace":
        at = draw(st.integers(0, len(forward) - 1), label="replaced at")
        new = draw(names.filter(lambda n: n != forward[at]), label="replaced by")
        recompute = (*forward[:at], new, *forward[at + 1:])
    else:
        recompute = forward
    doubled = kind in ("same", "widened")
    return Drift(forward, recompute, doubled, kind, draw(st.integers(1, 3), label="width"))
