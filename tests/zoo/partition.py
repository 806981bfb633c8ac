"""Partitioner bugs from torch's tracker, re-planted in refimpl's partitioner.

Each backend compiles with :func:`refimpl.compile` while one fact the partitioner reads from
the joint graph is replaced by what the historical code saw (``unittest.mock.patch`` on
``refimpl.partition.fx_edge``), or with the budget the historical solver effectively used.
The graph is partitioned at the first call, so the patches are in force during each call.
"""

from __future__ import annotations

from unittest import mock

import refimpl
from refimpl.partition import fx_edge


class _PlantedPartitioner:
    """refimpl's partitioner with ``patches()`` in force while the compiled function runs."""

    component = "partition"

    def patches(self) -> list:
        return []

    def budget(self, memory_budget: float | None) -> float | None:
        return memory_budget

    def compile(self, fn, *, memory_budget=None):
        compiled = refimpl.compile(fn, memory_budget=self.budget(memory_budget))

        def run(*args, **kwargs):
            patches = self.patches()
            for patch in patches:
                patch.start()
            try:
                return compiled(*args, **kwargs)
            finally:
                for patch in reversed(patches):
                    patch.stop()

        return run


def _never_random(node) -> bool:
    return False


class RecomputesRandomPartitioner(_PlantedPartitioner):
    """pytorch/pytorch#190758, "Memory-budget partitioner recomputes RNG ops with fresh
    randomness in backward, silently corrupting gradients at any activation_memory_budget <
    1.0".

    Below budget 1 the ban on recomputing random ops did not run (budget 0 returned before
    the min-cut, the knapsack traded banned nodes back): the backward redrew dropout masks
    and the gradients belonged to numbers the forward never drew. Planted: no node counts
    as random, so the ban never applies. Caught by test_partition_properties.py's
    ``test_partition_keeps_random_draws``.
    """

    name = "zoo:partition-recomputes-random"
    issue = "pytorch/pytorch#190758"
    title = ("Memory-budget partitioner recomputes RNG ops with fresh randomness in backward, "
             "silently corrupting gradients at any activation_memory_budget < 1.0")
    catcher = "test_partition_properties::test_partition_keeps_random_draws"

    def patches(self) -> list:
        return [mock.patch.object(fx_edge, "_draws_random", _never_random)]


class OverBudgetPartitioner(_PlantedPartitioner):
    """pytorch/pytorch#197871, "dp_knapsack_sliding_hirschberg can return solutions exceeding
    max_memory".

    The Hirschberg knapsack returned saved sets over the capacity it was given (two 1-unit
    items against a 1-unit budget). Planted: the solver is given twice the budget (capped at
    1), so the plan keeps more bytes than the budget allows. Caught by
    test_partition_properties.py's ``test_partition_within_budget_and_exact``.
    """

    name = "zoo:partition-over-budget"
    issue = "pytorch/pytorch#197871"
    title = "dp_knapsack_sliding_hirschberg can return solutions exceeding max_memory"
    catcher = "test_partition_properties::test_partition_within_budget_and_exact"

    def budget(self, memory_budget: float | None) -> float | None:
        return None if memory_budget is None else min(1.0, 2 * memory_budget)


def _nothing_mutated(gm, roles, mutated_inputs) -> set:
    return set()


class RecomputesMutatedInputReadsPartitioner(_PlantedPartitioner):
    """pytorch/pytorch#197039, "[aotautograd] Don't recompute reads of mutated inputs or
    mutable buffers".

    The min-cut could recompute, in the backward, a value read from an input the forward
    then mutated: the recomputation read the post-mutation contents and the gradients were
    silently wrong. Planted: the partitioner is not told which inputs are mutated. Caught by
    test_partition_mutation.py's ``test_partition_input_mutation_as_eager``.
    """

    name = "zoo:partition-recomputes-mutated-input-reads"
    issue = "pytorch/pytorch#197039"
    title = "[aotautograd] Don't recompute reads of mutated inputs or mutable buffers"
    catcher = "test_partition_mutation::test_partition_input_mutation_as_eager"

    def patches(self) -> list:
        return [mock.patch.object(fx_edge, "_mutated_primals", _nothing_mutated)]


def _no_policy(node) -> str:
    return ""


class IgnoresCheckpointRegionsPartitioner(_PlantedPartitioner):
    """pytorch/pytorch#128730, "partitioner doesn't appear to respect SAC region".

    With selective activation checkpointing, the partitioner saved values the user's policy
    asked to recompute. Planted: the ``recompute`` policies torch records on each node are
    not read. Caught by test_partition_properties.py's
    ``test_partition_honours_user_checkpoint_regions``.
    """

    name = "zoo:partition-ignores-checkpoint-regions"
    issue = "pytorch/pytorch#128730"
    title = "partitioner doesn't appear to respect SAC region"
    catcher = "test_partition_properties::test_partition_honours_user_checkpoint_regions"

    def patches(self) -> list:
        return [mock.patch.object(fx_edge, "_policy", _no_policy)]


ZOO = [RecomputesRandomPartitioner, OverBudgetPartitioner,
       RecomputesMutatedInputReadsPartitioner, IgnoresCheckpointRegionsPartitioner]
