"""Properties of the backend under test's partitioner on a tensor-subclass input.

A jagged nested tensor (``torch.nested.nested_tensor(rows, layout=torch.jagged)``, rows of
drawn lengths) is a wrapper subclass: AOTAutograd flattens it into several primals (its
values and offsets), and its ragged size is a nested int. The expectation is eager
execution, or a refusal by name: the compiled program's output and gradient equal eager's,
or the backend raises a ``NotImplementedError`` (anywhere in the error's chain: dynamo wraps
a backend's error; :mod:`refimpl.expect.refusal`) that says it does not take the input.
refimpl refuses (``refimpl.partition.mutation.SubclassInputs``: it cannot map a write to a
flattened input's primals); a backend that fails deep inside with another error fails the
property (refimpl did, with an ``AttributeError`` from a nested int, before it refused by
name).

Reach: the backend compiled and ran the program (it did not refuse). refimpl refuses every
such input, so its reach is 0%: the property holds it to a clear refusal; torch's
partitioner (``aot_eager_decomp_partition``) runs these programs.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import close
from refimpl.expect.refusal import is_refusal
from refimpl.oracle import component
from refimpl.properties.reach import reach

BUDGETS = st.sampled_from([0.0, 0.5, 1.0])
#: element-wise steps that jagged nested tensors support, with a backward that reads them
#: (bounded: a chain of them keeps values near 1, so float32 rounding stays within `close`)
STEPS = {"sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh}


def make_program(steps: tuple[str, ...]):
    def program(nested: torch.Tensor) -> torch.Tensor:
        out = nested
        for step in steps:
            out = STEPS[step](out) * 2
        return out.values().sum()
    return program


def run_once(fn, lengths: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, the rows' gradient as one tensor) of one forward and backward of ``fn``."""
    torch.manual_seed(0)
    rows = [torch.randn(n, width) for n in lengths]
    nested = torch.nested.nested_tensor(rows, layout=torch.jagged, requires_grad=True)
    out = fn(nested)
    out.backward()
    return out.detach(), nested.grad.values()


@given(lengths=st.lists(st.integers(1, 5), min_size=2, max_size=4),
       width=st.integers(1, 4), steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1,
                                               max_size=3).map(tuple), budget=BUDGETS)
def test_partition_jagged_input_as_eager_or_refused(refimpl_backend, lengths, width, steps,
                                                    budget):
    compile_fn = component(refimpl_backend, "compile")
    why = (f"program: {' -> '.join(steps)} on a jagged nested tensor, rows of lengths "
           f"{lengths}, width {width}\nbudget={budget!r}, backend={refimpl_backend.name}")
    eager_out, eager_grad = run_once(make_program(steps), lengths, width)
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    try:
        out, grad = run_once(compile_fn(make_program(steps), memory_budget=budget), lengths,
                             width)
    except Exception as error:  # judged below: a refusal by name passes
        reach(False)
        assert is_refusal(error), (
            f"{why}\nexpected eager's results or a NotImplementedError refusing the input; "
            f"observed {type(error).__name__}: {str(error)[:400]}")
        return
    reach(True)
    assert close(out, eager_out) and close(grad, eager_grad), (
        f"{why}\noutput and gradient: expected eager's {eager_out}, {eager_grad}; observed "
        f"{out}, {grad}")
