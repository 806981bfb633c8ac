"""The backend under test's plan IS the brute-force optimum, bytes and FLOPs, on tiny programs.

The other partition properties hold a plan to invariants (within the bound, no more
recompute than the optimum, results as eager's); a solver can keep those and still make a
different plan than the one the objective asks for. Here, on programs small enough to
enumerate (:func:`~refimpl.strategies.programs.tied_matmuls`: two or three matmuls into
widths 2 and 4, from an input of width 2, 4 or 8, so that save-sets of equal bytes and equal
FLOPs recur, and a smaller value can cost more FLOPs than a larger one), the plan the
target makes at a budget must be THE plan docs/design.md's objective prefers within the
bound: the fewest recompute FLOPs, then the fewest bytes
(:meth:`~refimpl.expect.partition_expect.Expected.best_within`, over the brute force of
:mod:`refimpl.expect.partition_brute`, independent of refimpl's partitioner). Observed:

* the bytes the meter reads equal that plan's bytes, and
* the FLOPs the backward runs beyond the no-recompute reference's backward (torch's
  FlopCounterMode) equal that plan's recompute FLOPs, and
* output and gradients equal eager's.

For every exact solver the target promises (torch's default solver config under
``partition_promise.least_recompute``, and each of ``exact_solvers``) and both runtime
estimators of ``activation_memory_budget_runtime_estimator`` that refimpl and torch share
(``"flops"``, ``"profile"``; torch's ``"testing"`` is not refimpl's). Under ``"profile"``
every matmul of the program makes the same call (``uniform``), so any timing prices them
alike and the FLOP optimum is the time optimum too.

The budget puts the bound exactly at the bytes of one of the brute force's save-sets, or
one byte below or above it (``budget = (target - min) / (max - min)``, ``max`` being the
target's own budget-1.0 bytes): a solver that compares the bound with ``<`` instead of
``<=``, or breaks a tie the other way, makes a different plan there.

The same ties judge torch's knapsack heuristics (``activation_memory_budget_solver``
``"greedy"``, ``"ilp"``) for a target that promises refimpl's model of them
(``partition_promise.modelled_knapsack``): with the bound exactly at ``min`` plus the bytes
of a subset of the knapsack's items, or a byte either side, the plan keeps the bytes of
:mod:`refimpl.expect.partition_knapsack` (``greedy``: runtime per byte, graph order among
equals; ``ilp``: the best runtime, then the least memory), half the programs holding two
matmuls of equal FLOPs and different bytes (``swapped``).

Reach (``refimpl.properties.reach``): the bound admits plans of two or more sizes, so the
plan is a choice (the knapsack: the model keeps more than ``min``).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import event, given, reject
from hypothesis import strategies as st

from refimpl.expect.partition_expect import (
    NO_EXACT_SOLVER,
    assert_as_eager,
    backward_flops,
    bound_bytes,
    least_recompute_solvers,
    measured,
)
from refimpl.expect.partition_knapsack import expected_bytes, knapsack_items
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import (
    TORCH_SOLVERS,
    expected_of,
    reproducer,
    require_promise,
)
from refimpl.properties.test_partition_solvers import expected_within_promise
from refimpl.strategies.programs import tied_matmuls

#: the ``activation_memory_budget_runtime_estimator`` values both targets know
ESTIMATORS = ("flops", "profile")


def draw_bound(data, sizes: list[int], low: int, high: int) -> int:
    """A byte bound a budget in [0, 1) reaches (from ``low``, the fewest bytes, up to, not
    including, ``high``, the budget-1.0 bytes): one of ``sizes`` above ``low`` (``low``
    itself where none is), exactly, or one byte below or above it where that is in range."""
    # largest first: Hypothesis favours early elements, and a larger bound admits more plans
    inside = sorted({size for size in sizes if low < size < high}, reverse=True) or [low]
    size = data.draw(st.sampled_from(inside), label="size")
    offset = data.draw(st.sampled_from((0, -1, 1)), label="offset")
    return size + offset if low <= size + offset < high else size


@given(data=st.data())
def test_partition_plan_is_the_brute_force_optimum(refimpl_backend, data):
    solvers = least_recompute_solvers(refimpl_backend)
    if not solvers:
        pytest.skip(NO_EXACT_SOLVER.format(name=refimpl_backend.name))
    solver = data.draw(st.sampled_from(solvers), label="solver")
    estimator = data.draw(st.sampled_from(ESTIMATORS), label="runtime_estimator")
    # an enumerating solver is promised on up to 16 forward values: two plain matmuls
    exact = solver is None
    spec = data.draw(tied_matmuls(uniform=estimator == "profile", matmuls=3 if exact else 2,
                                  summaries=exact), label="spec")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_within_promise(spec, solver)
    fn = spec.make()
    config = {"activation_memory_budget_runtime_estimator": estimator}
    if solver is not None:
        config["activation_memory_budget_solver"] = solver
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(**config):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        low = expected.min_bytes
        if high <= low:
            event("budget-1.0 plan keeps the fewest bytes: no budget below 1.0 chooses")
            reject()
        target = draw_bound(data, [o.bytes for o in expected.plans], low, high)
        budget = (target - low) / (high - low)
        compiled = compile_fn(fn, memory_budget=budget)
        saved, out, grads = measured(compiled, spec)  # the first call compiles
        recomputed = backward_flops(compiled, spec) - run.backward_flops
    bound = bound_bytes(low, high, budget)
    best = expected.best_within(bound)
    reach(len({o.bytes for o in expected.plans if o.bytes <= bound}) >= 2)
    why = reproducer(spec, budget=budget, solver=solver, runtime_estimator=estimator,
                     backend=refimpl_backend.name)
    assert (saved, recomputed) == (best.bytes, best.flops), (
        f"{why}\nplan within {bound} bytes (min {low}, the budget-1.0 plan's {high}): "
        f"expected {best.bytes} bytes saved, {best.flops} FLOPs recomputed (the fewest "
        f"FLOPs, then bytes, of the brute force's plans {list(expected.plans)}), observed "
        f"{saved} bytes, {recomputed} FLOPs")
    assert_as_eager(fn, spec, out, grads, why)


@given(spec=st.one_of(tied_matmuls(swapped=True), tied_matmuls()),
       solver=st.sampled_from(sorted(TORCH_SOLVERS, reverse=True)), data=st.data())
def test_partition_knapsack_plan_on_ties(refimpl_backend, spec, solver, data):
    require_promise(refimpl_backend, "modelled_knapsack")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    problem = run.backward_problem
    sizes = [problem.nodes[i].bytes for i in knapsack_items(problem)]
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(activation_memory_budget_solver=solver):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        low = expected.min_bytes
        if high <= low:
            event("budget-1.0 plan keeps the fewest bytes: no budget below 1.0 chooses")
            reject()
        fills = {sum(c) for k in range(1, len(sizes) + 1)
                 for c in itertools.combinations(sizes, k)}  # the items' subsets' bytes
        target = draw_bound(data, [low + fill for fill in fills], low, high)
        budget = (target - low) / (high - low)
        saved = measured(compile_fn(fn, memory_budget=budget), spec)[0]
    bound = bound_bytes(low, high, budget)
    wanted = expected_bytes(problem, solver, bound - low)
    reach(wanted != {low})
    assert saved in wanted, (
        f"{reproducer(spec, budget=budget, solver=solver, backend=refimpl_backend.name)}\n"
        f"saved bytes: expected one of {sorted(wanted)} (min {low}, bound {bound}, items "
        f"{sizes}), observed {saved}")
