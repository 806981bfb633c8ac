"""The backend under test's partitioner on the smallest joint graphs: ONE op on one input.

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

Reach (``refimpl.properties.reach``): the plans keep two different byte counts (the
backward reads the op's output, so saving it is a choice).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_brute import trace_reference
from refimpl.expect.partition_expect import Expected, assert_same_results, assert_saved_within
from refimpl.memory import measure_saved
from refimpl.oracle import component
from refimpl.properties.reach import reach

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
