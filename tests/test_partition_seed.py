"""The seed's memory-budget numbers (torch test/functorch/test_ac.py), in our own code.

Every compiled run goes through ``torch.compile(f, backend="refimpl")`` under
``torch._functorch.config.patch(activation_memory_budget=...)``, exactly as the seed drives
``aot_eager_decomp_partition``. Memory is read with refimpl's meter on CPU
(``saved_activation_bytes``) and with the CUDA allocator (``requested_bytes.all.current``)
in the cuda-marked variants; backward FLOPs with ``refimpl.FlopCounterMode``.

Units. The seed's unit is a 512 x 512 float32 block: 1 MiB, and ``2 x 512^3`` FLOPs for a
block matmul. Every number it asserts is a ratio in that unit: memory scales with the block
area and FLOPs with its volume (for attention too: 4 L^2 E scales as the cube). So the CPU
tests use a smaller block, ``UNIT`` (``ATTN_UNIT`` for attention, whose logsumexp, L floats,
must stay below the seed's 0.1-block rounding: S / UNIT blocks), and assert the seed's
numbers in block units; the cuda variants use the seed's 512.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch._functorch.config as fconfig

import refimpl.partition.backend  # noqa: F401  (registers backend "refimpl" if needed)
from refimpl import FlopCounterMode, saved_activation_bytes

UNIT = 64
ATTN_UNIT = 128
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def unit_for(device: str, cpu_unit: int = UNIT) -> int:
    return 512 if device == "cuda" else cpu_unit


def _act_mem(f, unit: int, device: str) -> float:
    """Blocks held for backward after a forward (the seed's get_act_mem), 1 decimal."""
    f().backward()
    if device == "cuda":
        torch.cuda.synchronize()
        start = torch.cuda.memory_stats()["requested_bytes.all.current"]
        out = f()
        held = torch.cuda.memory_stats()["requested_bytes.all.current"] - start
        out.backward()
    else:
        held = saved_activation_bytes(f)
    return round(held / (unit * unit * 4), 1)


def _bw_flops(f, unit: int) -> float:
    """Backward FLOPs in block matmuls (the seed's get_bw_flops)."""
    f().backward()
    out = f()
    with FlopCounterMode(display=False) as mode:
        out.backward()
    return mode.get_total_flops() / (2 * unit**3)


def mem_and_flops(call, unit: int, device: str, budget: float | None = None,
                  estimator: str = "flops") -> tuple[float, float]:
    """(blocks saved, backward block-FLOPs), eager if ``budget`` is None else compiled."""
    torch._dynamo.reset()
    with fconfig.patch(activation_memory_budget=1.0 if budget is None else budget,
                       activation_memory_budget_runtime_estimator=estimator):
        f = call if budget is None else torch.compile(call, backend="refimpl")
        return _act_mem(f, unit, device), _bw_flops(f, unit)


def rand(*shape: int, device: str) -> torch.Tensor:
    return torch.randn(*shape, device=device, requires_grad=True)


def block_pair(b_i: int, o: int, unit: int, device: str):
    """x: (B_I u, B_I u), w: (B_I u, O u): mm out is B_I*O blocks, B_I^2*O block-FLOPs."""
    return rand(b_i * unit, b_i * unit, device=device), rand(b_i * unit, o * unit, device=device)


def chain(x, ws):
    x = x.cos()
    for w in ws:
        x = torch.mm(x, w).cos()
    return x.sum()


def fanout(xs, ws):
    return sum(torch.mm(x, w).cos().sum() for x, w in zip(xs, ws))


@pytest.mark.parametrize("device", DEVICES)
def test_rematerializes_cheap(device):
    u = unit_for(device)
    x, w = rand(u, u, device=device), rand(u, u, device=device)
    call = lambda: torch.mm(x.cos(), w).sum()
    eager_mem, eager_flops = mem_and_flops(call, u, device)
    assert eager_mem == 1.0
    assert mem_and_flops(call, u, device, 1.0) == (1.0, eager_flops)
    assert mem_and_flops(call, u, device, 0.5) == (0.0, eager_flops)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_even_chain(device):
    u = unit_for(device)
    x, ws = rand(u, u, device=device), [rand(u, u, device=device) for _ in range(5)]
    call = lambda: chain(x, ws)
    eager_mem, eager_flops = mem_and_flops(call, u, device)
    assert eager_mem == 10.0
    for budget in range(11):
        mem, flops = mem_and_flops(call, u, device, budget / 10)
        if budget <= 5:  # save `budget` matmul outputs, recompute the other matmuls
            assert (mem, flops) == (budget, eager_flops + 5 - budget), budget
        elif budget < 10:  # save all five matmul outputs, recompute only the cosines
            assert (mem, flops) == (5.0, eager_flops), budget
        else:
            assert (mem, flops) == (10.0, eager_flops), budget


def uneven_configs() -> list[tuple[list[int], list[int]]]:
    """The seed's two fixed configs and its seeded random one (random.seed(0))."""
    configs = [([11, 3, 4, 2], [18, 17, 16, 15, 14, 13, 11, 7, 6, 5]),
               ([3, 5, 11, 17, 14], [42, 30, 19, 8, 3])]
    rng = random.Random(0)
    arr = [rng.randint(0, 50) for _ in range(10)]
    sums = []
    for i in range(10):
        rng.shuffle(arr)
        sums.append(sum(arr[:i]))
    configs.append((arr, sums))
    return configs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("config", range(3))
def test_matmul_uneven_chain(device, config):
    u = unit_for(device)
    shapes, exact = uneven_configs()[config]
    x = rand(u, u, device=device)
    ws = [rand(u, d * u, device=device) for d in shapes]
    call = lambda: fanout([x] * len(ws), ws)
    total = sum(shapes)
    assert mem_and_flops(call, u, device)[0] == total
    for achieved in exact:
        assert mem_and_flops(call, u, device, achieved / total)[0] == achieved, achieved


def test_uneven_chain_random_config_is_the_seeds():
    """The third config equals what the seed draws with the module-level ``random`` after
    ``random.seed(0)`` (our private ``random.Random(0)`` must give the same stream)."""
    state = random.getstate()
    try:
        random.seed(0)
        arr = [random.randint(0, 50) for _ in range(10)]
        sums = []
        for i in range(10):
            random.shuffle(arr)
            sums.append(sum(arr[:i]))
    finally:
        random.setstate(state)
    assert uneven_configs()[2] == (arr, sums)


@pytest.mark.parametrize("device", DEVICES)
def test_prioritize_cheaper_matmul(device):
    u = unit_for(device)
    (x1, w1), (x2, w2) = block_pair(1, 4, u, device), block_pair(2, 2, u, device)
    call = lambda: fanout([x1, x2], [w1, w2])
    eager_mem, eager_flops = mem_and_flops(call, u, device)
    assert (eager_mem, eager_flops) == (8, 24)
    mem, flops = mem_and_flops(call, u, device, 0.5)
    assert (mem, flops) == (4, eager_flops + 4)


@pytest.mark.parametrize("device", DEVICES)
def test_profile(device):
    # timing needs blocks large enough that a matmul clearly outweighs a cosine: 256 on CPU
    u = unit_for(device, cpu_unit=256)
    x, ws = rand(u, u, device=device), [rand(u, u, device=device) for _ in range(5)]
    call = lambda: chain(x, ws)
    _, eager_flops = mem_and_flops(call, u, device)
    mem, flops = mem_and_flops(call, u, device, 0.2, estimator="profile")
    assert (mem, flops) == (2, eager_flops + 3)


@pytest.mark.parametrize("device", DEVICES)
def test_prioritize_cheaper_matmul2(device):
    u = unit_for(device)
    pairs = [block_pair(a, b, u, device) for a, b in [(4, 4), (6, 2), (2, 6)]]
    xs, ws = zip(*pairs)
    call = lambda: fanout(xs, ws)
    eager_mem, eager_flops = mem_and_flops(call, u, device)
    assert (eager_mem, eager_flops) == (40, 320)
    mem, flops = mem_and_flops(call, u, device, 28 / eager_mem)
    assert (mem, flops - eager_flops) == (28, 2 * 2 * 6)
    mem, flops = mem_and_flops(call, u, device, 16 / eager_mem)
    assert (mem, flops - eager_flops) == (12, 2 * 2 * 6 + 4 * 4 * 4)


def attention_then_linear(x, w):
    shape = x.shape
    x = x.reshape(1, 1, *shape)
    x = torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=False)
    return torch.mm(x.reshape(*shape), w).cos().sum()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("s", "d", "expected"), [
    (1, 1, "mm"), (1, 3, "attn"), (2, 2, "mm"), (2, 1, "mm"), (2, 5, "attn"), (4, 7, "mm"),
    (4, 9, "attn")])
def test_attention_vs_linear(device, s, d, expected):
    """Attention costs 2 S^2 D blocks, the matmul S D^2: recompute the cheaper (2S vs D)."""
    u = unit_for(device, cpu_unit=ATTN_UNIT)
    x, w = rand(s * u, d * u, device=device), rand(d * u, d * u, device=device)
    call = lambda: attention_then_linear(x, w)
    with FlopCounterMode(display=False) as mode:
        call()
    mm_flops = mode.get_flop_counts()["Global"][torch.ops.aten.mm] / (2 * u**3)
    attn_flops = mode.get_total_flops() / (2 * u**3) - mm_flops
    assert (mm_flops, attn_flops) == (s * d * d, 2 * s * s * d)
    eager_mem, eager_flops = mem_and_flops(call, u, device)
    assert eager_mem == s * d * 2
    mem, flops = mem_and_flops(call, u, device, 0.6)  # room for one of the two
    assert mem == s * d
    assert flops - eager_flops == (attn_flops if expected == "attn" else mm_flops)
