"""The backend under test's other exact solvers, chosen through torch's partitioner config.

A target may answer more than torch's default ``activation_memory_budget_solver`` value with
an exact solver: it lists those values in ``partition_promise.exact_solvers`` (refimpl's:
``"brute"``, which enumerates every save-set, smallest first, and refuses a graph of more
than 16 candidate values). Under each of them the plan is judged as the default solver's is,
against the brute-force expectation of :mod:`refimpl.expect.partition_expect` (independent of
refimpl's partitioner):

* the bytes the meter reads stay within ``min + budget x (max - min)``, ``max`` being the
  target's own budget-1.0 bytes under the same solver;
* the backward recomputes no more FLOPs (torch's FlopCounterMode, beyond the no-recompute
  backward's) than the best valid plan within that bound (on programs this small the bound
  seldom admits a plan cheaper than the fewest-bytes one, so a solver that keeps a worse
  plan is rarely seen: a known gap);
* output and gradients equal eager's.

The promise covers joint graphs of at most :data:`MAX_FORWARD_VALUES` forward values (an
enumeration of 2^n save-sets has a limit): programs of up to four steps, larger ones not
valid examples; random ops are left out, so eager is the reference.

The budget is drawn from those of :data:`GRID` where the bound binds, where the program has
any (a small program has few plans). Reach (``refimpl.properties.reach``): the budget binds
and the bound admits two or more Pareto-optimal plans
(:meth:`~refimpl.expect.partition_expect.Expected.reached`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import event, given, reject
from hypothesis import strategies as st

from refimpl.expect.partition_expect import (
    NO_EXACT_SOLVER,
    assert_as_eager,
    assert_recompute_within,
    assert_saved_within,
    backward_flops,
    bound_bytes,
    least_recompute_solvers,
    measured,
    promise_of,
)
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import (
    check_within_budget_and_exact,
    expected_of,
    reproducer,
)
from refimpl.strategies.programs import (
    EXPENSIVE_KINDS,
    KINDS,
    RANDOM_KINDS,
    parallel_matmuls,
    programs,
    random_chains,
)

#: the forward values (non-primal forward-side nodes of the joint graph) an exact solver of
#: ``exact_solvers`` must handle: 2^16 save-sets (refimpl's "brute" refuses more)
MAX_FORWARD_VALUES = 16
#: no random ops (eager is the reference); with an op that costs FLOPs (else no budget binds)
SMALL_PROGRAMS = programs(max_steps=4, kinds=tuple(k for k in KINDS if k not in RANDOM_KINDS)
                          ).filter(lambda spec: any(step.kind in EXPENSIVE_KINDS
                                                    for step in spec.steps))


def expected_within_promise(spec, solver: str | None):
    """``expected_of(spec)``, or the example rejected where ``solver`` (an exact solver the
    target names; ``None``: torch's default config) is promised only on joint graphs of at
    most :data:`MAX_FORWARD_VALUES` forward values and ``spec``'s has more."""
    run, expected = expected_of(spec)
    forward_values = sum(not node.primal for node in run.problem.nodes)
    if solver is not None and forward_values > MAX_FORWARD_VALUES:
        event(f"more than {MAX_FORWARD_VALUES} forward values: beyond the promise")
        reject()
    return run, expected


#: the budgets drawn from: those of them where the bound binds, where there are any
GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))


@given(spec=SMALL_PROGRAMS, data=st.data())
def test_partition_every_exact_solver_recomputes_the_least(refimpl_backend, spec, data):
    solvers = promise_of(refimpl_backend).exact_solvers
    if not solvers:
        pytest.skip(f"backend {refimpl_backend.name!r} names no other exact solver "
                    "(partition_promise.exact_solvers is empty)")
    solver = data.draw(st.sampled_from(solvers), label="solver")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_within_promise(spec, solver)
    binding = [b for b in GRID if expected.reached(b)]  # small programs: few plans bind
    budget = data.draw(st.sampled_from(binding or GRID), label="budget")
    reach(expected.reached(budget))
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(activation_memory_budget_solver=solver):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        compiled = compile_fn(fn, memory_budget=budget)
        saved, out, grads = measured(compiled, spec)  # the first call compiles
        recomputed = backward_flops(compiled, spec) - run.backward_flops
    why = reproducer(spec, budget=budget, solver=solver, backend=refimpl_backend.name)
    assert_saved_within(saved, expected, budget, why, max_bytes=high)
    assert_recompute_within(recomputed, expected, high, budget, saved, why)
    assert_as_eager(fn, spec, out, grads, why)


