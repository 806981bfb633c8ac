"""The default solver returns the optimum of docs/design.md's problem, and the knapsack does not.

The expectation is derived here, sharing no code with ``refimpl.partition`` beyond the plain
``JointGraph`` data: :func:`frontier` searches every save-or-recompute choice (memoised on the
set of pending values) and gives, for each byte figure, the least recompute cost. The
default solver's cost at a bound must be the least cost among the frontier's points within
that bound. The strategy meta-test measures how often torch's knapsack formulation falls short
of that optimum on ``refimpl.strategies.programs``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.partition.api import explain_many, joint_graph
from refimpl.partition.graph import JointGraph
from refimpl.partition.partitioner import choose, choose_many
from refimpl.strategies.programs import programs

#: the proof runs on graphs with at most this many forward nodes the backward needs.
MAX_FORWARD_NODES = 16


def _needed(graph: JointGraph) -> list[str]:
    seen, stack = set(), list(graph.read_by_backward())
    while stack:
        name = stack.pop()
        if name not in seen and graph.by_name[name].role == "forward":
            seen.add(name)
            stack.extend(graph.by_name[name].inputs)
    return sorted(seen, key=graph.order.__getitem__)


def frontier(graph: JointGraph) -> dict[int, float]:
    """bytes -> least recompute cost over every valid plan (no checkpoint annotations).

    Search: resolve the pending forward value latest in graph order (all its users are
    resolved): save it (if it owns a storage and is savable: a view is saved as its base, at
    the same bytes, recomputed for free) or recompute it (unless random or mutating), which
    makes its inputs pending. Each storage is resolved once, so bytes add up."""
    order, memo = graph.order, {}

    def solve(pending: frozenset[str]) -> dict[int, float]:
        if not pending:
            return {0: 0.0}
        if pending not in memo:
            name = max(pending, key=order.__getitem__)
            node, rest = graph.by_name[name], pending - {name}
            choices = []
            if node.savable and (not node.view or node.bytes == 0):
                choices.append((rest, node.bytes, 0.0))
            if not (node.random or node.mutable):
                ins = {i for i in node.inputs if graph.by_name[i].role == "forward"}
                choices.append((rest | ins, 0, node.runtime if node.fw_required else 0.0))
            best: dict[int, float] = {}
            for nxt, size, cost in choices:
                for b, c in solve(frozenset(nxt)).items():
                    best[b + size] = min(best.get(b + size, c + cost), c + cost)
            memo[pending] = best
        return memo[pending]

    reads = {n for n in graph.read_by_backward() if graph.by_name[n].role == "forward"}
    return solve(frozenset(reads))


def optimum(points: dict[int, float], bound: int) -> float:
    return min(c for b, c in points.items() if b <= bound)


def issue_program(x, w1, w2):
    """Issue 13: an expensive matmul whose only use is a 256-byte row sum."""
    s1 = (x @ w1).sum(1)
    return s1.cos().sum() + (x @ w2).cos().sum()


def issue_inputs():
    torch.manual_seed(0)
    return [torch.randn(64, n, requires_grad=True) for n in (64, 256, 64)]


def test_issue_program_saves_the_row_sum():
    plans = explain_many(issue_program, *issue_inputs(), memory_budgets=[0.1, 0.5, 0.9])
    for plan in plans:
        assert plan.saved_bytes == 256 and plan.recompute_cost == 2 * 64 * 64 * 64
    knapsack = explain_many(issue_program, *issue_inputs(), memory_budgets=[0.5], solver="dp")
    assert knapsack[0].recompute_cost == 2 * 64 * 64 * (64 + 256)  # both matmuls again


@settings(suppress_health_check=list(HealthCheck))
@given(spec=programs(max_steps=6), budgets=st.lists(st.floats(0, 1, exclude_max=True), min_size=1,
                                         max_size=3))
def test_default_solver_equals_brute_force(spec, budgets):
    graph = joint_graph(spec.make(), *spec.inputs())
    assume(len(_needed(graph)) <= MAX_FORWARD_NODES)
    points = frontier(graph)
    for plan in choose_many(graph, budgets, refimpl.PartitionOptions()):
        expected = optimum(points, plan.bound_bytes)
        assert plan.saved_bytes <= plan.bound_bytes, (str(spec), plan.summary())
        assert plan.recompute_cost == pytest.approx(expected, rel=1e-12, abs=1e-9), (
            f"{spec}\nbudget={plan.memory_budget} expected cost {expected}, "
            f"got {plan.recompute_cost}\n{plan.summary()}")
        assert plan.saved_bytes == min(b for b, c in points.items() if b <= plan.bound_bytes
                                       and c <= expected * (1 + 1e-12) + 1e-9)


def test_brute_solver_agrees_with_exact_and_refuses_large_graphs():
    from refimpl.partition.errors import TooLargeForBrute

    graph = joint_graph(issue_program, *issue_inputs())
    for budget in (0.0, 0.3, 0.7):
        options = refimpl.PartitionOptions(memory_budget=budget)
        exact, brute = choose(graph, options), choose(graph, options.__class__(
            memory_budget=budget, solver="brute"))
        assert (exact.recompute_cost, exact.saved_bytes) == (brute.recompute_cost,
                                                             brute.saved_bytes)
    wide = lambda x, *ws: sum((x @ w).cos().sum() for w in ws)
    args = [torch.randn(4, 4, requires_grad=True) for _ in range(12)]
    with pytest.raises(TooLargeForBrute, match=r"solver='brute' .* n <= 16; .* n=\d+"):
        explain_many(wide, *args, memory_budgets=[0.5], solver="brute")


def knapsack_falls_short(spec) -> bool:
    """Whether torch's knapsack (dp) recomputes more than the optimum at some budget."""
    graph = joint_graph(spec.make(), *spec.inputs())
    budgets = [0.1, 0.3, 0.5, 0.7, 0.9]
    best = choose_many(graph, budgets, refimpl.PartitionOptions())
    dp = choose_many(graph, budgets, refimpl.PartitionOptions(solver="dp"))
    return any(k.recompute_cost > b.recompute_cost * (1 + 1e-9) for k, b in zip(dp, best))


def test_strategy_reaches_knapsack_worse_than_optimum():
    """Meta-test: programs() makes the shapes where the knapsack goes wrong, often."""
    shares = []

    @settings(max_examples=40, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(spec=programs())
    def draw(spec):
        shares.append(knapsack_falls_short(spec))

    draw()
    share = sum(shares) / len(shares)
    assert share >= 0.15, f"knapsack worse than the optimum in {share:.0%} of draws"
