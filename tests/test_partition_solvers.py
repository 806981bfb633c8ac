"""The pure pieces on plain data: knapsack solvers, max-flow/min-cut, the budget bound."""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_knapsack import ilp_choices
from refimpl.partition import exact, exhaustive, knapsack
from refimpl.partition.api import joint_graph
from refimpl.partition.cut import Cut
from refimpl.partition.mincut import Network, max_flow_source_side
from refimpl.partition.options import PartitionOptions
from refimpl.partition.partitioner import bans_and_bounds, budget_bound
from refimpl.partition.problem import Problem

EXACT = ["dp", "ilp"]


@pytest.mark.parametrize("solver", EXACT)
def test_exact_solvers_pick_the_best_subset(solver):
    # memories 4,3,3 with capacity 6: {3,3} spares 5+5=10 > {4} alone (9)
    assert knapsack.choose_items(solver, [4, 3, 3], [9.0, 5.0, 5.0], 6) == [1, 2]


@pytest.mark.parametrize("solver", EXACT)
def test_exact_solvers_break_ties_towards_less_memory(solver):
    # item 1 spares nothing: saving it would only cost memory
    assert knapsack.choose_items(solver, [2, 2], [3.0, 0.0], 10) == [0]


KNAPSACKS = st.integers(0, 8).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 20), min_size=n, max_size=n),
    st.lists(st.integers(0, 30), min_size=n, max_size=n), st.integers(0, 60)))


@pytest.mark.parametrize("solver", EXACT)
@given(knapsack_=KNAPSACKS)
def test_exact_solvers_agree_with_every_subset(solver, knapsack_):
    """dp and ilp choose a set of the best runtime, then the least memory, within the
    capacity: one of the sets an enumeration of every subset finds."""
    memories, runtimes, capacity = knapsack_
    chosen = knapsack.choose_items(solver, memories, [float(r) for r in runtimes], capacity)
    best = ilp_choices(memories, runtimes, capacity)[0]
    score = lambda subset: (sum(runtimes[i] for i in subset), -sum(memories[i] for i in subset))
    assert score(chosen) == score(best), (memories, runtimes, capacity, chosen, best)


def test_greedy_is_not_optimal_where_ratio_misleads():
    # ratio order takes the 1-byte item first, then the 10-byte item no longer fits
    memories, runtimes = [1, 10], [2.0, 10.0]
    assert knapsack.greedy(memories, runtimes, 10) == [0]
    assert knapsack.dp(memories, runtimes, 10) == [1]


@pytest.mark.parametrize("solver", [*EXACT, "greedy"])
def test_zero_capacity_saves_nothing(solver):
    assert knapsack.choose_items(solver, [1, 2], [1.0, 1.0], 0) == []


def test_bad_solver_and_inputs_are_named():
    with pytest.raises(ValueError, match="solver='fast' is not one of dp, ilp, greedy"):
        knapsack.choose_items("fast", [1], [1.0], 1)
    with pytest.raises(ValueError, match="differ in length"):
        knapsack.dp([1, 2], [1.0], 1)
    with pytest.raises(ValueError, match="capacity=-1"):
        knapsack.dp([1], [1.0], -1)


def test_dinic_max_flow_and_min_cut():
    # s=0, t=3: 0->1 (3), 0->2 (2), 1->2 (1), 1->3 (2), 2->3 (3): max flow 5
    net = Network(4)
    for u, v, c in [(0, 1, 3), (0, 2, 2), (1, 2, 1), (1, 3, 2), (2, 3, 3)]:
        net.add_edge(u, v, c)
    flow, side = max_flow_source_side(net, 0, 3)
    assert flow == 5
    assert side == {0}  # both source edges are saturated: the cut is {0} | {1, 2, 3}


def test_min_cut_prefers_the_narrow_waist():
    # 0 -> 1 (10) -> 2 (1) -> 3 (10): the cut is the middle edge
    net = Network(4)
    for u, v, c in [(0, 1, 10), (1, 2, 1), (2, 3, 10)]:
        net.add_edge(u, v, c)
    assert max_flow_source_side(net, 0, 3) == (1, {0, 1})


def test_budget_bound():
    assert budget_bound(0, 40, 28 / 40) == 28  # float rounding does not lose a byte
    assert budget_bound(10, 20, 0.0) == 10
    assert budget_bound(10, 20, 1.0) == 20
    assert budget_bound(10, 20, 0.55) == 15


def _contract_graph():
    torch.manual_seed(0)
    args = [torch.randn(8, 8, requires_grad=True), torch.randn(8, 16, requires_grad=True)]
    return joint_graph(lambda x, w: (x @ w).cos().tanh().sin().sum(), *args)


@pytest.mark.parametrize("module, solver", [(exact, "exact"), (exhaustive, "brute"),
                                            (knapsack, "dp"), (knapsack, "greedy"),
                                            (knapsack, "ilp")])
def test_every_solver_keeps_the_one_contract(module, solver):
    """solve(problem, options) -> Cut, the same signature everywhere; the cut fits the bound
    and recomputes nothing banned (refimpl.partition.problem)."""
    assert list(inspect.signature(module.solve).parameters) == ["problem", "options"]
    graph = _contract_graph()
    bans = bans_and_bounds(graph)
    assert bans.high.bytes > bans.low.bytes  # the bound binds between the two plans
    bound = budget_bound(bans.low.bytes, bans.high.bytes, 0.5)
    cut = module.solve(Problem(graph, bans, bound),
                       PartitionOptions(memory_budget=0.5, solver=solver))
    assert isinstance(cut, Cut)
    assert cut.bytes <= bound
    assert not bans.hard & set(cut.recomputed)


@pytest.mark.parametrize("solver", ["exact", "brute", "dp", "ilp", "greedy"])
def test_the_budget_reaches_a_solver_once_as_the_bound(solver):
    """Issue 30, item 4: a solver reads the bound, never ``options.memory_budget`` (the
    knapsack's budget-0 rule used to read it: the plan at one bound then depended on it)."""
    from refimpl.partition.partitioner import SOLVER_MODULES

    torch.manual_seed(0)
    args = [torch.randn(8, 8, requires_grad=True), torch.randn(8, 4, requires_grad=True),
            torch.randn(8, 16, requires_grad=True)]
    graph = joint_graph(lambda x, w1, w2: (x @ w1).cos().sum() + (x @ w2).cos().sum(), *args)
    bans = bans_and_bounds(graph)  # save both products (640 bytes) or neither (0)
    problem = Problem(graph, bans, budget_bound(bans.low.bytes, bans.high.bytes, 0.5))
    cuts = {budget: SOLVER_MODULES[solver].solve(
        problem, PartitionOptions(memory_budget=budget, solver=solver))
        for budget in (0.0, 0.5, 0.9)}
    assert cuts[0.0] == cuts[0.5] == cuts[0.9], {b: c.bytes for b, c in cuts.items()}
    assert cuts[0.5].bytes == 128  # the smaller product fits the bound: it is saved
