"""Programs of in-place ops and their out-of-place twins, for the FLOP counter's "an
in-place op is counted as its out-of-place op" property.

:func:`inplace_programs` draws an :class:`InplaceProgram`: a chain of steps on a ``[rows,
cols]`` tensor, every step of :data:`STEPS` once in a drawn order, each run either out of
place (``y.cumsum(-1)``) or in place on a copy (``y.clone().cumsum_(-1)``: the copy keeps
autograd's saved values intact), then optionally a backward. Every step is free by torch's
counter's convention (no matrix product: elementwise ops, also through the ``_foreach_``
kernels and inside a profiler range, scans, masked and indexed writes, triangle masks), so
a counter must count 0 for the program whichever variants run, and report no op as
uncounted where it reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

__all__ = ["STEPS", "InplaceProgram", "inplace_programs"]


def _rows(y: torch.Tensor) -> torch.Tensor:
    return torch.arange(0, y.shape[0], 2)


def _foreach_add(y: torch.Tensor, in_place: bool) -> torch.Tensor:
    """``y + 1`` by the ``_foreach_`` kernels (a list of one tensor)."""
    if in_place:
        torch._foreach_add_([y], 1.0)
        return y
    return torch._foreach_add([y], 1.0)[0]


def _marked(y: torch.Tensor, in_place: bool) -> torch.Tensor:
    """``y * 2`` inside a profiler range (``record_function``: the profiler's marker ops)."""
    with torch.profiler.record_function("refimpl-step"):
        return y.mul_(2) if in_place else y.mul(2)


#: name -> (out of place, in place), each taking y [r, c] to a tensor of its shape.
STEPS: dict[str, tuple[Any, Any]] = {
    "add": (lambda y: y.add(1.5), lambda y: y.add_(1.5)),
    "mul": (lambda y: y.mul(0.5), lambda y: y.mul_(0.5)),
    "clamp": (lambda y: y.clamp(-1, 1), lambda y: y.clamp_(-1, 1)),
    "relu": (torch.relu, torch.relu_),
    "sigmoid": (torch.sigmoid, lambda y: y.sigmoid_()),
    "hardtanh": (F.hardtanh, F.hardtanh_),
    "leaky_relu": (F.leaky_relu, lambda y: F.leaky_relu_(y)),
    "cumsum": (lambda y: y.cumsum(-1), lambda y: y.cumsum_(-1)),
    "cumprod": (lambda y: y.cumprod(-1), lambda y: y.cumprod_(-1)),
    "tril": (lambda y: y.tril(), lambda y: y.tril_()),
    "triu": (lambda y: y.triu(), lambda y: y.triu_()),
    "masked_fill": (lambda y: y.masked_fill(y > 0, 0.25),
                    lambda y: y.masked_fill_(y > 0, 0.25)),
    "masked_scatter": (lambda y: y.masked_scatter(y > 0, y * 2),
                       lambda y: y.masked_scatter_(y.detach() > 0, y.detach() * 2)),
    "index_fill": (lambda y: y.index_fill(0, _rows(y), 0.5),
                   lambda y: y.index_fill_(0, _rows(y), 0.5)),
    "index_copy": (lambda y: y.index_copy(0, _rows(y), y[_rows(y)] * 2),
                   lambda y: y.index_copy_(0, _rows(y), y[_rows(y)].detach() * 2)),
    "scatter_reduce": (lambda y: y.scatter_reduce(0, torch.zeros_like(y, dtype=torch.long),
                                                  y * 2, "sum"),
                       lambda y: y.scatter_reduce_(0, torch.zeros_like(y, dtype=torch.long),
                                                   y.detach() * 2, "sum")),
    "foreach_add": (lambda y: _foreach_add(y, False), lambda y: _foreach_add(y, True)),
    "record_function": (lambda y: _marked(y, False), lambda y: _marked(y, True)),
}


@dataclass(frozen=True)
class InplaceProgram:
    """``steps``: (name, in place?) pairs, run in order on a ``[rows, cols]`` input."""

    steps: tuple[tuple[str, bool], ...]
    rows: int
    cols: int
    backward: bool

    def run(self) -> None:
        x = torch.randn(self.rows, self.cols, requires_grad=self.backward)
        y = x * 1  # a non-leaf: in-place ops on a leaf that requires grad are refused
        for name, in_place in self.steps:
            out_of_place, inplace = STEPS[name]
            y = inplace(y.clone()) if in_place else out_of_place(y)
        if self.backward:
            y.sum().backward()


@st.composite
def inplace_programs(draw: st.DrawFn) -> InplaceProgram:
    """Every step of :data:`STEPS` once, in a drawn order, each in a drawn variant."""
    names = draw(st.permutations(sorted(STEPS)))
    flags = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    return InplaceProgram(tuple(zip(names, flags, strict=True)), draw(st.integers(1, 5)),
                          draw(st.integers(1, 5)), draw(st.booleans()))
