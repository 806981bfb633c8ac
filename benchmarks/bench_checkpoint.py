"""refimpl's checkpoint against torch's composable checkpoint, measured in the same run.

Workloads: a 24-layer MLP (``refimpl.models.mlp``, each Linear+ReLU pair one checkpointed
layer) and a 12-block transformer (``refimpl.models.transformer``, each block checkpointed).
For each, the same weights are wrapped three ways: plain, ``refimpl.checkpoint`` and
``torch.distributed._composable.checkpoint``.

Run: ``pytest benchmarks/bench_checkpoint.py --benchmark-enable``. pytest-benchmark times the
refimpl step (forward + backward); the three variants are also timed interleaved, round by
round (in rotating order, with one intra-op thread), and ``extra_info`` carries:

* ``bytes_plain``, ``bytes_refimpl``, ``bytes_torch``: saved activation bytes
  (``refimpl.memory.saved_activation_bytes``) and ``bytes_ratio`` = refimpl / torch
  (target <= 1);
* ``refimpl_s``, ``torch_s``, ``plain_s``: fastest step seconds over interleaved rounds
  and ``time_ratio`` = refimpl / torch (target <= 1.05).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import pytest
import torch
from torch import nn

import refimpl
from refimpl.memory import saved_activation_bytes
from refimpl.models import mlp, transformer

ROUNDS = 20


def workload(name: str) -> tuple[nn.Sequential, torch.Tensor]:
    """(model as a Sequential of layers to checkpoint, input)."""
    torch.manual_seed(0)
    if name == "mlp24":
        flat = mlp(layers=24, dim=256)
        layers = nn.Sequential(*(nn.Sequential(flat[i], flat[i + 1])
                                 for i in range(0, len(flat), 2)))
        return layers, torch.randn(64, 256, requires_grad=True)
    return transformer(blocks=12, dim=64, heads=4), torch.randn(4, 64, 64, requires_grad=True)


def variants(name: str) -> tuple[dict[str, nn.Module], torch.Tensor]:
    from torch.distributed._composable import checkpoint as torch_checkpoint

    model, x = workload(name)
    out = {"plain": model, "refimpl": copy.deepcopy(model), "torch": copy.deepcopy(model)}
    for layer in out["refimpl"]:
        refimpl.checkpoint(layer)
    for layer in out["torch"]:
        torch_checkpoint(layer)
    return out, x


def stepper(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)
        x.grad = None

    return step


def interleaved_fastest(steps: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Fastest round's seconds per variant, the variants alternating each round.

    On a shared CPU the fastest round is the one least disturbed by other load; alternating
    the variants exposes them to the same load pattern.
    """
    samples: dict[str, list[float]] = {k: [] for k in steps}
    order = list(steps)
    for fn in steps.values():
        fn()  # warm-up
    for r in range(rounds):
        for key in order[r % len(order):] + order[:r % len(order)]:  # rotate who goes first
            start = time.perf_counter()
            steps[key]()
            samples[key].append(time.perf_counter() - start)
    return {k: min(v) for k, v in samples.items()}


@pytest.fixture
def one_thread():
    """One intra-op thread while timing: on a shared 2-core machine, multi-threaded kernels
    make every variant's time mostly a measure of the other processes' load."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", ["mlp24", "transformer12"])
def test_checkpoint_step(benchmark, one_thread, name: str) -> None:
    models, x = variants(name)
    saved = {k: saved_activation_bytes(lambda m, i: m(i).sum(), m, x) for k, m in models.items()}
    seconds = interleaved_fastest({k: stepper(m, x) for k, m in models.items()}, ROUNDS)
    benchmark.pedantic(stepper(models["refimpl"], x), rounds=ROUNDS, warmup_rounds=1)
    benchmark.extra_info.update({
        **{f"bytes_{k}": v for k, v in saved.items()},
        "bytes_ratio": round(saved["refimpl"] / saved["torch"], 4),
        **{f"{k}_s": round(v, 5) for k, v in seconds.items()},
        "time_ratio": round(seconds["refimpl"] / seconds["torch"], 4),
    })
