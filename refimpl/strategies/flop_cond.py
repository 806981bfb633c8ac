"""Programs that call ``torch.cond`` inside a module, for the FLOP counter's higher-order-op
property.

:func:`cond_programs` draws a :class:`CondProgram`: square products on ``x`` ``[n, n]`` run
outside every module (``outside``), then a module (class ``CondBlock``) that runs products
(``before``), ``torch.cond(pred, true_branch, false_branch, (y,))`` and more products
(``after``). A step (:data:`STEPS`) maps ``[n, n]`` to ``[n, n]`` with one product of
``x``: ``mm``, ``addmm``, ``bmm``, or ``empty`` (an ``mm`` with an empty inner dimension: 0
FLOPs, added to ``y``). The two branches draw their steps apart (0-3 each), so an op may run
in one branch only, or count 0 in one and be absent from the other. ``pred`` is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import nn

__all__ = ["STEPS", "CondBlock", "CondProgram", "apply_steps", "cond_programs"]

#: step name -> the aten packet name of its product.
STEPS = {"mm": "mm", "addmm": "addmm", "bmm": "bmm", "empty": "mm"}


def apply_steps(steps: tuple[str, ...], y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y`` through ``steps`` (module docstring), each multiplying by ``x``."""
    for step in steps:
        if step == "mm":
            y = torch.mm(y, x)
        elif step == "addmm":
            y = torch.addmm(y, y, x)
        elif step == "bmm":
            y = torch.bmm(y[None], x[None])[0]
        else:
            y = y + torch.mm(y[:, :0], x[:0, :])
    return y


class CondBlock(nn.Module):
    """``before`` steps, ``torch.cond`` over the two branches' steps, ``after`` steps."""

    def __init__(self, program: CondProgram) -> None:
        super().__init__()
        self.program = program

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.program
        y = apply_steps(p.before, x, x)
        # a branch returns a copy: torch.cond refuses a branch whose output is its input
        pred = y.new_ones(()) > (0 if p.pred else 2)
        y = torch.cond(pred, lambda y: apply_steps(p.true_steps, y, y).clone(),
                       lambda y: apply_steps(p.false_steps, y, y).clone(), (y,))
        return apply_steps(p.after, y, x)


@dataclass(frozen=True)
class CondProgram:
    """The drawn program (module docstring); ``x`` is ``[size, size]`` from ``seed``. Inside
    a branch the product's second operand is the branch's input."""

    outside: tuple[str, ...]
    before: tuple[str, ...]
    true_steps: tuple[str, ...]
    false_steps: tuple[str, ...]
    after: tuple[str, ...]
    pred: bool
    size: int
    seed: int

    def inputs(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.size, self.size, generator=g) / self.size

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The outside products, then the module: its output."""
        apply_steps(self.outside, x, x)
        return CondBlock(self)(x)


@st.composite
def cond_programs(draw: st.DrawFn) -> CondProgram:
    steps = lambda most: st.lists(st.sampled_from(sorted(STEPS)), max_size=most).map(tuple)
    return CondProgram(draw(steps(2)), draw(steps(2)), draw(steps(3)), draw(steps(3)),
                       draw(steps(2)), draw(st.booleans()), draw(st.integers(1, 4)),
                       draw(st.integers(0, 2**16)))
