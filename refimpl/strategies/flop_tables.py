"""Programs whose FLOP table shows every kind of row, for the ``get_table`` property.

:func:`table_programs` draws a :class:`TableProgram`: matrix products (``mm``, ``addmm``,
``bmm``; :class:`MatCall`) run outside every module (``"Global"`` only) and inside a few
root modules, each a tree of nested :class:`StageModule` containers (up to three levels of
children) that run products before and after their children. Products run on the meta
device, so their sizes cost nothing: a program draws a scale ``s`` (0-16) and each size on
a log scale between ``2**(s-3)`` and ``2**s`` (a ``bmm``'s batch near ``2**(s // 2)``), so
the global total spans every unit of the table (none, thousands, ... trillions); one
product in ten has an empty inner dimension (0 FLOPs: a row of 0).

Names, as a counter reports them: a root is named by its class (roots have distinct class
names drawn from :data:`ROOT_NAMES`), a child by its parent's name and its attribute name
(from :data:`CHILD_NAMES`, which sort as strings: ``b10`` before ``b2``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import nn

__all__ = ["CHILD_NAMES", "MAT_OPS", "ROOT_NAMES", "MatCall", "Stage", "StageModule",
           "TableProgram", "table_programs"]

MAT_OPS = ("mm", "addmm", "bmm")
ROOT_NAMES = ("Net", "Head", "Body")
CHILD_NAMES = ("a", "b2", "b10", "layer")


@dataclass(frozen=True)
class MatCall:
    """One product on meta tensors: ``mm`` ``[m, k] x [k, n]``, ``addmm`` the same plus a
    bias ``[n]``, ``bmm`` ``[batch, m, k] x [batch, k, n]`` (batch is 1 for the others)."""

    op: str
    batch: int
    m: int
    k: int
    n: int

    def run(self) -> None:
        meta = lambda *shape: torch.empty(*shape, device="meta")
        if self.op == "bmm":
            torch.bmm(meta(self.batch, self.m, self.k), meta(self.batch, self.k, self.n))
        elif self.op == "addmm":
            torch.addmm(meta(self.n), meta(self.m, self.k), meta(self.k, self.n))
        else:
            torch.mm(meta(self.m, self.k), meta(self.k, self.n))


@dataclass(frozen=True)
class Stage:
    """A module: its name (class name for a root, attribute name for a child), the products
    it runs before its children, its children, and the products it runs after them."""

    name: str
    before: tuple[MatCall, ...]
    children: tuple[Stage, ...]
    after: tuple[MatCall, ...]


class StageModule(nn.Module):
    """Runs a :class:`Stage`: its ``before`` products, each child, its ``after`` products."""

    def __init__(self, stage: Stage) -> None:
        super().__init__()
        self.stage = stage
        for child in stage.children:
            self.add_module(child.name, StageModule(child))

    def forward(self) -> None:
        for call in self.stage.before:
            call.run()
        for child in self.stage.children:
            getattr(self, child.name)()
        for call in self.stage.after:
            call.run()


@dataclass(frozen=True)
class TableProgram:
    """Products run outside every module, then each root module once."""

    outside: tuple[MatCall, ...]
    roots: tuple[Stage, ...]

    def build(self) -> list[nn.Module]:
        """One module per root, of a class named as the root."""
        return [type(root.name, (StageModule,), {})(root) for root in self.roots]

    def run(self, modules: list[nn.Module]) -> None:
        """The ``outside`` products, then each module of :meth:`build` once."""
        for call in self.outside:
            call.run()
        for module in modules:
            module()


def _size(scale: int) -> st.SearchStrategy[int]:
    """At most ``2**scale`` and above ``2**(scale - 3)`` (an exponent ``e`` from ``scale - 2``
    to ``scale``, then a value in ``(2**(e-1), 2**e]``), at least 1."""
    return st.integers(max(0, scale - 2), scale).flatmap(
        lambda e: st.integers(max(1, 2 ** (e - 1)), 2 ** e))


@st.composite
def mat_calls(draw: st.DrawFn, scale: int) -> MatCall:
    """A product whose sizes are near ``2**scale`` (the batch near ``2**(scale // 2)``)."""
    op = draw(st.sampled_from(MAT_OPS))
    batch = draw(_size(scale // 2)) if op == "bmm" else 1
    m, k, n = (draw(_size(scale)) for _ in range(3))
    empty = draw(st.integers(0, 9)) == 0
    return MatCall(op, batch, m, 0 if empty else k, n)


def _calls(draw: st.DrawFn, scale: int, least: int = 0) -> tuple[MatCall, ...]:
    return tuple(draw(st.lists(mat_calls(scale), min_size=least, max_size=2)))


def _stage(draw: st.DrawFn, name: str, level: int, scale: int, least: int = 0) -> Stage:
    names = draw(st.lists(st.sampled_from(CHILD_NAMES), unique=True,
                          max_size=2 if level < 3 else 0))
    before = _calls(draw, scale, least)
    children = tuple(_stage(draw, child, level + 1, scale) for child in names)
    return Stage(name, before, children, _calls(draw, scale))


@st.composite
def table_programs(draw: st.DrawFn) -> TableProgram:
    """A :class:`TableProgram` (module docstring); the first root runs at least one
    product, so the counts are never empty."""
    scale = draw(st.integers(0, 16))
    outside = _calls(draw, scale)
    names = draw(st.lists(st.sampled_from(ROOT_NAMES), unique=True, min_size=1, max_size=2))
    roots = tuple(_stage(draw, name, 1, scale, least=int(i == 0))
                  for i, name in enumerate(names))
    return TableProgram(outside, roots)
