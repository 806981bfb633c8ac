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

Judging: outputs and gradients close to eager's, or else within dynamo's accuracy rule against
the same program run in float64 (:func:`refimpl.expect.partition_expect.assert_same_results`):
a large constant written into ``w`` saturates ``tanh``, its gradients are near zero, and two
float32 orders of the same sums then differ by more than ``allclose`` allows (issue 32, item 9:
refimpl's own correct plan failed the plain comparison; ``tests/test_partition_mutation.py``
pins that example).

The third property passes a view ``v`` of ``w`` as a third input
(:func:`refimpl.strategies.mutating.aliased_mutation_programs`): AOTAutograd merges ``w`` and
``v`` into one synthetic base. The expectation is eager execution or a refusal by name
(:mod:`refimpl.expect.refusal`: a ``NotImplementedError`` such as refimpl's
``AliasedMutatedInputs``); autograd's in-place error at backward time is neither.

Reach: the budget is below 1, so the partitioner weighs recomputing ``h`` against saving it.
For the aliased programs: ``h`` is read from ``v`` before the write, so recomputing it from
the graph's input reads values the forward never used (at any budget: a plan recomputes a
cheap ``h`` at 1.0 too).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import assert_same_results, close
from refimpl.expect.refusal import is_refusal
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.mutating import (
    AliasSpec,
    MutationSpec,
    aliased_mutation_programs,
    mutation_programs,
)

BUDGETS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
SIZES = st.lists(st.integers(2, 16), min_size=3, max_size=4, unique=True)  # 0, 1: specialised


def run_once(fn, spec: MutationSpec | AliasSpec, dtype: torch.dtype = torch.float32
             ) -> tuple[torch.Tensor, list, torch.Tensor]:
    """(output, [x's gradient], w afterwards) of one forward and backward of ``fn`` on
    ``spec``'s inputs, in ``dtype`` (float64: the truth that judges float32 rounding)."""
    x, w = (t.detach().to(dtype) for t in spec.inputs(0))
    x.requires_grad_()
    out = fn(*spec.arguments(x, w))
    out.backward()
    return out.detach(), [x.grad], w


def check_as_eager(fn, compiled, spec: MutationSpec | AliasSpec, why: str) -> None:
    """One call of ``compiled`` on ``spec``'s inputs: output and ``x``'s gradient as eager's
    (or within dynamo's rule against float64 eager), ``w`` afterwards as eager's."""
    eager_out, eager_grads, eager_w = run_once(fn, spec)
    fp64_out, fp64_grads, _ = run_once(fn, spec, torch.float64)
    out, grads, w = run_once(compiled, spec)
    assert_same_results(out, grads, eager_out, eager_grads, why, "eager",
                        fp64=(fp64_out, fp64_grads))
    assert close(w, eager_w), (f"{why}\nw after the call: expected eager's\n{eager_w}\n"
                               f"observed\n{w}")


def check_at_sizes(compile_fn, spec: MutationSpec, sizes: list[int], budget: float,
                   backend: str) -> None:
    """One function compiled at ``budget``, called once per batch size in ``sizes``."""
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    compiled = compile_fn(fn, memory_budget=budget)
    for call, n in enumerate(sizes):
        sized = replace(spec, n=n)
        why = (f"program:\n{sized}\nbudget={budget!r}, backend={backend}, "
               f"call {call + 1} of sizes {sizes}")
        check_as_eager(fn, compiled, sized, why)


@given(spec=mutation_programs(), budget=BUDGETS)
def test_partition_input_mutation_as_eager(refimpl_backend, spec, budget):
    compile_fn = component(refimpl_backend, "compile")
    reach(budget < 1)
    why = f"program:\n{spec}\nbudget={budget!r}, backend={refimpl_backend.name}"
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    check_as_eager(fn, compile_fn(fn, memory_budget=budget), spec, why)


@given(spec=mutation_programs(), sizes=SIZES, budget=BUDGETS)
def test_partition_input_mutation_at_many_shapes(refimpl_backend, spec, sizes, budget):
    """One compiled function called on 3-4 batch sizes: every call's output, ``x``'s
    gradient and ``w`` afterwards equal eager's (dynamic shapes beside a mutated input)."""
    compile_fn = component(refimpl_backend, "compile")
    reach(budget < 1)
    check_at_sizes(compile_fn, spec, sizes, budget, refimpl_backend.name)


@given(spec=aliased_mutation_programs(), budget=BUDGETS)
def test_partition_aliased_input_mutation_as_eager_or_refused(refimpl_backend, spec, budget):
    """Inputs ``w`` and ``v`` share a storage and the program writes to ``w``: eager's
    output, ``x``'s gradient and ``w`` afterwards, or a refusal by name at compile time or
    at the first call (module docstring). refimpl refuses when the storage is not empty;
    a backend that maps the write to the wrong input, or recomputes ``h`` from the new
    values, gives other numbers or autograd's in-place error."""
    compile_fn = component(refimpl_backend, "compile")
    reach(spec.read_first)
    why = f"program:\n{spec}\nbudget={budget!r}, backend={refimpl_backend.name}"
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    try:
        check_as_eager(fn, compile_fn(fn, memory_budget=budget), spec, why)
    except AssertionError:
        raise
    except Exception as error:  # judged here: a refusal by name passes
        assert is_refusal(error), (
            f"{why}\nexpected eager's results or a NotImplementedError refusing the aliased "
            f"inputs; observed {type(error).__name__}: {str(error)[:400]}")
