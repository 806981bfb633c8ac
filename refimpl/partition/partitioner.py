"""The partitioner: from a plain joint graph and the options to a :class:`Plan`.

Algorithm (budget semantics of DESIGN.md):
    1. ``max`` plan: a minimum cut where the hard bans (random, mutating ops) and the
       runtime bans (non-cheap ops, values the backward materialises) may not be recomputed:
       the runtime-optimised plan, returned at budget 1.0.
    2. ``min`` plan: a minimum cut with only the hard bans: it saves inputs and what must be
       saved, returned at budget 0.0.
    3. In between, ``bound = min + budget x (max - min)``; the knapsack chooses which
       candidates (needed forward nodes with a positive runtime) to save within
       ``bound - min`` bytes, maximising the runtime it spares; a minimum cut with those
       candidates banned gives the plan.
Invariant: ``saved_bytes <= bound``. Saving the ``min`` plan's values plus the chosen
candidates is a valid cut costing at most ``min + (bound - min)``, and the cut is minimum.
"""

from __future__ import annotations

import math

from refimpl.partition import candidates, knapsack
from refimpl.partition.candidates import backward_reads
from refimpl.partition.mincut import save_set
from refimpl.partition.options import PartitionOptions
from refimpl.partition.plan import Plan
from refimpl.partition.trace import JointGraph

#: relative slack so that a budget written as a byte ratio (28 / 40) reaches its bytes.
BOUND_SLACK = 1e-9


def budget_bound(min_bytes: int, max_bytes: int, budget: float) -> int:
    """``floor(min + budget x (max - min))``, plus a 1e-9 relative slack against float
    rounding (``28 / 40 * 40`` must allow 28 units, not 27.999...)."""
    span = max(max_bytes - min_bytes, 0)
    return min(max_bytes, math.floor(min_bytes + budget * span + BOUND_SLACK * span))


def _cut(graph: JointGraph, banned: set[str]) -> tuple[list[str], list[str], int]:
    """(values read by the backward, recomputed nodes, activation bytes) of a minimum cut."""
    reads, recomputed = backward_reads(graph, set(save_set(graph, banned)))
    return reads, recomputed, saved_bytes(graph, reads)


def saved_bytes(graph: JointGraph, names: list[str]) -> int:
    """Activation bytes of saving ``names``: each storage counted once (views share it)."""
    by_storage = {graph.by_name[n].storage: graph.by_name[n].bytes for n in names}
    return sum(by_storage.values())


def choose(graph: JointGraph, options: PartitionOptions) -> Plan:
    """The plan for ``graph`` under ``options`` (module docstring)."""
    hard = candidates.hard_bans(graph)
    high = _cut(graph, hard | candidates.runtime_bans(graph))
    low = _cut(graph, hard) if options.memory_budget < 1 else high
    lo, hi = low[2], max(high[2], low[2])
    bound = budget_bound(lo, hi, options.memory_budget)
    if options.memory_budget == 1 or high[2] <= bound:
        chosen = high
    elif options.memory_budget == 0:
        chosen = low
    else:
        items = candidates.items(graph, hard)
        keep = knapsack.solve(options.solver, [i.bytes for i in items],
                              [i.runtime for i in items], bound - lo)
        chosen = _cut(graph, hard | {items[k].name for k in keep})
    return _plan(graph, options, chosen, lo, hi, bound)


def _plan(graph: JointGraph, options: PartitionOptions, chosen: tuple, lo: int, hi: int,
          bound: int) -> Plan:
    reads, recomputed, saved_bytes = chosen
    is_input = lambda n: graph.by_name[n].role == "primal" or (
        graph.by_name[n].bytes == 0 and not graph.by_name[n].is_sym)
    return Plan(
        memory_budget=options.memory_budget, solver=options.solver,
        runtime_estimator=options.runtime_estimator,
        saved=tuple(n for n in reads if not is_input(n)),
        saved_inputs=tuple(n for n in reads if is_input(n)),
        recomputed=tuple(n for n in recomputed if graph.by_name[n].fw_required),
        saved_bytes=saved_bytes, min_bytes=lo, max_bytes=hi,
        bound_bytes=bound,
        recompute_cost=sum(graph.by_name[n].runtime for n in recomputed
                           if graph.by_name[n].fw_required))
