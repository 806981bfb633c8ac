"""Hypothesis strategies for a FLOP counter's bookkeeping: programs of ops run under a
counter, each with a count that a convention of torch's counter fixes (free ops count 0, an
in-place op counts as its out-of-place op, ``torch.cond`` counts its larger branch), and
calls of ops that do real arithmetic a FLOP table may lack.

:func:`free_programs` draws a :class:`FreeProgram`: a chain of elementwise, view, reduction,
normalization and data-movement steps on one tensor, run forward and (optionally) backward.
A counter must count 0 FLOPs for it and report nothing as uncounted.

:func:`arithmetic_calls` draws an :class:`ArithmeticCall`: one of linear algebra or FFT
(:data:`ARITHMETIC`) called ``times`` times after a free program; each call reaches exactly
one aten op with no standard FLOP formula, named here by hand.

:func:`inplace_programs` draws an :class:`InplaceProgram`: a chain of steps on a ``[rows,
cols]`` tensor, every step of :data:`INPLACE_STEPS` once in a drawn order, each run either
out of place (``y.cumsum(-1)``) or in place on a copy (``y.clone().cumsum_(-1)``: the copy
keeps autograd's saved values intact), then optionally a backward. Every step is free by
torch's counter's convention (no matrix product: elementwise ops, also through the
``_foreach_`` kernels and inside a profiler range, scans, masked and indexed writes,
triangle masks), so a counter must count 0 for the program whichever variants run, and
report no op as uncounted where it reports them.

:func:`cond_programs` draws a :class:`CondProgram`, for the FLOP counter's higher-order-op
property: square products on ``x`` ``[n, n]`` run outside every module (``outside``), then
a module (class ``CondBlock``) that runs products (``before``), ``torch.cond(pred,
true_branch, false_branch, (y,))`` and more products (``after``). A step
(:data:`COND_STEPS`) maps ``[n, n]`` to ``[n, n]`` with one product of ``x``: ``mm``,
``addmm``, ``bmm``, or ``empty`` (an ``mm`` with an empty inner dimension: 0 FLOPs, added to
``y``). The two branches draw their steps apart (0-3 each), so an op may run in one branch
only, or count 0 in one and be absent from the other. ``pred`` is drawn.

:func:`loop_programs` draws a :class:`LoopProgram`, for ``torch.while_loop``: products
outside every module, then a module (class ``LoopBlock``) that runs products (``before``),
``while_loop(i < iterations, (i, y) -> (i + 1, body(y)), (0, y))`` with 1-3 drawn body
steps (the first a product that counts) and 0, 2 or 3 iterations (the limit is a tensor:
one compiled loop serves every count), and more products (``after``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn
from torch._higher_order_ops import while_loop

__all__ = ["ARITHMETIC", "COND_STEPS", "FREE_STEPS", "INPLACE_STEPS", "ArithmeticCall",
           "CondBlock", "CondProgram", "FreeProgram", "InplaceProgram", "LoopBlock",
           "LoopProgram", "apply_steps", "arithmetic_calls", "cond_programs", "free_programs",
           "inplace_programs", "loop_programs"]

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

# ---- in-place programs: every step in place or out of place ----------------------------------

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
INPLACE_STEPS: dict[str, tuple[Any, Any]] = {
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
            out_of_place, inplace = INPLACE_STEPS[name]
            y = inplace(y.clone()) if in_place else out_of_place(y)
        if self.backward:
            y.sum().backward()


@st.composite
def inplace_programs(draw: st.DrawFn) -> InplaceProgram:
    """Every step of :data:`INPLACE_STEPS` once, in a drawn order, each in a drawn variant."""
    names = draw(st.permutations(sorted(INPLACE_STEPS)))
    flags = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    return InplaceProgram(tuple(zip(names, flags, strict=True)), draw(st.integers(1, 5)),
                          draw(st.integers(1, 5)), draw(st.booleans()))

# ---- cond programs: torch.cond inside a module -----------------------------------------------

#: step name -> the aten packet name of its product.
COND_STEPS = {"mm": "mm", "addmm": "addmm", "bmm": "bmm", "empty": "mm"}


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


class _ModuleProgram:
    """What the cond and loop programs share: ``x`` is ``[size, size]`` from ``seed``, and a
    run is the products outside every module, then the program's module (``block``)."""

    block: ClassVar[type[nn.Module]]
    outside: tuple[str, ...]
    size: int
    seed: int

    def inputs(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.size, self.size, generator=g) / self.size

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The outside products, then the module: its output."""
        apply_steps(self.outside, x, x)
        return self.block(self)(x)


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
class CondProgram(_ModuleProgram):
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

    block: ClassVar[type[nn.Module]] = CondBlock


@st.composite
def cond_programs(draw: st.DrawFn) -> CondProgram:
    steps = lambda most: st.lists(st.sampled_from(sorted(COND_STEPS)), max_size=most).map(tuple)
    return CondProgram(draw(steps(2)), draw(steps(2)), draw(steps(3)), draw(steps(3)),
                       draw(steps(2)), draw(st.booleans()), draw(st.integers(1, 4)),
                       draw(st.integers(0, 2**16)))


# ---- loop programs: torch.while_loop inside a module -----------------------------------------


class LoopBlock(nn.Module):
    """``before`` steps, ``while_loop`` running the body steps ``iterations`` times, ``after``
    steps. Inside the body the product's second operand is the module's input ``x``."""

    def __init__(self, program: LoopProgram) -> None:
        super().__init__()
        self.program = program

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.program
        y = apply_steps(p.before, x, x)
        limit = torch.tensor(p.iterations)
        # the body returns a copy: while_loop refuses a body whose output aliases its input
        _, y = while_loop(lambda i, y: i < limit,
                          lambda i, y: (i + 1, apply_steps(p.body, y, x).clone()),
                          (torch.tensor(0), y))
        return apply_steps(p.after, y, x)


@dataclass(frozen=True)
class LoopProgram(_ModuleProgram):
    """The drawn loop program (module docstring); ``x`` is ``[size, size]`` from ``seed``."""

    outside: tuple[str, ...]
    before: tuple[str, ...]
    body: tuple[str, ...]
    after: tuple[str, ...]
    iterations: int
    size: int
    seed: int

    block: ClassVar[type[nn.Module]] = LoopBlock


@st.composite
def loop_programs(draw: st.DrawFn) -> LoopProgram:
    steps = lambda least, most: st.lists(st.sampled_from(sorted(COND_STEPS)), min_size=least,
                                         max_size=most).map(tuple)
    # not one: a loop run once cannot tell a count per iteration from a count per loop (the
    # property runs one iteration as an explicit example)
    iterations = st.sampled_from((2, 3, 0))
    # the body's first step is a product that counts, so an iteration always costs FLOPs
    counting = st.sampled_from(sorted(k for k in COND_STEPS if k != "empty"))
    body = st.tuples(counting, steps(0, 2)).map(lambda first_rest: (first_rest[0],
                                                                     *first_rest[1]))
    return LoopProgram(draw(steps(0, 2)), draw(steps(0, 2)), draw(body),
                       draw(steps(0, 2)), draw(iterations), draw(st.integers(1, 4)),
                       draw(st.integers(0, 2**16)))
