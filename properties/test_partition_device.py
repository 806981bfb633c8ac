"""Properties of the backend under test's memory-budget partitioner (``compile``) on a CUDA
device, where the meter can be checked against the device's own allocator.

Programs come from :func:`refimpl.strategies.programs.programs`, compiled by the target at a
drawn budget and run on CUDA (inputs allocated beforehand, one warm-up run so compilation's
own allocations are done). The expectation is the CUDA caching allocator's, never the
partitioner's: ``torch.cuda.memory_allocated()`` after the forward minus before.

* The saved bytes the meter (:func:`refimpl.memory.measure_saved`) reads equal the allocator's
  delta up to the allocator's rounding: the delta, less the forward's scalar output (one
  block), lies in ``[meter, meter + (BLOCK - 1) x storages]``, where each storage held is
  rounded up to the allocator's block (:data:`BLOCK`, 512 bytes).

Without a CUDA device every property skips, visibly, with the reason (the ``cuda`` marker).

Reach (each example): the forward saves at least one storage for backward.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.memory import measure_saved
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.programs import ProgramSpec, programs

pytestmark = pytest.mark.cuda

BLOCK = 512  # the CUDA caching allocator rounds every allocation up to a multiple of this
BUDGETS = st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0])


def cuda_inputs(spec: ProgramSpec) -> list[torch.Tensor]:
    """``spec``'s inputs as CUDA leaves that require grad."""
    return [x.detach().cuda().requires_grad_() for x in spec.inputs(0)]


@given(spec=programs(), budget=BUDGETS)
def test_meter_matches_cuda_allocator(refimpl_backend, spec: ProgramSpec, budget: float):
    """Compiled at ``budget`` on CUDA: the meter's saved bytes equal the allocator's delta
    over the forward (less the output's block), up to the allocator's per-storage rounding."""
    compiled = component(refimpl_backend, "compile")(spec.make(), memory_budget=budget)
    torch._dynamo.reset()
    compiled(*cuda_inputs(spec)).backward()  # warm-up: compilation's allocations are done
    inputs = cuda_inputs(spec)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.manual_seed(0)
    report = measure_saved(compiled, *inputs)
    torch.cuda.synchronize()
    delta = torch.cuda.memory_allocated() - before
    held = delta - BLOCK  # the forward's scalar output takes one block
    reach(report.storages > 0)
    slack = (BLOCK - 1) * report.storages
    assert report.bytes <= held <= report.bytes + slack, (
        f"{refimpl_backend.name} compile at budget {budget} on CUDA: the meter reads "
        f"{report.bytes} bytes in {report.storages} storages, the allocator's delta less the "
        f"output is {held} (allowed [{report.bytes}, {report.bytes + slack}])\n{spec!r}")
    report.outputs.backward()
