"""The one frozen options object that every stage of the partitioner receives.

Nothing in :mod:`refimpl.partition` reads global configuration: the dynamo backend turns
``torch._functorch.config`` into a :class:`PartitionOptions` once (:meth:`from_torch_config`)
and passes it down.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal

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
        """Checks every option's type and range (one line naming the option) and stores the
        numbers as plain ``float`` / ``int``, whatever real type they came as."""
        budget = _real("memory_budget", self.memory_budget, "a number in [0, 1]")
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"memory_budget={self.memory_budget!r} must be a number in [0, 1]")
        limit = _real("solver_time_limit", self.solver_time_limit,
                      "a positive finite number of seconds")
        if not 0 < limit < math.inf:
            raise ValueError(f"solver_time_limit={self.solver_time_limit!r} must be a positive "
                             "finite number of seconds")
        repeats = self.profile_repeats
        if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) \
                or repeats < 1:
            raise ValueError(f"profile_repeats={repeats!r} must be an int >= 1")
        for name, allowed in (("runtime_estimator", RUNTIME_ESTIMATORS), ("solver", SOLVERS)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        for flag in ("cse", "optimize_layout"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag}={getattr(self, flag)!r} must be True or False")
        object.__setattr__(self, "memory_budget", budget)
        object.__setattr__(self, "solver_time_limit", limit)
        object.__setattr__(self, "profile_repeats", int(repeats))

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


def _real(name: str, value: object, what: str) -> float:
    """``value`` as a float if it is a real number that is not NaN: any ``numbers.Real``
    (int, float, ``Fraction``, numpy's numbers) or a ``Decimal``; never a bool (numpy's
    ``bool_`` is no ``numbers.Real``), a string, a complex or NaN. Raises ``ValueError``
    naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal) \
            or (isinstance(value, Decimal) and value.is_nan()) or math.isnan(float(value)):
        raise ValueError(f"{name}={value!r} must be {what}")
    return float(value)
