"""The one frozen options object that every stage of the partitioner receives.

Nothing in :mod:`refimpl.partition` reads global configuration: the dynamo backend turns
``torch._functorch.config`` into a :class:`PartitionOptions` once (:meth:`from_torch_config`)
and passes it down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SOLVERS = ("dp", "ilp", "greedy", "brute")
RUNTIME_ESTIMATORS = ("flops", "profile")


@dataclass(frozen=True)
class PartitionOptions:
    """How to partition a joint graph.

    memory_budget      0.0 saves only graph inputs (and what must be saved: random ops),
                       1.0 is the runtime-optimised min-cut plan; in between the saved bytes
                       stay within ``min + memory_budget * (max - min)``.
    runtime_estimator  ``"flops"`` (the FLOP table) or ``"profile"`` (time each node).
    solver             knapsack solver: ``"dp"``, ``"ilp"`` (exact), ``"greedy"`` (torch-like,
                       for comparison), ``"brute"`` (exhaustive, at most 20 candidates).
    optimize_layout    the dynamo backend runs ``refimpl.layout.optimize_layout`` first.
    profile_repeats    timed runs per node for the ``"profile"`` estimator (median is used).
    """

    memory_budget: float = 1.0
    runtime_estimator: str = "flops"
    solver: str = "dp"
    optimize_layout: bool = True
    profile_repeats: int = 5

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
        if not isinstance(self.optimize_layout, bool):
            raise ValueError(f"optimize_layout={self.optimize_layout!r} must be True or False")
        if not isinstance(self.profile_repeats, int) or self.profile_repeats < 1:
            raise ValueError(f"profile_repeats={self.profile_repeats!r} must be an int >= 1")

    @classmethod
    def from_torch_config(cls, **overrides: object) -> PartitionOptions:
        """Options from ``torch._functorch.config.activation_memory_budget*`` (2.13 names)."""
        import torch._functorch.config as fconfig

        values = {
            "memory_budget": fconfig.activation_memory_budget,
            "runtime_estimator": fconfig.activation_memory_budget_runtime_estimator,
            "solver": fconfig.activation_memory_budget_solver,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
