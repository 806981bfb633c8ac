"""The partitioner's errors: each names the option or argument to change."""

from __future__ import annotations


class TraceError(ValueError):
    """A function that cannot be traced into a joint graph (the message says why)."""


class PartitionError(RuntimeError):
    """No plan within the options: the message names the option to change."""


class SolverTimeLimit(PartitionError):
    """The exact solver did not prove its optimum within ``solver_time_limit`` seconds."""


class NoFiniteCut(PartitionError):
    """The backward needs a value that can be neither saved nor recomputed."""


class InfeasibleBudget(PartitionError):
    """No plan fits the bound (the graph's bans make every plan exceed it)."""


class TooLargeForBrute(ValueError):
    """``solver="brute"`` would enumerate more save-sets than it allows."""
