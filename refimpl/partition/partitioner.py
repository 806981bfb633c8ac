"""The partitioner: from a plain joint graph and the options to a :class:`Plan`.

Budget semantics (docs/design.md, "The partitioner's problem"):
    1. ``max`` plan: a minimum cut where the hard bans (random, mutating, must-save ops) and
       the runtime bans (non-cheap ops, values the backward materialises) may not be
       recomputed: the runtime-optimised plan, returned at budget 1.0.
    2. ``min`` plan: a minimum cut with only the hard bans: the fewest bytes any plan keeps.
    3. ``bound = min + budget x (max - min)``. For a budget below 1 the solver chooses:
       ``"exact"`` (default) and ``"brute"`` return the optimum of the problem (least
       recompute cost, then least bytes, within ``bound``); torch's knapsack heuristics
       (``"dp"``, ``"ilp"``, ``"greedy"``) choose which candidate items to save within
       ``bound - min`` bytes, and a minimum cut with those items banned gives the plan.
Invariant: ``saved_bytes <= bound`` for every solver, and the exact solvers' cost is the
least of all valid plans within ``bound``. :func:`choose_many` computes ``min`` and ``max``
once for many budgets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from refimpl.partition import candidates, exact, exhaustive, knapsack
from refimpl.partition.cut import Cut, cut_of
from refimpl.partition.graph import JointGraph
from refimpl.partition.mincut import save_set
from refimpl.partition.options import PartitionOptions
from refimpl.partition.plan import Plan
from refimpl.partition.problem import Bans, Problem

#: relative slack so that a budget written as a byte ratio (28 / 40) reaches its bytes.
BOUND_SLACK = 1e-9


def budget_bound(min_bytes: int, max_bytes: int, budget: float) -> int:
    """``floor(min + budget x (max - min))``, plus a 1e-9 relative slack against float
    rounding (``28 / 40 * 40`` must allow 28 units, not 27.999...)."""
    span = max(max_bytes - min_bytes, 0)
    return min(max_bytes, math.floor(min_bytes + budget * span + BOUND_SLACK * span))


#: ``options.solver`` -> the module whose ``solve(problem, options) -> Cut`` chooses the cut.
SOLVER_MODULES = {"exact": exact, "brute": exhaustive,
                  "dp": knapsack, "ilp": knapsack, "greedy": knapsack}


def bans_and_bounds(graph: JointGraph) -> Bans:
    """The bans and the ``min``/``max`` plans of ``graph`` (module docstring, 1 and 2)."""
    hard = candidates.hard_bans(graph)
    unsavable = candidates.unsavable(graph, hard)
    runtime = hard | candidates.runtime_bans(graph)
    high = cut_of(graph, set(save_set(graph, runtime, unsavable)))
    low = cut_of(graph, set(save_set(graph, hard, unsavable)))
    return Bans(hard, unsavable, low, high)


def choose(graph: JointGraph, options: PartitionOptions) -> Plan:
    """The plan for ``graph`` under ``options`` (module docstring)."""
    return choose_many(graph, [options.memory_budget], options)[0]


def choose_many(graph: JointGraph, budgets: Sequence[float], options: PartitionOptions
                ) -> list[Plan]:
    """One plan per budget in ``budgets`` (each in [0, 1], else ``ValueError``: a budget
    above 1 would silently get the budget-1.0 plan's bound), sharing the bans and bounds;
    ``options.memory_budget`` is ignored. Each budget reaches the solver once, as the byte
    bound of its :class:`Problem`."""
    outside = [b for b in budgets if not 0.0 <= b <= 1.0]
    if outside:
        raise ValueError(f"budgets: {outside!r} not in [0, 1] (each is a memory_budget)")
    bans = bans_and_bounds(graph)
    lo, hi = bans.low.bytes, max(bans.high.bytes, bans.low.bytes)
    plans = []
    for budget in budgets:
        bound = budget_bound(lo, hi, budget)
        cut = _solve(Problem(graph, bans, bound), budget, options)
        plans.append(_plan(graph, replace(options, memory_budget=budget), cut, lo, hi, bound))
    return plans


def _solve(problem: Problem, budget: float, options: PartitionOptions) -> Cut:
    """The cut ``options.solver`` chooses within ``problem.bound`` bytes (budget 1: the
    ``max`` plan, whatever the solver)."""
    if budget == 1:
        return problem.bans.high
    return SOLVER_MODULES[options.solver].solve(problem, options)


def _plan(graph: JointGraph, options: PartitionOptions, cut: Cut, lo: int, hi: int,
          bound: int) -> Plan:
    is_input = lambda n: graph.by_name[n].role == "primal" or (
        graph.by_name[n].bytes == 0 and not graph.by_name[n].is_sym)
    return Plan(
        memory_budget=options.memory_budget, solver=options.solver,
        runtime_estimator=options.runtime_estimator,
        saved=tuple(n for n in cut.reads if not is_input(n)),
        saved_inputs=tuple(n for n in cut.reads if is_input(n)),
        recomputed=tuple(n for n in cut.recomputed if graph.by_name[n].fw_required),
        saved_bytes=cut.bytes, min_bytes=lo, max_bytes=hi, bound_bytes=bound,
        recompute_cost=cut.cost)
