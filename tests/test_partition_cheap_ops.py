"""refimpl's budget-1.0 plan recomputes the ops torch's partitioner lists as recomputable.

torch's min-cut partitioner bans from recompute, at budget 1.0, every op outside its
recomputable allowlist (``torch._functorch.partitioners``: pointwise ops, views, factories
such as ``aten.arange`` and ``prims.iota``, and, for indexing, ``aten.index`` and
``aten.gather``), and any value a non-pointwise backward op reads. An allowlisted op whose
value the backward reads only through pointwise ops is recomputed when that keeps fewer
bytes. refimpl's list (``refimpl.partition.candidates.CHEAP_OPS``) lacked ``iota`` (what
``arange`` decomposes to), ``index`` and ``gather``: it kept their outputs at budget 1.0
where torch recomputes them. The properties' factory links
(``refimpl.strategies.programs.pointwise_chains``) catch the first; these programs pin the
indexing ops, whose index tensor a chain property cannot leave out (the backward's scatter
reads it, so the fewest-bytes plan of the brute force is not torch's).

Expected bytes are counted by hand: float32 values of shape ``(3, 5)`` are 60 bytes, the
int64 index ``arange(4, -1, -1)`` is 40.
"""

from __future__ import annotations

import pytest
import torch

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
