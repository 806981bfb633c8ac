"""refimpl's budget-1.0 plan recomputes the ops torch's partitioner lists as recomputable.

torch's min-cut partitioner bans from recompute, at budget 1.0, every op outside its
recomputable allowlist (``torch._functorch.partitioners``: pointwise ops, views, factories
such as ``aten.arange`` and ``prims.iota``, and, for indexing, ``aten.index`` and
``aten.gather``), and any value a non-pointwise backward op reads. An allowlisted op whose
value the backward reads only through pointwise ops is recomputed when that keeps fewer
bytes. refimpl's list (``refimpl.partition.candidates.CHEAP_OPS``) lacked ``iota`` (what
``arange`` decomposes to), ``index`` and ``gather``: it kept their outputs at budget 1.0
where torch recomputes them. The properties' factory links
(``refimpl.strategies.programs.pointwise_chains``) catch the first, its indexing links the
others; these programs pin all three at hand-counted bytes, and pin the property's
expectation (``SaveProblem.runtime_optimised``: the index, which the backward's scatter
reads from memory, is kept) at the same figures.

Expected bytes are counted by hand: float32 values of shape ``(3, 5)`` are 60 bytes, the
int64 index ``arange(4, -1, -1)`` is 40.
"""

from __future__ import annotations

import pytest
import torch

from refimpl.expect.partition_brute import trace_reference
from refimpl.partition.api import explain


def _indexing(kind: str):
    def fn(x, w):
        y = (x @ w).cos()  # the backward of cos reads the matmul's output: kept (60 bytes)
        idx = torch.arange(y.shape[1] - 1, -1, -1)  # read by the backward's scatter: kept
        z = y.gather(1, idx.expand(y.shape)) if kind == "gather" else y[:, idx]
        return z.sin().sum()  # sin's backward reads z through a pointwise op only

    return fn


@pytest.mark.parametrize("kind", ["gather", "index"])
def test_budget_one_recomputes_an_indexing_op(kind: str):
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    plan = explain(_indexing(kind), x, w, memory_budget=1.0)
    assert plan.saved_bytes == 60 + 40, plan.summary()
    assert any(name.startswith(kind) for name in plan.recomputed), plan.summary()


def test_budget_one_recomputes_an_arange():
    def fn(x, w):
        y = (x @ w).cos()
        return (y * torch.arange(1, 6) / 5).sin().sum()  # the ramp: read by mul's backward

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    plan = explain(fn, x, w, memory_budget=1.0)
    assert plan.saved_bytes == 60, plan.summary()  # the matmul's output; the ramp recomputed
    assert any(name.startswith("iota") for name in plan.recomputed), plan.summary()


@pytest.mark.parametrize("kind", ["gather", "index"])
def test_the_chain_expectation_keeps_the_index_of_an_indexing_op(kind: str):
    """The brute force's runtime-optimised plan: the matmul's output (60 bytes) and the
    int64 index its backward scatter materialises (40), the rest recomputed at 0 FLOPs."""
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    problem = trace_reference(_indexing(kind), [x, w], seed=0).problem
    assert problem.runtime_optimised().bytes == 60 + 40
    assert problem.runtime_optimised().flops == 0
    assert [n.name for n in problem.nodes if n.materialised][:1] == ["iota"]


def test_the_chain_expectation_recomputes_a_ramp_a_multiply_reads():
    """A factory read only through a multiply (pointwise) is not materialised: 60 bytes."""
    def fn(x, w):
        return ((x @ w).cos() * torch.arange(1, 6) / 5).sin().sum()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    assert trace_reference(fn, [x, w], seed=0).problem.runtime_optimised().bytes == 60
