"""Hypothesis strategies for a FLOP counter's bookkeeping: programs of ops that are free by
convention, and calls of ops that do real arithmetic a FLOP table may lack.

:func:`free_programs` draws a :class:`FreeProgram`: a chain of elementwise, view, reduction,
normalization and data-movement steps on one tensor, run forward and (optionally) backward.
A counter must count 0 FLOPs for it and report nothing as uncounted.

:func:`arithmetic_calls` draws an :class:`ArithmeticCall`: one of linear algebra or FFT
(:data:`ARITHMETIC`) called ``times`` times after a free program; each call reaches exactly
one aten op with no standard FLOP formula, named here by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

__all__ = ["ARITHMETIC", "FREE_STEPS", "ArithmeticCall", "FreeProgram", "arithmetic_calls",
           "free_programs"]

#: name -> a step [r, c] -> [r, c] made of free ops only.
FREE_STEPS: dict[str, Any] = {
    "relu": torch.relu, "gelu": F.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "hardswish": F.hardswish, "silu": F.silu, "exp": lambda x: x.clamp(-5, 5).exp(),
    "add_mul": lambda x: x * x + 1.5, "where": lambda x: torch.where(x > 0, x, 0.1 * x),
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: x.log_softmax(-1),
    "sum": lambda x: x - x.sum(-1, keepdim=True),
    "mean_var": lambda x: x / (1 + x.var(correction=0)),
    "cumsum": lambda x: x.cumsum(-1), "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "dropout": lambda x: F.dropout(x, 0.5, training=True),
    "transpose": lambda x: x.t().contiguous().t(), "flip_roll": lambda x: x.flip(0).roll(1, 1),
    "cat_slice": lambda x: torch.cat([x, x], 0)[::2], "pad": lambda x: F.pad(x, (1, 1))[:, 1:-1],
    "sort": lambda x: x.sort(-1).values, "clone": torch.clone,
    "index": lambda x: x[torch.arange(x.shape[0])],
}


@dataclass(frozen=True)
class FreeProgram:
    steps: tuple[str, ...]
    rows: int
    cols: int
    backward: bool

    def run(self) -> None:
        x = torch.randn(self.rows, self.cols, requires_grad=self.backward)
        y = x
        for name in self.steps:
            y = FREE_STEPS[name](y)
        if self.backward:
            y.sum().backward()


@st.composite
def free_programs(draw) -> FreeProgram:
    steps = draw(st.lists(st.sampled_from(sorted(FREE_STEPS)), min_size=1, max_size=5))
    return FreeProgram(tuple(steps), draw(st.integers(1, 5)), draw(st.integers(1, 5)),
                       draw(st.booleans()))


def _spd(n: int) -> torch.Tensor:
    a = torch.randn(n, n)
    return a @ a.T + n * torch.eye(n)


#: name -> (call on size n, the one aten op (packet name) the call reaches).
ARITHMETIC: dict[str, tuple[Any, str]] = {
    "solve": (lambda n: torch.linalg.solve(_spd(n), torch.randn(n, 2)), "_linalg_solve_ex"),
    "inv": (lambda n: torch.linalg.inv(_spd(n)), "linalg_inv_ex"),
    "cholesky": (lambda n: torch.linalg.cholesky(_spd(n)), "linalg_cholesky_ex"),
    "qr": (lambda n: torch.linalg.qr(torch.randn(n, n)), "linalg_qr"),
    "eigh": (lambda n: torch.linalg.eigh(_spd(n)), "_linalg_eigh"),
    "rfft": (lambda n: torch.fft.rfft(torch.randn(2 * n)), "_fft_r2c"),
    "irfft": (lambda n: torch.fft.irfft(torch.randn(n + 1, dtype=torch.complex64)),
              "_fft_c2r"),
}


@dataclass(frozen=True)
class ArithmeticCall:
    name: str
    size: int
    times: int
    prefix: FreeProgram

    @property
    def op(self) -> Any:
        return getattr(torch.ops.aten, ARITHMETIC[self.name][1])

    def run(self) -> None:
        """The free prefix, then ``times`` calls (building an SPD matrix runs one mm, which a
        counter counts: only the uncounted report is about this call)."""
        self.prefix.run()
        for _ in range(self.times):
            ARITHMETIC[self.name][0](self.size)


@st.composite
def arithmetic_calls(draw) -> ArithmeticCall:
    return ArithmeticCall(draw(st.sampled_from(sorted(ARITHMETIC))), draw(st.integers(1, 4)),
                          draw(st.integers(1, 3)), draw(free_programs()))
