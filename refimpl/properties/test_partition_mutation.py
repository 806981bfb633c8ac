"""Properties of the backend under test's partitioner on programs that mutate an input.

Programs come from :func:`refimpl.strategies.mutating.mutation_programs`: an in-place write
to an input ``w``, then a cheap value ``h`` of the new ``w`` that the backward reads. The
expectation is eager execution: the compiled function's output, the gradient of ``x`` and
``w``'s value afterwards equal eager's, at every budget. A partitioner that recomputes ``h``
in the backward from the graph's input reads ``w`` after AOTAutograd has copied the new
value in: a wrong gradient, or autograd's "modified by an inplace operation" error.

The second property calls one compiled function on several batch sizes, as
:mod:`refimpl.properties.test_partition_shapes` does: past the first size mismatch the graph is
compiled with dynamic shapes, so the partitioner meets the mutated input beside symbolic sizes.

Reach: the budget is below 1, so the partitioner weighs recomputing ``h`` against saving it.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import assert_same_results, close
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.mutating import MutationSpec, mutation_programs

BUDGETS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
SIZES = st.lists(st.integers(2, 16), min_size=3, max_size=4, unique=True)  # 0, 1: specialised


def run_once(fn, spec: MutationSpec) -> tuple[torch.Tensor, list, torch.Tensor]:
    """(output, [x's gradient], w afterwards) of one forward and backward of ``fn``."""
    x, w = spec.inputs(0)
    out = fn(x, w)
    out.backward()
    return out.detach(), [x.grad], w


@given(spec=mutation_programs(), budget=BUDGETS)
def test_partition_input_mutation_as_eager(refimpl_backend, spec, budget):
    compile_fn = component(refimpl_backend, "compile")
    reach(budget < 1)
    why = f"program:\n{spec}\nbudget={budget!r}, backend={refimpl_backend.name}"
    eager_out, eager_grads, eager_w = run_once(spec.make(), spec)
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    out, grads, w = run_once(compile_fn(spec.make(), memory_budget=budget), spec)
    assert_same_results(out, grads, eager_out, eager_grads, why, "eager")
    assert close(w, eager_w), (f"{why}\nw after the call: expected eager's\n{eager_w}\n"
                               f"observed\n{w}")


@given(spec=mutation_programs(), sizes=SIZES, budget=BUDGETS)
def test_partition_input_mutation_at_many_shapes(refimpl_backend, spec, sizes, budget):
    """One compiled function called on 3-4 batch sizes: every call's output, ``x``'s
    gradient and ``w`` afterwards equal eager's (dynamic shapes beside a mutated input)."""
    compile_fn = component(refimpl_backend, "compile")
    reach(budget < 1)
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    compiled = compile_fn(fn, memory_budget=budget)
    for call, n in enumerate(sizes):
        sized = replace(spec, n=n)
        why = (f"program:\n{sized}\nbudget={budget!r}, backend={refimpl_backend.name}, "
               f"call {call + 1} of sizes {sizes}")
        eager_out, eager_grads, eager_w = run_once(fn, sized)
        out, grads, w = run_once(compiled, sized)
        assert_same_results(out, grads, eager_out, eager_grads, why, "eager")
        assert close(w, eager_w), (f"{why}\nw after the call: expected eager's\n{eager_w}\n"
                                   f"observed\n{w}")
