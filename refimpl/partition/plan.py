"""The plan: what a partition saves, what it recomputes, and what that costs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """One partition decision for one joint graph.

    Bytes are activation bytes (storages created by the forward; inputs and their views cost
    nothing). ``min_bytes``/``max_bytes`` are the budget-0.0 and budget-1.0 plans' bytes and
    ``bound_bytes = min + memory_budget * (max - min)`` (rounded as
    :func:`refimpl.partition.partitioner.budget_bound` says); ``saved_bytes <= bound_bytes``
    always. ``recompute_cost`` is in the estimator's unit: FLOPs (``"flops"``) or seconds
    (``"profile"``), summed over the forward nodes the backward recomputes.
    """

    memory_budget: float
    solver: str
    runtime_estimator: str
    saved: tuple[str, ...]  # activations handed to the backward
    saved_inputs: tuple[str, ...]  # inputs (or views of inputs) handed to the backward
    recomputed: tuple[str, ...]  # forward nodes the backward computes again
    saved_bytes: int
    min_bytes: int
    max_bytes: int
    bound_bytes: int
    recompute_cost: float

    def summary(self) -> str:
        """A few readable lines for a terminal."""
        mib = lambda b: f"{b / 2**20:.2f} MiB"
        return "\n".join([
            f"memory_budget={self.memory_budget} solver={self.solver} "
            f"runtime_estimator={self.runtime_estimator}",
            f"saved {mib(self.saved_bytes)} (bound {mib(self.bound_bytes)}; "
            f"min {mib(self.min_bytes)}, max {mib(self.max_bytes)})",
            f"saved: {', '.join(self.saved) or '-'}",
            f"saved inputs: {', '.join(self.saved_inputs) or '-'}",
            f"recomputed ({self.recompute_cost:g}): {', '.join(self.recomputed) or '-'}",
        ])
