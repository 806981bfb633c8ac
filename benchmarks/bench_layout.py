"""The layout pass on a ResNet basic-block stack, CPU, inference and training.

Both variants are compiled the same way (dynamo -> AOTAutograd -> eager kernels); the only
difference is whether ``refimpl.layout.optimize_layout`` ran on the dynamo graph. They are
timed interleaved in the same run, on one intra-op thread (the CPU is shared: alternating
evens out the noise); ``extra_info`` carries both best times and ``speedup_min`` /
``speedup_median`` = contiguous / with-pass (> 1: the pass is faster). pytest-benchmark's
own table times the with-pass variant.

    python -m pytest benchmarks/bench_layout.py --benchmark-enable --benchmark-only
"""

from __future__ import annotations

import statistics
import time

import pytest
import torch
from torch import nn

from refimpl.expect.layout import make_layout_backend
from refimpl.layout import META_KEY, optimize_layout
from refimpl.models import BasicBlock

BLOCKS, BATCH, SIZE, ROUNDS = 3, 8, 28, 12


def compiled_stack(width: int, with_pass: bool, train: bool):
    torch.manual_seed(0)
    stack = nn.Sequential(*[BasicBlock(width, width) for _ in range(BLOCKS)]).train(train)
    seen = []

    def layout(gm, example_inputs):
        gm = optimize_layout(gm, example_inputs) if with_pass else gm
        seen.append(gm.meta.get(META_KEY))
        return gm

    return torch.compile(stack, backend=make_layout_backend(layout)), seen


def step_fn(model, x, train: bool):
    def step():
        if train:
            model(x).sum().backward()
        else:
            with torch.no_grad():
                model(x)
    return step


def interleaved_times(steps: dict, rounds: int) -> dict:
    """Seconds per call of each step, timed in alternation (the order flips every round, so
    neither variant always runs first) after one warm-up each."""
    for step in steps.values():
        step()
    times = {name: [] for name in steps}
    for index in range(rounds):
        order = list(steps) if index % 2 == 0 else list(reversed(steps))
        for name in order:
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    return times


@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared 2-core machine this keeps the two variants from
    fighting other jobs for the same cores in different ways."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("width", [64, 128])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_basic_block_stack(benchmark, one_thread, mode, width):
    train = mode == "training"
    x = torch.randn(BATCH, width, SIZE, SIZE)
    torch._dynamo.reset()
    plain, _ = compiled_stack(width, False, train)
    layout, seen = compiled_stack(width, True, train)
    steps = {"contiguous": step_fn(plain, x, train), "with_pass": step_fn(layout, x, train)}
    times = interleaved_times(steps, ROUNDS)
    best = {name: min(t) for name, t in times.items()}
    middle = {name: statistics.median(t) for name, t in times.items()}
    decision = next(r.decision for r in seen if r is not None and r.decision.convs)
    benchmark.extra_info.update(
        contiguous_ms=round(best["contiguous"] * 1e3, 2),
        with_pass_ms=round(best["with_pass"] * 1e3, 2),
        speedup_min=round(best["contiguous"] / best["with_pass"], 3),
        speedup_median=round(middle["contiguous"] / middle["with_pass"], 3),
        channels_last=decision.channels_last, reason=decision.reason)
    benchmark.pedantic(steps["with_pass"], rounds=5, iterations=1, warmup_rounds=1)
