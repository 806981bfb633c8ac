"""The one frozen options object that every stage of the partitioner receives.

Nothing in :mod:`refimpl.partition` reads global configuration: the dynamo backend turns
``torch._functorch.config`` into a :class:`PartitionOptions` once (:meth:`from_torch_config`)
and passes it down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch._functorch.config as fconfig

#: "exact" (the default) and "brute" solve docs/design.md's problem; dp, ilp and greedy are
#: torch's knapsack heuristics (``activation_memory_budget_solver``), kept for comparison.
EXACT_SOLVERS = ("exact", "brute")
KNAPSACK_SOLVERS = ("dp", "ilp", "greedy")
SOLVERS = EXACT_SOLVERS + KNAPSACK_SOLVERS
DEFAULT_SOLVER = "exact"
RUNTIME_ESTIMATORS = ("flops", "profile")


@dataclass(frozen=True)
class PartitionOptions:
    """How to partition a joint graph.

    memory_budget      0.0 saves only graph inputs (and what must be saved: random ops),
                       1.0 is the runtime-optimised min-cut plan; in between the saved bytes
                       stay within ``min + memory_budget * (max - min)``.
    runtime_estimator  ``"flops"`` (the FLOP table) or ``"profile"`` (time each node).
    solver             ``"exact"`` (default): the optimum of the partition problem
                       (:mod:`refimpl.partition.exact`); ``"brute"``: every save-set (small
                       graphs); ``"dp"``, ``"ilp"``, ``"greedy"``: torch's knapsack over
                       candidate items, heuristics for the problem, kept for comparison.
    cse                run common-subexpression elimination on the joint graph first, as
                       torch's partitioner does (``torch._functorch.config.cse``).
    optimize_layout    the dynamo backend runs ``refimpl.layout.optimize_layout`` first.
    profile_repeats    timed runs per node for the ``"profile"`` estimator, after a warm-up
                       (the least is used); on CUDA the estimating runs, followed by up to
                       100 more within 25 ms, as torch's GPU benchmarker
                       (:func:`refimpl.partition.runtime.time_call`).
    solver_time_limit  seconds the exact solver may take per solve before it raises
                       :class:`~refimpl.partition.errors.SolverTimeLimit`.
    """

    memory_budget: float = 1.0
    runtime_estimator: str = "flops"
    solver: str = DEFAULT_SOLVER
    cse: bool = True
    optimize_layout: bool = True
    profile_repeats: int = 5
    solver_time_limit: float = 60.0

    def __post_init__(self) -> None:
        budget = self.memory_budget
        if isinstance(budget, bool) or not isinstance(budget, int | float) \
                or math.isnan(budget) or not 0.0 <= budget <= 1.0:
            raise ValueError(f"memory_budget={budget!r} must be a number in [0, 1]")
        if self.runtime_estimator not in RUNTIME_ESTIMATORS:
            raise ValueError(f"runtime_estimator={self.runtime_estimator!r} is not one of "
                             f"{', '.join(RUNTIME_ESTIMATORS)}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver={self.solver!r} is not one of {', '.join(SOLVERS)}")
        for flag in ("cse", "optimize_layout"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag}={getattr(self, flag)!r} must be True or False")
        limit = self.solver_time_limit
        if isinstance(limit, bool) or not isinstance(limit, int | float) \
                or not 0 < limit < math.inf:
            raise ValueError(f"solver_time_limit={limit!r} must be a positive finite number "
                             "of seconds")
        if not isinstance(self.profile_repeats, int) or self.profile_repeats < 1:
            raise ValueError(f"profile_repeats={self.profile_repeats!r} must be an int >= 1")

    @classmethod
    def from_torch_config(cls, **overrides: object) -> PartitionOptions:
        """Options from ``torch._functorch.config``: ``activation_memory_budget*`` and
        ``cse``. The solver is refimpl's exact one while ``activation_memory_budget_solver``
        holds torch's default value (``"dp"``), else the knapsack heuristic it names. The
        value, not whether it was set, decides: torch's ``config.patch`` restores a default
        by setting it, after which torch reports the option as user-set for good."""
        name = "activation_memory_budget_solver"
        solver = getattr(fconfig, name)
        torch_default = fconfig._config[name].default  # type: ignore[attr-defined]
        values = {
            "memory_budget": fconfig.activation_memory_budget,
            "runtime_estimator": fconfig.activation_memory_budget_runtime_estimator,
            "solver": DEFAULT_SOLVER if solver == torch_default else solver,
            "cse": fconfig.cse,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
