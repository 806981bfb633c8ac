"""A module that calls itself keeps its FLOPs: per-module attribution under re-entry.

A module may run inside its own forward (a recursive block, a shared block applied in a
nest): it is running from its outermost call's start to that call's end, so every FLOP in
between is its own, and its name must not drop out when an inner call returns. Each example
draws a block that, at depth ``d``, calls itself at depth ``d - 1`` and then multiplies by
its ``[n, n]`` weight (``d + 1`` products ``[b, n] x [n, n]`` in all), inside a container
``Outer`` that multiplies once more after it, run forward or forward and backward.

By hand (2 FLOPs per multiply-accumulate, ``p = 2 b n n`` a product): the block holds
``(d + 1) p`` forward; the backward forms, per level, the weight's gradient (``p``) and,
above the first level (whose input needs no gradient), the input's (``p``); ``Outer`` adds
its own product and, in the backward, that product's two gradients. "Global" holds
everything; the block's FLOPs count under ``Outer.body`` and ``Outer`` too.

Reach: the block called itself (``d >= 1``).

Against torch (``--refimpl-target torch``, 2.13) this fails: the inner call's exit removes
the block from torch's tracker while the outer call still runs (docs/findings.md, FLOPs 6).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from refimpl.oracle import component
from refimpl.properties.reach import reach


class Recurse(nn.Module):
    """``forward(x, d)``: ``self(x, d - 1)`` (``x`` itself at depth 0), times the weight."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n) / n)

    def forward(self, x: torch.Tensor, depth: int) -> torch.Tensor:
        y = self(x, depth - 1) if depth > 0 else x
        return torch.mm(y, self.weight)


class Outer(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.body = Recurse(n)
        self.weight = nn.Parameter(torch.randn(n, n) / n)

    def forward(self, x: torch.Tensor, depth: int) -> torch.Tensor:
        return torch.mm(self.body(x, depth), self.weight)


def by_hand(depth: int, b: int, n: int, backward: bool) -> dict[str, int]:
    """{name: FLOPs} by the module docstring's derivation."""
    p = 2 * b * n * n
    body = (depth + 1) * p + ((depth + 1) * p + depth * p if backward else 0)
    outer_own = p + (2 * p if backward else 0)
    return {"Global": body + outer_own, "Outer": body + outer_own, "Outer.body": body}


@given(st.integers(0, 3), st.integers(1, 3), st.integers(1, 4), st.booleans())
def test_a_module_that_calls_itself_keeps_its_flops(refimpl_backend, depth, b, n, backward):
    reach(depth >= 1)
    model, x = Outer(n), torch.randn(b, n)
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        out = model(x, depth)
        if backward:
            out.sum().backward()
    observed = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    expected = by_hand(depth, b, n, backward)
    assert observed == expected, (
        f"{refimpl_backend.name}: depth={depth}, b={b}, n={n}, backward={backward}: "
        f"per-module FLOPs {observed}, expected {expected} by hand")
