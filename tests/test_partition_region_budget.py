"""torch's ``region_activation_memory_budget`` (issue 21, item 5; torch 2.13.0 and 2.14.1 have
it, the floor 2.10 has not), pinned on CPU with
refimpl's meter: a region budget replaces the global budget of the graph it covers, and a
region that covers only part of a graph, or two budgets in one graph, raise (as torch's
partitioner does). Skipped, with the reason, on releases without the API."""

from __future__ import annotations

import pytest
import torch

import refimpl.partition.api as api
from refimpl.memory import saved_activation_bytes
from refimpl.partition.region import ANNOTATION_KEY, RegionBudgetError

pytestmark = pytest.mark.skipif(
    ANNOTATION_KEY is None or not hasattr(torch.autograd.graph,
                                          "region_activation_memory_budget"),
    reason=f"torch {torch.__version__} has no torch.autograd.graph."
           "region_activation_memory_budget")

N = 256
MM_BYTES = N * N * 4  # one float32 256x256 activation: 256 KiB


def region(budget: float):
    return torch.autograd.graph.region_activation_memory_budget(budget)


def plain(x, w):
    return (x @ w).cos().cos().sum()


def whole(x, w):
    with region(0.0):
        return (x @ w).cos().cos().sum()


def part(x, w):
    y = x @ w
    with region(0.0):
        return y.cos().cos().sum()


def inputs():
    torch.manual_seed(0)
    return (torch.randn(N, N, requires_grad=True), torch.randn(N, N, requires_grad=True))


def test_issue_example_region_budget_zero_saves_no_activation():
    """The issue's example: eager 512 KiB, refimpl before the fix 256 KiB (the mm), torch
    2.14.1's partitioner 0 bytes."""
    torch._dynamo.reset()
    assert saved_activation_bytes(plain, *inputs()) == 2 * MM_BYTES  # eager: mm and cos
    assert saved_activation_bytes(api.compile(whole), *inputs()) == 0
    assert saved_activation_bytes(api.compile(whole, memory_budget=1.0), *inputs()) == 0


def test_region_budget_overrides_the_global_budget_in_explain():
    plan = api.explain(whole, *inputs(), memory_budget=1.0)
    assert (plan.memory_budget, plan.saved_bytes, plan.max_bytes) == (0.0, 0, MM_BYTES)
    plans = api.explain_many(whole, *inputs(), memory_budgets=[0.5, 1.0])
    assert [p.saved_bytes for p in plans] == [0, 0]


def test_partial_region_raises_as_torch_does():
    with pytest.raises(Exception, match="covers only part") as info:
        api.compile(part)(*inputs())
    raised = getattr(info.value, "inner_exception", info.value)  # dynamo wraps it
    assert isinstance(raised, RegionBudgetError), info.value
    torch._dynamo.reset()
    with pytest.raises(Exception, match="must cover the entire forward"):
        torch.compile(part, backend="aot_eager_decomp_partition")(*inputs())


def test_two_budgets_in_one_graph_raise():
    def two(x, w):
        with region(0.0):
            y = (x @ w).cos()
        with region(1.0):
            return y.cos().sum()

    with pytest.raises(Exception, match=r"carries budgets \[0.0, 1.0\]"):
        api.compile(two)(*inputs())
