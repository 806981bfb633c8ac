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
    assert_same_results,
    assert_saved_within,
    backward_flops,
    bound_bytes,
    measured,
    promise_of,
)
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import expected_of, reproducer
from refimpl.strategies.programs import EXPENSIVE_KINDS, KINDS, RANDOM_KINDS, programs

#: the forward values (non-primal forward-side nodes of the joint graph) an exact solver of
#: ``exact_solvers`` must handle: 2^16 save-sets (refimpl's "brute" refuses more)
MAX_FORWARD_VALUES = 16
#: no random ops (eager is the reference); with an op that costs FLOPs (else no budget binds)
SMALL_PROGRAMS = programs(max_steps=4, kinds=tuple(k for k in KINDS if k not in RANDOM_KINDS)
                          ).filter(lambda spec: any(step.kind in EXPENSIVE_KINDS
                                                    for step in spec.steps))


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
    run, expected = expected_of(spec)
    if sum(not node.primal for node in run.problem.nodes) > MAX_FORWARD_VALUES:
        event(f"more than {MAX_FORWARD_VALUES} forward values: beyond the promise")
        reject()
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
    bound = bound_bytes(expected.min_bytes, high, budget)
    optimum = expected.optimum(bound)
    assert recomputed <= optimum, (
        f"{why}\nrecomputed FLOPs: expected <= {optimum} (the best plan within {bound} "
        f"bytes: min {expected.min_bytes}, the budget-1.0 plan's {high}), observed "
        f"{recomputed} (saving {saved} bytes)")
    inputs = spec.inputs(0)
    eager = fn(*inputs)
    eager.backward()
    assert_same_results(out, grads, eager.detach(), [x.grad for x in inputs], why, "eager")
