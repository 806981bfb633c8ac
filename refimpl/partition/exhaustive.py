"""``solver="brute"``: every save-set, for small graphs (the exact solver's own check).

Algorithm: the candidates are the forward values the backward needs that may be saved (not
primals, which are free, and not unsavable). For every subset ``S`` of them, in order of
size, :func:`refimpl.partition.cut.cut_of` gives the plan that saving ``S`` makes; it is
valid when no banned node is recomputed and its bytes fit the bound. The answer is the valid
plan of least cost, then least bytes, then the first found. Invariant: every valid plan's
read set is one of the subsets, so nothing better is missed. ``2^n`` cuts: at most
:data:`MAX_BRUTE_CANDIDATES` candidates, a larger graph raises :class:`TooLargeForBrute`.
"""

from __future__ import annotations

import itertools

from refimpl.partition.cut import Cut, cut_of, needed_by_backward
from refimpl.partition.errors import InfeasibleBudget, TooLargeForBrute
from refimpl.partition.options import PartitionOptions
from refimpl.partition.problem import Problem

MAX_BRUTE_CANDIDATES = 16


def solve(problem: Problem, options: PartitionOptions) -> Cut:
    """The least-cost valid plan within ``problem.bound`` bytes (module docstring; no option
    changes it)."""
    graph, bound = problem.graph, problem.bound
    banned, unsavable = problem.bans.hard, problem.bans.unsavable
    needed = needed_by_backward(graph)
    candidates = [n.name for n in graph.forward_side() if n.name in needed
                  and n.role == "forward" and n.name not in unsavable]
    if len(candidates) > MAX_BRUTE_CANDIDATES:
        raise TooLargeForBrute(
            f"solver='brute' enumerates 2^n save-sets and allows n <= "
            f"{MAX_BRUTE_CANDIDATES}; this graph has n={len(candidates)} candidate values: "
            "use solver='exact'")
    best: Cut | None = None
    for size in range(len(candidates) + 1):
        for subset in itertools.combinations(candidates, size):
            cut = cut_of(graph, set(subset))
            if cut.bytes > bound or banned.intersection(cut.recomputed):
                continue
            if best is None or (cut.cost, cut.bytes) < (best.cost, best.bytes):
                best = cut
    if best is None:
        raise InfeasibleBudget(f"no plan fits the bound of {bound} bytes: the bans keep "
                               "more alive; raise memory_budget")
    return best
