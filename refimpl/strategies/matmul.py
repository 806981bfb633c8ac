"""Hypothesis strategies for the mm family: shapes that fit together, and the call.

:func:`matmul_cases` draws a :class:`MatmulCase`: an op (mm, addmm, bmm, baddbmm, addbmm,
mv, addmv, dot, outer, addr) with sizes ``batch, m, k, n`` (each >= 1; with ``large``, in
one case in four, one size the op uses past 256) and, for the ops with a bias, a bias
shape that broadcasts to the result, and the ``beta``/``alpha`` scalars it passes by keyword
(none, one or both; pytorch/pytorch#98247's formula raised on a keyword it did not expect).
It shrinks towards ``mm`` of 1x1 by 1x1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

__all__ = ["MATMUL_OPS", "SCALED_OPS", "MatmulCase", "matmul_cases", "matmul_dims"]

#: op name -> (factor shapes as a function of (b, m, k, n), result shape).
MATMUL_OPS: dict[str, tuple] = {
    "mm": (lambda b, m, k, n: [(m, k), (k, n)], lambda b, m, k, n: (m, n)),
    "addmm": (lambda b, m, k, n: [(m, k), (k, n)], lambda b, m, k, n: (m, n)),
    "bmm": (lambda b, m, k, n: [(b, m, k), (b, k, n)], lambda b, m, k, n: (b, m, n)),
    "baddbmm": (lambda b, m, k, n: [(b, m, k), (b, k, n)], lambda b, m, k, n: (b, m, n)),
    "addbmm": (lambda b, m, k, n: [(b, m, k), (b, k, n)], lambda b, m, k, n: (m, n)),
    "mv": (lambda b, m, k, n: [(m, k), (k,)], lambda b, m, k, n: (m,)),
    "addmv": (lambda b, m, k, n: [(m, k), (k,)], lambda b, m, k, n: (m,)),
    "dot": (lambda b, m, k, n: [(k,), (k,)], lambda b, m, k, n: ()),
    "outer": (lambda b, m, k, n: [(m,), (n,)], lambda b, m, k, n: (m, n)),
    "addr": (lambda b, m, k, n: [(m,), (n,)], lambda b, m, k, n: (m, n)),
}

#: the ops that take ``beta`` (the bias's scale) and ``alpha`` (the product's) as keywords
SCALED_OPS = frozenset({"addmm", "baddbmm", "addbmm", "addmv", "addr"})
#: the keyword scalar sets a case may pass; the first (none) is where shrinking goes
_KEYWORD_SETS = ((), ("beta",), ("alpha",), ("beta", "alpha"))

_EFFECTIVE = {  # the (batch, m, k, n) each op multiplies: vector forms set sizes to 1
    "mm": lambda b, m, k, n: (1, m, k, n), "addmm": lambda b, m, k, n: (1, m, k, n),
    "bmm": lambda b, m, k, n: (b, m, k, n), "baddbmm": lambda b, m, k, n: (b, m, k, n),
    "addbmm": lambda b, m, k, n: (b, m, k, n), "mv": lambda b, m, k, n: (1, m, k, 1),
    "addmv": lambda b, m, k, n: (1, m, k, 1), "dot": lambda b, m, k, n: (1, 1, k, 1),
    "outer": lambda b, m, k, n: (1, m, 1, n), "addr": lambda b, m, k, n: (1, m, 1, n),
}


def _used_sizes(op: str) -> tuple[int, ...]:
    """Positions in (batch, m, k, n) of the sizes ``op`` multiplies (by :data:`_EFFECTIVE`,
    read with four distinct primes: a size the op leaves out is set to 1)."""
    primes = (2, 3, 5, 7)
    return tuple(i for i, p in enumerate(primes) if p in _EFFECTIVE[op](*primes))


@dataclass(frozen=True)
class MatmulCase:
    """One call of ``torch.<op>``: sizes, the bias shape for the ops that take one, and the
    ``(name, value)`` scalars (``beta``, ``alpha``) passed by keyword, empty for none."""

    op: str
    batch: int
    m: int
    k: int
    n: int
    bias_shape: tuple[int, ...] | None
    scalars: tuple[tuple[str, float], ...] = ()

    @property
    def factor_shapes(self) -> list[tuple[int, ...]]:
        return MATMUL_OPS[self.op][0](self.batch, self.m, self.k, self.n)

    @property
    def multiplied(self) -> tuple[int, int, int, int]:
        """(batch, m, k, n) of the products actually formed."""
        return _EFFECTIVE[self.op](self.batch, self.m, self.k, self.n)

    def args(self, requires_grad: bool = False) -> list[torch.Tensor]:
        shapes = ([self.bias_shape] if self.bias_shape is not None else []) + \
            self.factor_shapes
        return [torch.randn(s, requires_grad=requires_grad) for s in shapes]

    def run(self, *args: torch.Tensor) -> torch.Tensor:
        return getattr(torch, self.op)(*args, **dict(self.scalars))


#: sizes past CPython's cache of small ints (-5 to 256): two equal sizes read off two
#: tensors are two objects there, so a size compared with ``is`` instead of ``==`` differs
LARGE_SIZES = st.integers(257, 300)


def matmul_dims(max_size: int = 6) -> st.SearchStrategy[tuple[int, int, int, int]]:
    """(batch, m, k, n), each in [1, max_size]."""
    size = st.integers(1, max_size)
    return st.tuples(size, size, size, size)


@st.composite
def matmul_cases(draw, ops: st.SearchStrategy[str] | None = None,
                 max_size: int = 6, large: bool = False) -> MatmulCase:
    """A MatmulCase with valid shapes; ``ops`` narrows the ops drawn. With ``large``, in a
    quarter of the cases one of the sizes the op uses (drawn) is from :data:`LARGE_SIZES`
    instead (one only: the product stays small)."""
    op = draw(ops if ops is not None else st.sampled_from(list(MATMUL_OPS)))
    if op not in MATMUL_OPS:
        raise ValueError(f"matmul_cases: op={op!r} is not one of {sorted(MATMUL_OPS)}")
    dims = list(draw(matmul_dims(max_size)))
    kept: tuple[bool, ...] | None = None
    if op.startswith("add") or op == "baddbmm":
        # drop leading dims and set some to 1: shapes that broadcast to the result
        rank = len(MATMUL_OPS[op][1](*dims))
        kept = tuple(draw(st.booleans()) for _ in range(draw(st.integers(0, rank))))
    scalars: tuple[tuple[str, float], ...] = ()
    if op in SCALED_OPS:
        names = draw(st.sampled_from(_KEYWORD_SETS))
        scalars = tuple((name, draw(st.sampled_from([0.5, 2.0]))) for name in names)
    if large and draw(st.integers(0, 3)) == 3:
        dims[draw(st.sampled_from(_used_sizes(op)))] = draw(LARGE_SIZES)
    b, m, k, n = dims
    bias = None
    if kept is not None:
        full = MATMUL_OPS[op][1](b, m, k, n)
        bias = tuple(d if keep else 1 for d, keep in zip(full[len(full) - len(kept):], kept))
    return MatmulCase(op, b, m, k, n, bias, scalars)
