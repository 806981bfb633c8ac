"""The backend under test's partitioner on the smallest joint graphs where a slip shows.

1. ONE op on one input (:func:`test_partition_one_op_program`, below).
2. Two matmuls of different bytes, of equal FLOPs or the smaller one costing more, the
   larger first or second, under torch's knapsack heuristics with room for one of them
   (:func:`test_partition_knapsack_room_for_one`: its docstring).

Of 1:

The drawn programs of the other partition properties always end in a sum of their outputs,
so their joint graphs hold at least two forward ops. A partitioner's own bookkeeping can
depend on the graph's size (a flow network whose source and sink vertices are numbered
after the graph's nodes; a list indexed by position), and such a slip shows only on the
smallest graphs. Here ``fn(x) = op(x)`` for a full reduction ``op`` (:data:`ONE_OPS`), most
of whose backwards read the op's own output: the plan saves that scalar or recomputes the
reduction. At budgets 0.0, 0.5 and 1.0, against the brute force of
:mod:`refimpl.expect.partition_brute` (independent of refimpl's partitioner):

* the bytes the meter reads are within ``min + budget x (max - min)`` (max: the
  no-recompute bytes) and never below ``min``; at budget 0.0 exactly ``min``;
* output and gradient equal eager's.

Reach (``refimpl.properties.reach``) of 1: the plans keep two different byte counts (the
backward reads the op's output, so saving it is a choice).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_brute import trace_reference
from refimpl.expect.partition_expect import (
    Expected,
    assert_same_results,
    assert_saved_within,
    bound_bytes,
    measured,
)
from refimpl.expect.partition_knapsack import KNAPSACK_SOLVERS, expected_bytes, knapsack_items
from refimpl.memory import measure_saved
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import expected_of, reproducer, require_promise
from refimpl.strategies.programs import ProgramSpec, Step

#: full reductions of one input; all but ``sum`` read their own output in the backward
ONE_OPS = {
    "sum": lambda x: x.sum(),
    "amax": lambda x: x.amax(),
    "max": lambda x: x.max(),
    "prod": lambda x: x.prod(),
    "logsumexp": lambda x: x.logsumexp((0, 1)),
    "norm": lambda x: torch.linalg.vector_norm(x),
}


def _input(n: int, width: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(n, width, generator=gen) + 0.5).requires_grad_()


@given(name=st.sampled_from(sorted(ONE_OPS)), n=st.integers(1, 4), width=st.integers(1, 4),
       budget=st.sampled_from([0.0, 0.5, 1.0]))
def test_partition_one_op_program(refimpl_backend, name, n, width, budget):
    op = ONE_OPS[name]
    fn = lambda x: op(x)  # one code object for every example: dynamo is reset below
    expected = Expected.of(trace_reference(fn, [_input(n, width)]))
    reach(len({o.bytes for o in expected.plans}) >= 2)
    torch._dynamo.reset()
    x = _input(n, width)
    report = measure_saved(component(refimpl_backend, "compile")(fn, memory_budget=budget), x)
    report.outputs.backward()
    why = f"program: {name}(x), x of shape ({n}, {width}); budget={budget!r}, " \
          f"backend={refimpl_backend.name}"
    assert_saved_within(report.bytes, expected, budget, why)
    if budget == 0.0:
        assert report.bytes == expected.min_bytes, (
            f"{why}\nbudget 0.0: expected the minimum {expected.min_bytes} bytes, observed "
            f"{report.bytes}")
    eager_x = _input(n, width)
    eager = fn(eager_x)
    eager.backward()
    assert_same_results(report.outputs.detach(), [x.grad], eager.detach(), [eager_x.grad],
                        why, "eager")


#: ``(x's width, (first output width, second))`` of :func:`_pair`: in the first two the
#: matmuls tie in FLOPs, in the last two the smaller output costs twice the larger's FLOPs
PAIRS = ((2, (4, 2)), (4, (2, 4)), (8, (2, 4)), (2, (8, 4)))


def _pair(n: int, width: int, outs: tuple[int, int]) -> ProgramSpec:
    """``sin(cos(x @ W1) @ W2)``, ``x`` of shape ``(n, width)``: the matmuls make ``n x
    outs[k]`` floats (one twice the other's) and cost ``2 n width outs[0]`` and ``2 n
    outs[0] outs[1]`` FLOPs (:data:`PAIRS`)."""
    return ProgramSpec(n, width, (
        Step("mm", "mm", (0,), outs[0]), Step("pointwise", "cos", (1,), outs[0]),
        Step("mm", "mm", (2,), outs[1]), Step("pointwise", "sin", (3,), outs[1])), (4,))


@given(n=st.integers(2, 4), pair=st.sampled_from(PAIRS),
       solver=st.sampled_from(KNAPSACK_SOLVERS))
def test_partition_knapsack_room_for_one(refimpl_backend, n, pair, solver):
    """For a target that promises it (``partition_promise.modelled_knapsack``), with torch's
    ``activation_memory_budget_solver`` set to a knapsack heuristic, on two matmuls of
    different bytes, the larger one first or second in the graph, costing equal FLOPs or the
    smaller one more (:func:`_pair`), at the budget whose knapsack capacity (``bound -
    min``) is the larger one's bytes (room for either, not both): the plan keeps the bytes
    of :mod:`refimpl.expect.partition_knapsack` (``ilp``: the best runtime, then the least
    memory, so the smaller matmul; ``greedy``: runtime per byte, the smaller first). A
    knapsack that breaks a runtime tie by graph order keeps the larger one when it comes
    first; one that keeps the most memory within the capacity keeps the larger one always.
    Reach: the capacity admits either item alone and not both."""
    require_promise(refimpl_backend, "modelled_knapsack")
    spec = _pair(n, *pair)
    run, expected = expected_of(spec)
    problem = run.backward_problem
    sizes = sorted(problem.nodes[i].bytes for i in knapsack_items(problem))
    compile_fn = component(refimpl_backend, "compile")
    fn = spec.make()
    torch._dynamo.reset()
    with torch._functorch.config.patch(activation_memory_budget_solver=solver):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        low = expected.min_bytes
        budget = sizes[-1] / (high - low)
        saved = measured(compile_fn(fn, memory_budget=budget), spec)[0]
    capacity = bound_bytes(low, high, budget) - low
    reach(len(sizes) == 2 and sizes[-1] <= capacity < sum(sizes))
    wanted = expected_bytes(problem, solver, capacity)
    assert saved in wanted, (
        f"{reproducer(spec, budget=budget, solver=solver, backend=refimpl_backend.name)}\n"
        f"saved bytes: expected one of {sorted(wanted)} (min {low}, capacity {capacity}, "
        f"items {sizes}), observed {saved}")
