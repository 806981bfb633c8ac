"""Properties of the backend under test's partitioner on one compiled function called with
many input shapes.

Programs come from :func:`refimpl.strategies.programs.programs` without random ops (eager
is then the expectation at every shape); the batch size ``n`` of the input ``x`` changes on
every call, over :data:`CALLS` distinct sizes, more than dynamo's recompile limit (8). As
``torch.compile`` does, a backend should compile with dynamic shapes after the first size
mismatch and keep its plan: every call returns eager's output and gradients, and none
raises (``refimpl.compile`` raises rather than run a call without its plan, so a backend
that recompiles on every size fails here at the ninth).

Reach: the budget binds on the first call's sizes and the bound admits two or more
Pareto-optimal plans (:meth:`~refimpl.expect.partition_expect.Expected.reached`), so the
plan carried to the other sizes is a real choice.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import assert_same_results
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import expected_of
from refimpl.strategies.programs import KINDS, RANDOM_KINDS, programs

CALLS = 10  # distinct batch sizes per compiled function: past the recompile limit (8)
#: no ``unbind``: ``stack(v.unbind(0))`` over the batch dimension makes one graph node per row,
#: so no graph serves two batch sizes and every compiler (torch.compile too) recompiles per size
DETERMINISTIC = programs(kinds=tuple(k for k in KINDS if k not in RANDOM_KINDS)).filter(
    lambda spec: all(step.variant != "unbind" for step in spec.steps))
SIZES = st.permutations(range(2, 2 + CALLS))  # 0 and 1 are always specialised by dynamo
BUDGETS = st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.5])


def _eager(fn, spec):
    inputs = spec.inputs(0)
    out = fn(*inputs)
    out.backward()
    return out.detach(), [x.grad for x in inputs]


@given(spec=DETERMINISTIC, sizes=SIZES, budget=BUDGETS)
def test_partition_one_function_many_shapes(refimpl_backend, spec, sizes, budget):
    compile_fn = component(refimpl_backend, "compile")
    _, expected = expected_of(spec)
    reach(expected.reached(budget))
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    compiled = compile_fn(fn, memory_budget=budget)
    for call, n in enumerate(sizes):
        sized = replace(spec, n=n)
        why = (f"program:\n{sized}\nbudget={budget!r}, backend={refimpl_backend.name}, "
               f"call {call + 1} of sizes {list(sizes)}")
        out, grads = _eager(compiled, sized)
        ref_out, ref_grads = _eager(fn, sized)
        assert_same_results(out, grads, ref_out, ref_grads, why, "eager")