def middle_budgets(expected) -> list[float]:
    """The budgets of :data:`GRID` whose bound (``max``: the no-recompute bytes) admits a
    middle plan of the frontier: the best plan within it recomputes fewer FLOPs than the
    fewest-bytes plan and more than the least-FLOPs plan."""
    top, bottom = expected.frontier[0].flops, expected.frontier[-1].flops
    return [b for b in GRID if top > expected.optimum(expected.bound(b)) > bottom]


@given(spec=parallel_matmuls(), data=st.data())
def test_partition_exact_solvers_take_a_middle_plan(refimpl_backend, spec, data):
    """Every exact solver the target promises (torch's default config under
    ``partition_promise.least_recompute``, and each of ``exact_solvers``), on matmuls of
    different costs side by side (:func:`~refimpl.strategies.programs.parallel_matmuls`)
    at a budget whose best plan saves some of them: the backward recomputes no more FLOPs
    than that plan, the bytes stay within the bound, and the results are eager's. A solver
    that keeps the first plan that fits, or compares plans wrongly, recomputes every matmul
    there. Reach: the bound, with the target's own budget-1.0 bytes as ``max``, admits a
    middle plan."""
    solvers = least_recompute_solvers(refimpl_backend)
    if not solvers:
        pytest.skip(NO_EXACT_SOLVER.format(name=refimpl_backend.name))
    solver = data.draw(st.sampled_from(solvers), label="solver")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_within_promise(spec, solver)
    budget = data.draw(st.sampled_from(middle_budgets(expected) or GRID), label="budget")
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    config = {} if solver is None else {"activation_memory_budget_solver": solver}
    with torch._functorch.config.patch(**config):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        compiled = compile_fn(fn, memory_budget=budget)
        saved, out, grads = measured(compiled, spec)  # the first call compiles
        recomputed = backward_flops(compiled, spec) - run.backward_flops
    optimum = expected.optimum(bound_bytes(expected.min_bytes, high, budget))
    reach(expected.frontier[0].flops > optimum > expected.frontier[-1].flops)
    why = reproducer(spec, budget=budget, solver=solver, backend=refimpl_backend.name)
    assert_saved_within(saved, expected, budget, why, max_bytes=high)
    assert_recompute_within(recomputed, expected, high, budget, saved, why)
    assert_as_eager(fn, spec, out, grads, why)


@given(spec=random_chains(), budget=st.sampled_from([0.0, 0.5]), data=st.data())
def test_partition_exact_solvers_save_every_random_draw(refimpl_backend, spec, budget, data):
    """torch's default solver config and every exact solver the target promises, on chains
    of random ops
    (:func:`~refimpl.strategies.programs.random_chains`): the backward reads only random
    draws, so the one valid plan saves all of them. A solver that never considers saving
    every candidate at once finds no plan (or recomputes a draw); the check is that of
    :func:`test_partition_within_budget_and_exact` (bytes within the bound, output and
    gradients those of the reference run whose forward drew the same numbers). Reach: every
    step is ``rand_like`` (no dropout, whose saved mask is not a draw), so the backward
    reads draws only."""
    solvers = (None, *promise_of(refimpl_backend).exact_solvers)
    solver = data.draw(st.sampled_from(solvers), label="solver")
    config = {} if solver is None else {"activation_memory_budget_solver": solver}
    only_draws = all(step.kind == "rand" for step in spec.steps)  # no dropout mask to keep
    with torch._functorch.config.patch(**config):
        check_within_budget_and_exact(refimpl_backend, spec, budget, reached=only_draws)
