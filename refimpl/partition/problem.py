"""The one input every partition solver takes: a joint graph, its bans and a byte bound.

Every solver module (:mod:`.exact`, :mod:`.exhaustive`, :mod:`.knapsack`) exposes
``solve(problem: Problem, options: PartitionOptions) -> Cut``: the plan it chooses for
``problem``. The budget reaches a solver once, as ``problem.bound`` (bytes); ``options``
gives only how to solve (``solver``, ``solver_time_limit``), and no solver reads
``options.memory_budget``. Invariant of the contract: the returned cut's ``bytes`` is at
most ``problem.bound`` and it recomputes nothing in ``problem.bans.hard``; a solver that
cannot meet the bound raises :class:`~refimpl.partition.errors.InfeasibleBudget`, never
returns a cut over it.
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.partition.cut import Cut
from refimpl.partition.graph import JointGraph


@dataclass(frozen=True)
class Bans:
    """What no plan may recompute (``hard``) or save (``unsavable``), and the ``min`` and
    ``max`` plans every budget is measured against (``low``, ``high``)."""

    hard: set[str]
    unsavable: set[str]
    low: Cut
    high: Cut


@dataclass(frozen=True)
class Problem:
    """Choose a cut of ``graph`` that keeps at most ``bound`` bytes under ``bans``."""

    graph: JointGraph
    bans: Bans
    bound: int
