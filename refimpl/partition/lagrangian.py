"""Lagrangian / parametric min-cut: a measured alternative to the exact solver.

The problem (:mod:`refimpl.partition.exact`): least recompute cost within ``bound`` saved
bytes. Relaxing the byte bound with a multiplier ``λ`` (cost units per byte) leaves

    minimise  cost(plan) + λ · bytes(plan)

over all valid plans, which is ONE minimum s-t cut (:func:`lagrangian_cut`): the network of
:func:`refimpl.partition.mincut.save_set` (``v.in -> v.out`` = bytes of saving ``v``,
infinite edges for graph edges, ``source -> v.in`` infinite for primals and banned nodes,
``v.out -> sink`` for what the backward reads) with each save edge scaled by ``λ``, plus an
edge ``source -> v.in`` of capacity ``c_v`` (the runtime of ``v`` if the forward outputs
need it, else 0): ``v.in`` on the sink side means ``v`` is recomputed, and the cut pays
``c_v``. Capacities are integers (``λ = p/q`` as a fraction, costs scaled to integers:
``q · c_v`` and ``p · bytes``), so Dinic's max flow is exact.

:func:`parametric_plan` is the breakpoint search (Eisner and Severance): ``R`` = the
least-cost plan (least bytes among those; if it fits the bound it is the optimum), ``L`` =
the least-bytes plan (``λ`` = total cost + 1 per byte). While the bound lies strictly
between them, solve one cut at ``λ`` = the slope of the line ``L R``; a plan strictly below
that line is a new vertex of the lower convex hull of the (bytes, cost) points and replaces
the endpoint on its side of the bound; otherwise ``L`` and ``R`` are adjacent hull vertices.
The result is ``L`` (within the bound), and the line ``L R`` at ``bound`` is a lower bound.

Exact only at hull vertices: the optimum at a bound between two adjacent vertices may lie
strictly ABOVE the hull (a plan that is not a vertex, or no plan at all on the segment); the
integer programme finds it, this method returns the cheaper-in-bytes vertex, whose cost may
be higher. The same happens on a flat hull edge: a transformer's identical blocks give
many plans on one line (save the same values in k of the blocks), the optimum lies on or
just above that edge, yet a min cut at the edge's slope returns one of its endpoints (the
benchmark measures this: lower bound within 1% of the optimum, plan 3.6x it at budget 0.5).
Invariant: ``lower_bound <= optimum <= cut.cost`` and ``cut.bytes <= bound``.

Not the default solver and not a ``PartitionOptions.solver`` value: it is measured against
the exact solver in ``benchmarks/bench_partition_lagrangian.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from refimpl.partition.cut import Cut, cut_of
from refimpl.partition.errors import InfeasibleBudget
from refimpl.partition.graph import JointGraph
from refimpl.partition.mincut import min_cut_saves, saves_itself
from refimpl.partition.options import PartitionOptions
from refimpl.partition.problem import Problem

__all__ = ["LagrangianResult", "lagrangian_cut", "parametric_plan", "solve"]


@dataclass(frozen=True)
class LagrangianResult:
    """The plan :func:`parametric_plan` chooses and what the search learned on the way."""

    cut: Cut  # the feasible hull vertex returned (cut.bytes <= bound)
    lower_bound: float  # the hull at ``bound``: no plan within ``bound`` costs less
    cuts_solved: int  # minimum cuts computed
    hull: tuple[tuple[int, float], ...]  # hull vertices visited, (bytes, cost), in order


@dataclass(frozen=True)
class _Point:
    """A plan as a point of the (bytes, cost) plane, with its exact cost."""

    cut: Cut
    bytes: int
    cost: Fraction

    def value(self, multiplier: Fraction) -> Fraction:
        return self.cost + multiplier * self.bytes


@dataclass(frozen=True)
class _Units:
    """Recompute costs as integers: ``units[v] = d · c_v`` for the nodes with ``c_v > 0``
    (``c_v`` = runtime if the forward outputs need ``v``), ``d`` a common denominator."""

    scale: int
    units: dict[str, int]

    def cost(self, recomputed: tuple[str, ...]) -> Fraction:
        return Fraction(sum(self.units.get(n, 0) for n in recomputed), self.scale)


def _units(graph: JointGraph) -> _Units:
    exact = {n.name: Fraction(n.runtime) for n in graph.forward_side()
             if n.role == "forward" and n.fw_required and n.runtime}
    scale = math.lcm(1, *(c.denominator for c in exact.values()))
    return _Units(scale, {name: int(c * scale) for name, c in exact.items()})


def lagrangian_cut(graph: JointGraph, multiplier: Fraction | int | float, banned: set[str],
                   unsavable: set[str]) -> Cut:
    """The plan minimising ``cost + multiplier · bytes`` (module docstring): one min cut."""
    return _min_cut(graph, _units(graph), Fraction(multiplier), banned, unsavable)


def _min_cut(graph: JointGraph, units: _Units, multiplier: Fraction, banned: set[str],
             unsavable: set[str]) -> Cut:
    if multiplier < 0:
        raise ValueError(f"multiplier={multiplier} must be >= 0 (cost units per byte)")
    side = graph.forward_side()
    scaled = multiplier * units.scale  # λ in (1/d cost units) per byte, as p / q
    per_byte, per_cost = scaled.numerator, scaled.denominator
    costs = [units.units.get(n.name, 0) * per_cost for n in side]
    sizes = [n.bytes * per_byte if saves_itself(graph, n, banned, unsavable) else None
             for n in side]
    infinite = sum(costs) + sum(s for s in sizes if s is not None) + 1
    save = [infinite if size is None else size for size in sizes]
    source = [infinite if n.role == "primal" or n.name in banned else cost
              for n, cost in zip(side, costs)]
    saved = set(min_cut_saves(graph, side, save, source, infinite,
                              "a banned node that may not be saved"))
    return cut_of(graph, saved)


@dataclass(frozen=True)
class _Search:
    """What every cut of one search shares: the graph, its integer costs, the bans."""

    graph: JointGraph
    units: _Units
    banned: set[str]
    unsavable: set[str]

    def point(self, multiplier: Fraction) -> _Point:
        cut = _min_cut(self.graph, self.units, multiplier, self.banned, self.unsavable)
        return _Point(cut, cut.bytes, self.units.cost(cut.recomputed))


def _endpoints(search: _Search) -> tuple[_Point, _Point]:
    """(least bytes then least cost, least cost then least bytes): both lexicographic, by
    a multiplier that makes one term dominate the other (costs are multiples of 1/d and
    bytes integers, so a weight above the other term's total is enough)."""
    total_cost = Fraction(sum(search.units.units.values()), search.units.scale)
    total_bytes = sum(n.bytes for n in search.graph.forward_side())
    least_bytes = search.point(total_cost + 1)
    least_cost = search.point(Fraction(1, (total_bytes + 1) * search.units.scale))
    return least_bytes, least_cost


def solve(problem: Problem, options: PartitionOptions) -> Cut:
    """The plan :func:`parametric_plan` chooses for ``problem`` (no option changes it)."""
    return parametric_plan(problem.graph, problem.bound, problem.bans.hard,
                           problem.bans.unsavable).cut


def parametric_plan(graph: JointGraph, bound: int, banned: set[str], unsavable: set[str]
                    ) -> LagrangianResult:
    """The breakpoint search of the module docstring: the hull vertex within ``bound`` next
    to it, and the hull's value at ``bound`` as a lower bound on the optimum."""
    search = _Search(graph, _units(graph), banned, unsavable)
    left, right = _endpoints(search)
    hull, solved = [left, right], 2
    if left.bytes > bound:
        raise InfeasibleBudget(
            f"no plan fits the bound of {bound} bytes: the least-bytes plan keeps "
            f"{left.bytes} (the bans keep it alive); raise memory_budget")
    if right.bytes <= bound:
        return _result(right, float(right.cost), solved, hull)
    while True:
        slope = (left.cost - right.cost) / (right.bytes - left.bytes)
        candidate = search.point(slope)
        solved += 1
        if candidate.value(slope) >= left.value(slope):  # nothing below: adjacent vertices
            break
        hull.append(candidate)
        if candidate.bytes <= bound:
            left = candidate
        else:
            right = candidate
    along = Fraction(bound - left.bytes, right.bytes - left.bytes)
    return _result(left, float(left.cost + along * (right.cost - left.cost)), solved, hull)


def _result(chosen: _Point, lower_bound: float, solved: int, hull: list[_Point]
            ) -> LagrangianResult:
    return LagrangianResult(chosen.cut, lower_bound, solved,
                            tuple((p.bytes, float(p.cost)) for p in hull))
