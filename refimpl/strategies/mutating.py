"""Random programs that write to an input in place, for the partitioner's properties.

A :class:`MutationSpec` is plain data. The program takes ``x`` (``(n, width)``,
``requires_grad``) and a weight ``w`` (``(width, width)``, no grad: a buffer-like input the
program updates, as an optimiser step or a running statistic does), and runs

1. ``mutate``: an in-place write to ``w`` (or to a view of it): ``w.add_(c)``, ``w.mul_(c)``,
   ``w[:, :k].add_(c)`` (a view's columns), ``w.copy_(w.cos())``;
2. ``read``: a value ``h`` computed from the NEW ``w``: ``w`` itself, ``w.sin()``,
   ``w * c`` or ``w[:, :k] @ w[:, :k].t()`` (square again);
3. ``y = x @ h`` and a nonlinear op of ``y`` (cos, sin or tanh), summed.

The backward of ``x @ h`` reads ``h`` (the gradient of ``x`` is ``g @ h.T``); ``h`` is cheap to
recompute from ``w`` and costs bytes to save, so a budget below 1 tempts a partitioner to
recompute it in the backward from the graph's input ``w``. AOTAutograd copies ``w``'s new
value in after the forward graph has run, so that recompute reads a value the forward never
used (or trips autograd's version check).
Eager saves ``h``; so must a correct partitioner. The write always precedes every read, so
eager itself never reads a stale ``w`` and never raises.

A quarter of the programs have ``width`` 0: ``x`` and ``w`` are both empty, and two empty
tensors report the same storage address (0) without sharing any storage (AOTAutograd does
not treat them as aliases), so a partitioner that takes them for aliased inputs of a
mutating graph wrongly refuses or mis-maps the program.

``spec.make()`` returns ``fn(x, w)``; ``spec.inputs(seed)`` fresh inputs ``[x, w]`` and
``spec.arguments(x, w)`` the call's arguments; ``str(spec)`` prints the program for a
reproducer.

:func:`aliased_mutation_programs` draws the same programs with a third input ``v`` that
shares ``w``'s storage (``w`` itself, ``w.t()`` or ``w[:, :k]``), the three passed in a
drawn order: the program writes to ``w`` and computes ``h`` from ``v``, two times in three
BEFORE the write (eager then reads ``w``'s old values through ``v``; a backward that
recomputes ``h`` from the graph's input reads the new ones). AOTAutograd merges two
aliased inputs into one synthetic base, so its primals no longer follow the call's inputs
one to one: a backend must handle that or refuse it by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

__all__ = ["ALIASES", "MUTATIONS", "READS", "AliasSpec", "MutationSpec",
           "aliased_mutation_programs", "mutation_programs"]

MUTATIONS = ("add_", "mul_", "slice_add_", "copy_cos")
READS = ("identity", "sin", "scale", "slice")
NONLINEAR = {"cos": torch.cos, "sin": torch.sin, "tanh": torch.tanh}
#: how ``v`` shares ``w``'s storage (:class:`AliasSpec`)
ALIASES = ("same", "transpose", "columns")


@dataclass(frozen=True)
class MutationSpec:
    """One program of the module docstring's family."""

    n: int
    width: int
    mutate: str
    read: str
    nonlinear: str
    constant: float
    k: int  # columns of the slice views (1 <= k <= width; 0 when width is 0)

    def __str__(self) -> str:
        return (f"MutationSpec(n={self.n}, width={self.width}, mutate={self.mutate!r}, "
                f"read={self.read!r}, nonlinear={self.nonlinear!r}, "
                f"constant={self.constant!r}, k={self.k})")

    def write_into(self, w: torch.Tensor) -> None:
        """Step 1: the in-place write ``mutate`` to ``w``."""
        c, k = self.constant, self.k
        if self.mutate == "add_":
            w.add_(c)
        elif self.mutate == "mul_":
            w.mul_(c)
        elif self.mutate == "slice_add_":
            w[:, :k].add_(c)
        else:  # copy_cos
            w.copy_(w.cos())

    def read_from(self, w: torch.Tensor) -> torch.Tensor:
        """Step 2: the value ``h`` that ``read`` computes from ``w``."""
        if self.read == "identity":
            return w
        if self.read == "sin":
            return w.sin()
        if self.read == "scale":
            return w * self.constant
        return w[:, :self.k] @ w[:, :self.k].t()  # slice: (width, width) again

    def make(self):
        nonlinear = NONLINEAR[self.nonlinear]

        def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            self.write_into(w)
            return nonlinear(x @ self.read_from(w)).sum()

        return fn

    def inputs(self, seed: int) -> list[torch.Tensor]:
        """``[x, w]``: ``x`` requires grad, ``w`` does not (it is written in place)."""
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(self.n, self.width, generator=gen).requires_grad_()
        w = torch.randn(self.width, self.width, generator=gen) / self.width ** 0.5
        return [x, w]

    def arguments(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The arguments of ``make()``'s function for inputs ``x`` and ``w``."""
        return (x, w)


@dataclass(frozen=True)
class AliasSpec:
    """``program``'s write and read with ``v``, a view of ``w`` (``alias``: ``w`` itself,
    ``w.t()`` or ``w[:, :program.k]``), as the read's source; ``read_first``: ``h`` is
    computed before the write; ``order``: where ``x``, ``w`` and ``v`` sit in the call."""

    program: MutationSpec
    alias: str
    read_first: bool
    order: tuple[str, ...]

    def __str__(self) -> str:
        return (f"AliasSpec(program={self.program}, alias={self.alias!r}, "
                f"read_first={self.read_first}, order={self.order!r})")

    def make(self):
        p, nonlinear = self.program, NONLINEAR[self.program.nonlinear]

        def fn(*args: torch.Tensor) -> torch.Tensor:
            named = dict(zip(self.order, args, strict=True))
            w, v = named["w"], named["v"]
            if self.read_first:
                h = p.read_from(v)
                p.write_into(w)
            else:
                p.write_into(w)
                h = p.read_from(v)
            return nonlinear(named["x"] @ h).sum()

        return fn

    def inputs(self, seed: int) -> list[torch.Tensor]:
        """``[x, w]`` (:meth:`MutationSpec.inputs`); ``v`` is made by :meth:`arguments`."""
        return self.program.inputs(seed)

    def arguments(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x``, ``w`` and the view ``v`` of ``w``, in ``order``."""
        views = {"same": lambda: w, "transpose": w.t, "columns": lambda: w[:, :self.program.k]}
        named = {"x": x, "w": w, "v": views[self.alias]()}
        return tuple(named[name] for name in self.order)


@st.composite
def mutation_programs(draw: st.DrawFn) -> MutationSpec:
    """A :class:`MutationSpec` (module docstring)."""
    empty = draw(st.integers(0, 3), label="zero_size") == 0  # a quarter: x and w empty
    width = 0 if empty else draw(st.integers(2, 24), label="width")
    return MutationSpec(
        n=draw(st.integers(1, 16), label="n"), width=width,
        mutate=draw(st.sampled_from(MUTATIONS), label="mutate"),
        read=draw(st.sampled_from(READS), label="read"),
        nonlinear=draw(st.sampled_from(sorted(NONLINEAR)), label="nonlinear"),
        constant=draw(st.sampled_from([0.5, 1.0, 2.0, -1.5]), label="constant"),
        k=draw(st.integers(min(1, width), width), label="k"))


@st.composite
def aliased_mutation_programs(draw: st.DrawFn) -> AliasSpec:
    """An :class:`AliasSpec` (module docstring): the read comes first two times in three."""
    return AliasSpec(
        program=draw(mutation_programs(), label="program"),
        alias=draw(st.sampled_from(ALIASES), label="alias"),
        read_first=draw(st.sampled_from([True, True, False]), label="read_first"),
        order=draw(st.permutations(("x", "w", "v")).map(tuple), label="order"))
