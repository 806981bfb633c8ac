"""What torch's knapsack heuristics save, derived on the brute-force model.

torch's partitioner, for a budget strictly between 0 and 1 and a knapsack solver
(``activation_memory_budget_solver`` ``"greedy"`` or ``"ilp"``), plans in three steps:

1. **Items.** The forward nodes worth deciding: each owns its storage (not a view, not a
   primal), is savable, not banned (random, mutating), costs FLOPs to recompute, is needed
   by the forward outputs (work only the backward reads runs once in any plan) and by the
   backward. Memory: its storage's bytes; runtime: its FLOPs (torch's formulas), or
   under the ``profile`` estimator its measured time (then an op without FLOPs is an item
   too, and the property checks the plan against every choice: :func:`bytes_of_every_choice`).
2. **Knapsack.** Choose items to keep (not recompute) within ``capacity = bound - min``
   bytes, maximising the kept runtime: ``greedy`` takes items by runtime per byte, highest
   first (graph order among equals), each one that still fits; ``ilp`` is exact, and among
   sets of the best runtime keeps the least memory.
3. **Cut.** The fewest bytes any valid plan keeps with the chosen items also banned from
   recompute.

This module shares no code with :mod:`refimpl.partition`. Step 1 reads the
:class:`~refimpl.expect.partition_brute.SaveProblem` built with the backward's real reads
only (``ReferenceRun.backward_problem``: "needed by the backward" must not count the forward
outputs themselves), step 2 is written out (``ilp`` by enumerating subsets), and step 3 is
the brute force's minimum with the chosen nodes banned. An ``ilp`` optimum
can be a tie between sets of equal runtime and memory, which a MILP solver breaks as it
likes: :func:`expected_bytes` returns the bytes of every tied set.

Tuple-valued ops (SDPA) are items of torch's too, priced by their elements; this model
leaves them out, so the property that uses it draws no attention.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from refimpl.expect.partition_brute import SaveProblem

#: the knapsack heuristics modelled here (torch's ``activation_memory_budget_solver``).
KNAPSACK_SOLVERS = ("greedy", "ilp")
#: the ``activation_memory_budget_runtime_estimator`` values modelled here (torch's
#: ``"testing"`` is not): an item's runtime is its FLOPs, or its measured time
ESTIMATORS = ("flops", "profile")
#: the ``ilp`` enumeration is 2**items; more items than this is not a valid example.
MAX_ITEMS = 14
#: :func:`bytes_of_every_choice` solves the brute force once per subset: fewer items
MAX_CHOICE_ITEMS = 8


class TooManyItems(ValueError):
    """The program has more knapsack items than :data:`MAX_ITEMS` (or, for
    :func:`bytes_of_every_choice`, :data:`MAX_CHOICE_ITEMS`)."""


def knapsack_items(problem: SaveProblem, estimator: str = "flops") -> list[int]:
    """Step 1 (module docstring): the items' node indices, in graph order. Under the
    ``profile`` runtime estimator every op is timed, so an item need not cost FLOPs (a
    reduction, a pointwise op is one too)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not one of {', '.join(ESTIMATORS)}")
    forward, needed = problem.forward_needed, problem.needed
    return [i for i, n in enumerate(problem.nodes)
            if not n.primal and not n.banned and n.savable and n.storage == i
            and n.bytes > 0 and (n.flops > 0 or estimator == "profile")
            and i in forward and i in needed]


def greedy_choice(memories: list[int], runtimes: list[int], capacity: int) -> tuple[int, ...]:
    """Runtime per byte, highest first, ties in item order; each item that still fits."""
    order = sorted(range(len(memories)), key=lambda i: -runtimes[i] / memories[i])
    chosen, used = [], 0
    for i in order:
        if used + memories[i] <= capacity:
            chosen.append(i)
            used += memories[i]
    return tuple(sorted(chosen))


def ilp_choices(memories: list[int], runtimes: list[int], capacity: int
                ) -> list[tuple[int, ...]]:
    """Every subset of the best runtime within ``capacity`` and, among those, the least
    memory (all of them: a tie is the solver's to break)."""
    if len(memories) > MAX_ITEMS:
        raise TooManyItems(f"{len(memories)} knapsack items > MAX_ITEMS={MAX_ITEMS}")
    scored = []
    for size in range(len(memories) + 1):
        for subset in itertools.combinations(range(len(memories)), size):
            memory = sum(memories[i] for i in subset)
            if memory <= capacity:
                scored.append((-sum(runtimes[i] for i in subset), memory, subset))
    best = min(scored)[:2]
    return [subset for runtime, memory, subset in scored if (runtime, memory) == best]


def expected_bytes(problem: SaveProblem, solver: str, capacity: int) -> set[int]:
    """Steps 2 and 3: the bytes of the plan ``solver`` leads to, one figure per tied
    choice."""
    items = knapsack_items(problem)
    memories = [problem.nodes[i].bytes for i in items]
    runtimes = [problem.nodes[i].flops for i in items]
    if solver == "greedy":
        choices = [greedy_choice(memories, runtimes, capacity)]
    elif solver == "ilp":
        choices = ilp_choices(memories, runtimes, capacity)
    else:
        raise ValueError(f"solver={solver!r} is not one of {', '.join(KNAPSACK_SOLVERS)}")
    return {_min_bytes_keeping(problem, {items[k] for k in choice}) for choice in choices}


def _min_bytes_keeping(problem: SaveProblem, kept: set[int]) -> int:
    """The fewest bytes of a valid plan that recomputes none of ``kept``."""
    nodes = tuple(replace(n, banned=True) if i in kept else n
                  for i, n in enumerate(problem.nodes))
    return replace(problem, nodes=nodes).plans()[0].bytes


def bytes_of_every_choice(problem: SaveProblem, items: list[int]) -> set[int]:
    """Step 3 for every subset of ``items``: the bytes of each plan some knapsack choice
    leads to. Under the ``profile`` estimator the runtimes are timings no property can know,
    so this set, not one figure, is what a plan may keep."""
    if len(items) > MAX_CHOICE_ITEMS:
        raise TooManyItems(f"{len(items)} knapsack items > MAX_CHOICE_ITEMS={MAX_CHOICE_ITEMS}")
    return {_min_bytes_keeping(problem, set(choice)) for size in range(len(items) + 1)
            for choice in itertools.combinations(items, size)}
