"""Counting overhead of refimpl's FlopCounterMode against plain execution and against
torch's FlopCounterMode, measured in the same run.

Run: ``pytest benchmarks/bench_flops.py --benchmark-enable``. pytest-benchmark times the
refimpl counter; plain execution and torch's counter are timed alongside (median of the
same rounds, round-robin) and the ratios land in ``extra_info``:
``overhead_vs_plain`` (refimpl / plain), ``torch_overhead_vs_plain`` (torch / plain) and
``refimpl_vs_torch`` (refimpl / torch; target <= 1).
"""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from refimpl.flops.counter import FlopCounterMode
from refimpl.models import MODELS

ROUNDS = 7


def workload(name: str):
    """(model, input) for one forward+backward step."""
    torch.manual_seed(0)
    if name == "resnet18":
        return MODELS["resnet18"](), torch.randn(1, 3, 224, 224, requires_grad=True)
    return MODELS["transformer"](blocks=1), torch.randn(4, 128, 64, requires_grad=True)


def step(model, x) -> None:
    model(x).sum().backward()


def counted(counter_cls, model, x):
    def run() -> None:
        with counter_cls(display=False):
            step(model, x)

    return run


def interleaved_medians(fns: dict, rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each function, timed round-robin (one warm-up call each) so that
    load on a shared machine hits all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


@pytest.mark.parametrize("name", ["resnet18", "transformer_block"])
def test_counting_overhead(benchmark, name):
    from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounterMode

    model, x = workload(name)
    medians = interleaved_medians({"plain": lambda: step(model, x),
                                   "torch": counted(TorchFlopCounterMode, model, x),
                                   "refimpl": counted(FlopCounterMode, model, x)})
    plain, theirs, ours = medians["plain"], medians["torch"], medians["refimpl"]
    benchmark.pedantic(counted(FlopCounterMode, model, x), rounds=ROUNDS, warmup_rounds=1)
    benchmark.extra_info.update({
        "plain_s": round(plain, 5), "refimpl_s": round(ours, 5), "torch_s": round(theirs, 5),
        "overhead_vs_plain": round(ours / plain, 3),
        "torch_overhead_vs_plain": round(theirs / plain, 3),
        "refimpl_vs_torch": round(ours / theirs, 3),
    })


def inference_step(model, x) -> None:
    with torch.inference_mode():
        model(x)


@pytest.mark.parametrize("layers", [2])
def test_fused_inference_counting_overhead(benchmark, layers):
    """nn.TransformerEncoder under inference_mode: the fused path, now counted (issue 10),
    with the uncounted-op bookkeeping on every op that has no formula."""
    from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounterMode

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    x = torch.randn(8, 128, 256)

    def under(counter_cls):
        def run() -> None:
            with counter_cls(display=False):
                inference_step(model, x)
        return run

    medians = interleaved_medians({"plain": lambda: inference_step(model, x),
                                   "torch": under(TorchFlopCounterMode),
                                   "refimpl": under(FlopCounterMode)})
    plain, theirs, ours = medians["plain"], medians["torch"], medians["refimpl"]
    benchmark.pedantic(under(FlopCounterMode), rounds=ROUNDS, warmup_rounds=1)
    benchmark.extra_info.update({
        "plain_s": round(plain, 5), "refimpl_s": round(ours, 5), "torch_s": round(theirs, 5),
        "overhead_vs_plain": round(ours / plain, 3), "refimpl_vs_torch": round(ours / theirs, 3),
    })
