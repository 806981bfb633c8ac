"""0/1 knapsack solvers over plain lists: which recompute candidates to save.

Problem: given item memories ``m_i`` (int bytes), runtimes ``r_i`` (>= 0) and a capacity
``C``, choose the saved set ``S`` maximising ``sum(r_i for i in S)`` subject to
``sum(m_i for i in S) <= C``; among optimal sets prefer the least memory. Every solver
returns the saved indices in increasing order; none of them ever exceeds ``C``.

``dp``, ``ilp``  torch's two names for an exact solve of this knapsack (a dynamic programme,
            an integer programme); the answer, not the method, is what a plan shows, so
            refimpl answers both with ONE exact method, :func:`dp`: a Pareto-front dynamic
            programme (Nemhauser-Ullmann) on exact byte counts, so no rounding can push a
            plan over budget. One method for both names means the property that judges
            torch's ``ilp`` setting judges the code ``solver="dp"`` runs too.
``greedy``  torch-like: take items by runtime per byte, while they fit. Not optimal.

Both are checked against an enumeration of every subset that lives with the other
expectations (:func:`refimpl.expect.partition_knapsack.ilp_choices`), not here.

:func:`choose_items` runs one of them by name; :func:`solve` is the partition solver of the
common contract (:mod:`refimpl.partition.problem`): the plan torch's heuristics make.
"""

from __future__ import annotations

from refimpl.partition import candidates
from refimpl.partition.cut import Cut, cut_of
from refimpl.partition.mincut import save_set
from refimpl.partition.options import PartitionOptions
from refimpl.partition.problem import Problem


def _check(memories: list[int], runtimes: list[float], capacity: int) -> None:
    if len(memories) != len(runtimes):
        raise ValueError(f"memories and runtimes differ in length: "
                         f"{len(memories)} != {len(runtimes)}")
    if any(m < 0 for m in memories) or any(r < 0 for r in runtimes):
        raise ValueError("memories and runtimes must be >= 0")
    if capacity < 0:
        raise ValueError(f"capacity={capacity} must be >= 0")


def dp(memories: list[int], runtimes: list[float], capacity: int) -> list[int]:
    """Pareto-front DP. Invariant: after item ``k`` the front holds, for every memory total
    reachable with items ``< k`` within ``capacity``, only states no other state beats on
    both memory (<=) and runtime (>=); the optimum is the front's last state."""
    _check(memories, runtimes, capacity)
    front: list[tuple[int, float, tuple[int, ...]]] = [(0, 0.0, ())]  # (mem, runtime, set)
    for i, (m, r) in enumerate(zip(memories, runtimes)):
        grown = [(mem + m, run + r, (*chosen, i))
                 for mem, run, chosen in front if mem + m <= capacity]
        merged = sorted(front + grown, key=lambda s: (s[0], -s[1]))
        front = []
        for state in merged:
            if not front or state[1] > front[-1][1]:
                front.append(state)
    return list(front[-1][2])


def greedy(memories: list[int], runtimes: list[float], capacity: int) -> list[int]:
    """Runtime-per-byte order, taking each item that still fits (torch's greedy)."""
    _check(memories, runtimes, capacity)
    order = sorted(range(len(memories)),
                   key=lambda i: -(runtimes[i] / memories[i]) if memories[i] else -float("inf"))
    chosen, used = [], 0
    for i in order:
        if runtimes[i] > 0 and used + memories[i] <= capacity:
            chosen.append(i)
            used += memories[i]
    return sorted(chosen)


#: solver name -> method (module docstring: ``dp`` and ``ilp`` name one exact method)
SOLVERS = {"dp": dp, "ilp": dp, "greedy": greedy}


def choose_items(solver: str, memories: list[int], runtimes: list[float], capacity: int
                 ) -> list[int]:
    """Run the named knapsack solver; ``solver`` must be one of :data:`SOLVERS`."""
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r} is not one of {', '.join(SOLVERS)}")
    return SOLVERS[solver](memories, runtimes, capacity)


def solve(problem: Problem, options: PartitionOptions) -> Cut:
    """torch's heuristic plan for ``problem``: the knapsack ``options.solver`` chooses which
    recompute candidates to save within ``bound - min`` bytes, and a minimum cut with those
    banned from recompute gives the plan (the ``max`` plan when it fits, the ``min`` plan
    when the bound leaves no room above it: torch's rule for budget 0)."""
    graph, bans = problem.graph, problem.bans
    if bans.high.bytes <= problem.bound:
        return bans.high
    if problem.bound <= bans.low.bytes:
        return bans.low
    items = candidates.items(graph, bans.hard)
    keep = choose_items(options.solver, [i.bytes for i in items], [i.runtime for i in items],
                        problem.bound - bans.low.bytes)
    banned = bans.hard | {items[k].name for k in keep}
    return cut_of(graph, set(save_set(graph, banned, bans.unsavable)))
