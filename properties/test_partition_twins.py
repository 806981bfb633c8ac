"""The backend under test partitions the joint graph after common-subexpression elimination.

torch's partitioner first merges the joint graph's duplicate pure computations
(``torch._functorch.config.cse``, on by default; refimpl's ``PartitionOptions.cse``), so a
program that computes one value twice is planned as the program that computes it once.
The property is metamorphic: two programs of the same inputs, compiled by the target at
torch's default budget 1.0, measured by refimpl's meter (:func:`refimpl.memory.measure_saved`):

* *twins*: ``a = f(x, w)`` and ``b = f(x, w)``, two calls of the same pure computation
  (``x @ w``, or ``act(x @ w)``), read by two different activations ``g(a) + h(b)``;
* *once*: ``m = f(x, w)`` read as ``g(m) + h(m)``.

Expectation: the twins save exactly the bytes the single computation saves, and both give
eager's output and gradients. A partitioner that plans on the graph before CSE keeps both
copies where it keeps one (twice the bytes). (Below budget 1.0 the single program of these
sizes recomputes its matmul and saves nothing, so a second copy need not show.)

Reach (``refimpl.properties.reach``): the single program saves some bytes, so a second copy
would show.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.memory import measure_saved
from refimpl.oracle import component
from refimpl.properties.reach import reach

ACTIVATIONS = {"cos": torch.cos, "sin": torch.sin, "tanh": torch.tanh,
               "sigmoid": torch.sigmoid}


def computation(act: str | None):
    """``f(x, w)``: the matmul, or an activation of it."""
    if act is None:
        return lambda x, w: x @ w
    return lambda x, w: ACTIVATIONS[act](x @ w)


def programs(f, g, h):
    """(twins, once): the same computation called twice or once (module docstring)."""
    def twins(x, w):
        return (g(f(x, w)) + h(f(x, w))).sum()

    def once(x, w):
        m = f(x, w)
        return (g(m) + h(m)).sum()

    return twins, once


def run(compiled, x: torch.Tensor, w: torch.Tensor) -> tuple[int, torch.Tensor, list]:
    """(saved bytes, output, input gradients) of one run on fresh copies of ``x`` and ``w``."""
    inputs = [t.detach().clone().requires_grad_() for t in (x, w)]
    report = measure_saved(compiled, *inputs)
    report.outputs.backward()
    return report.bytes, report.outputs.detach(), [t.grad for t in inputs]


@given(n=st.integers(1, 6), width=st.integers(2, 8), out=st.integers(2, 8),
       inner=st.sampled_from([None, *sorted(ACTIVATIONS)]),
       pair=st.permutations(sorted(ACTIVATIONS)))
def test_partition_plans_twin_computations_as_one(refimpl_backend, n, width, out, inner, pair):
    compile_fn = component(refimpl_backend, "compile")
    g, h = ACTIVATIONS[pair[0]], ACTIVATIONS[pair[1]]
    twins, once = programs(computation(inner), g, h)
    torch.manual_seed(0)
    x, w = torch.randn(n, width), torch.randn(width, out)
    torch._dynamo.reset()
    once_bytes, _, _ = run(compile_fn(once, memory_budget=1.0), x, w)
    twin_bytes, got, got_grads = run(compile_fn(twins, memory_budget=1.0), x, w)
    _, want, want_grads = run(once, x, w)
    reach(once_bytes > 0)
    what = (f"twins f={'x @ w' if inner is None else inner + '(x @ w)'} read by {pair[0]} "
            f"and {pair[1]}, x {n}x{width}, w {width}x{out}, budget=1.0, "
            f"backend={refimpl_backend.name!r}")
    assert twin_bytes == once_bytes, (
        f"{what}: the twins save {twin_bytes} bytes, the computation written once "
        f"{once_bytes} (the partitioner should plan on the graph after CSE)")
    torch.testing.assert_close(got, want, msg=lambda m: f"{what}: output\n{m}")
    for i, (a, b) in enumerate(zip(got_grads, want_grads)):
        torch.testing.assert_close(a, b, msg=lambda m, i=i: f"{what}: gradient {i}\n{m}")
