"""The ``profile`` runtime estimator gives torch's plan on a busy machine (issue 18).

The seed's ``test_profile`` failed once under load: timed separately, five identical matmuls
got five different times, and the noise ranked them apart. The estimator now times each
distinct call once (op, argument shapes, strides, dtypes, devices) and shares the figure, so
identical work costs the same however busy the machine is.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl.partition.cost import call_signature, runtime_estimator
from tests.test_partition_seed import chain, mem_and_flops, rand

BUSY_LOOP = "while True: pass"


def two_matmuls_and_a_third(x, w, v):
    return torch.mm(x, w), torch.mm(x, w), torch.mm(x, v)


def test_identical_calls_share_one_timing():
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    gm = make_fx(two_matmuls_and_a_third, tracing_mode="fake")(x, w, torch.randn(64, 32))
    mms = [n for n in gm.graph.nodes if n.target == torch.ops.aten.mm.default]
    assert call_signature(mms[0]) == call_signature(mms[1]) != call_signature(mms[2])
    estimate = runtime_estimator("profile", repeats=3)
    first, second, other = (estimate(n) for n in mms)
    assert first == second > 0 and other > 0


@pytest.fixture
def busy_machine():
    """One busy-looping process per core for the test's duration."""
    burners = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
               for _ in range(torch.get_num_threads())]
    yield
    for proc in burners:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("attempt", range(3))
def test_seed_profile_plan_on_a_busy_machine(busy_machine, attempt):
    """The seed's test_profile figures (2 blocks saved, 3 block matmuls recomputed), with
    every core loaded by another process."""
    unit = 256
    x, ws = rand(unit, unit, device="cpu"), [rand(unit, unit, device="cpu") for _ in range(5)]
    call = lambda: chain(x, ws)
    _, eager_flops = mem_and_flops(call, unit, "cpu")
    assert mem_and_flops(call, unit, "cpu", 0.2, estimator="profile") == (2, eager_flops + 3)
