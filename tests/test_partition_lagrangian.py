"""The Lagrangian / parametric min-cut (``refimpl.partition.lagrangian``) against brute force.

Expectations come from :func:`tests.test_partition_optimum.frontier` (every save-or-recompute
choice, sharing no code with the solver) and from hand derivation: the least cost at each
byte figure, the optimum within a bound, and the lower convex hull of those points
(:func:`hull_at`), which is where a Lagrangian method is exact.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings

from refimpl.partition.api import joint_graph
from refimpl.partition.errors import InfeasibleBudget
from refimpl.partition.lagrangian import lagrangian_cut, parametric_plan
from refimpl.partition.partitioner import bans_and_bounds, budget_bound
from refimpl.strategies.programs import programs
from tests.test_partition_optimum import (
    MAX_FORWARD_NODES,
    _needed,
    frontier,
    issue_inputs,
    issue_program,
    optimum,
)

BUDGETS = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]


def hull_at(points: dict[int, float], x: int) -> float:
    """The lower convex hull at ``x`` of ``cost(bytes <= b)`` (non-increasing in ``b``):
    the least interpolation between a point at or left of ``x`` and one at or right of it
    (a point left of ``x`` also counts on its own: more bytes never cost more)."""
    left = [(b, c) for b, c in points.items() if b <= x]
    right = [(b, c) for b, c in points.items() if b >= x] + [(x, min(c for _, c in left))]
    return min(c0 + (c1 - c0) * (x - b0) / (b1 - b0) if b1 > b0 else c0
               for b0, c0 in left for b1, c1 in right)


def two_branches(x1, w1, x2, w2):
    """Two independent matmuls: branch 1 (1 KiB output, 8 kFLOP) is less cost-efficient per
    byte than branch 2 (2 KiB, 64 kFLOP), so saving branch 1 alone is no hull vertex."""
    return (x1 @ w1).cos().sum() + (x2 @ w2).cos().sum()


def two_branch_inputs():
    torch.manual_seed(0)
    return [torch.randn(*s, requires_grad=True) for s in ((16, 16), (16, 16), (16, 64),
                                                          (64, 32))]


def solve(graph, budget):
    bans = bans_and_bounds(graph)
    bound = budget_bound(bans.low.bytes, bans.high.bytes, budget)
    return bound, parametric_plan(graph, bound, bans.hard, bans.unsavable)


@settings(max_examples=8, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(spec=programs(max_steps=6))
def test_bounds_bracket_the_brute_force_optimum(spec):
    graph = joint_graph(spec.make(), *spec.inputs())
    assume(len(_needed(graph)) <= MAX_FORWARD_NODES)
    points = frontier(graph)
    for budget in BUDGETS:
        bound, result = solve(graph, budget)
        best = optimum(points, bound)
        assert result.cut.bytes <= bound, (str(spec), budget, result)
        assert result.lower_bound <= best + 1e-6 * max(1.0, best) <= result.cut.cost + 2e-6 * \
            max(1.0, best), (str(spec), budget, best, result)
        assert result.lower_bound == pytest.approx(hull_at(points, bound), rel=1e-9, abs=1e-6)
        assert result.cut.cost == pytest.approx(hull_at(points, result.cut.bytes), rel=1e-9,
                                                abs=1e-6), "the plan is not on the hull"


@pytest.mark.parametrize("program, inputs", [(issue_program, issue_inputs),
                                             (two_branches, two_branch_inputs)])
def test_extreme_multipliers_give_the_least_cost_and_least_bytes_plans(program, inputs):
    graph = joint_graph(program, *inputs())
    points, bans = frontier(graph), bans_and_bounds(graph)
    free = lagrangian_cut(graph, 0, bans.hard, bans.unsavable)
    assert free.cost == min(points.values())
    huge = sum(n.runtime for n in graph.nodes) + 1
    tight = lagrangian_cut(graph, huge, bans.hard, bans.unsavable)
    assert tight.bytes == bans.low.bytes == min(points)
    assert tight.cost == points[min(points)]


def test_issue_program_optimum_lies_on_the_hull():
    """Measured: issue 13's frontier is (0 B, 2.62 MFLOP), (256 B, 0.52 MFLOP: the row sum
    saved), (16640 B, 0): all three are hull vertices, so at budgets 0.1/0.5/0.9 the
    Lagrangian plan IS the optimum (saves the row sum); only its lower bound is loose."""
    graph = joint_graph(issue_program, *issue_inputs())
    points = frontier(graph)
    for budget in (0.1, 0.5, 0.9):
        bound, result = solve(graph, budget)
        assert result.cut.cost == optimum(points, bound) == 2 * 64 * 64 * 64
        assert result.cut.bytes == 256
        assert result.lower_bound < result.cut.cost  # the hull is below the optimum here


def test_optimum_above_the_hull_is_missed():
    """Hand derivation: A = 2*16*16*16 = 8192 FLOP, a = 16*16*4 = 1024 B (branch 1);
    B = 2*16*64*32 = 65536 FLOP, b = 16*32*4 = 2048 B (branch 2). Points: (0, A+B),
    (a, B), (b, A), (a+b, 0); (a, B) lies above the line from (0, A+B) to (b, A), since
    B/b > A/a. At a bound in [a, b) the optimum saves branch 1 (cost B) and the Lagrangian
    method returns the hull vertex (0, A+B)."""
    a_flop, b_flop, a_bytes, b_bytes = 8192, 65536, 1024, 2048
    graph = joint_graph(two_branches, *two_branch_inputs())
    points = frontier(graph)
    assert points == {0: a_flop + b_flop, a_bytes: b_flop, b_bytes: a_flop,
                      a_bytes + b_bytes: 0}
    bound, result = solve(graph, 0.5)
    assert a_bytes <= bound < b_bytes
    assert optimum(points, bound) == b_flop
    assert (result.cut.bytes, result.cut.cost) == (0, a_flop + b_flop)  # 12.5% above
    assert result.lower_bound == pytest.approx(hull_at(points, bound))
    assert result.hull == ((0, 73728.0), (3072, 0.0), (2048, 8192.0))


def test_infeasible_bound_names_memory_budget():
    def random(x, w):
        return torch.nn.functional.dropout(x @ w, 0.5).cos().sum()

    torch.manual_seed(0)
    graph = joint_graph(random, torch.randn(8, 8, requires_grad=True),
                        torch.randn(8, 8, requires_grad=True))
    bans = bans_and_bounds(graph)
    assert bans.low.bytes > 0
    with pytest.raises(InfeasibleBudget, match="memory_budget"):
        parametric_plan(graph, bans.low.bytes - 1, bans.hard, bans.unsavable)
    assert parametric_plan(graph, bans.low.bytes, bans.hard, bans.unsavable).cut.bytes \
        == bans.low.bytes
    with pytest.raises(ValueError, match="multiplier=-1"):
        lagrangian_cut(graph, -1, bans.hard, bans.unsavable)
