"""The ``torch`` target judges torch's partitioner by torch's plan at each budget.

dynamo caches compiled graphs per code object and does not guard on
``activation_memory_budget``: compiling one function again at another budget used to reuse
the first compile's plan, and past the recompile limit (8) ran eagerly. The target then
reported torch's budget-1.0 plan at budget 0.0, a false verdict against torch. The expected
bytes here come from torch alone: a compile right after ``torch._dynamo.reset()``.
"""

from __future__ import annotations

import torch
import torch._functorch.config as fconfig

from refimpl.memory import saved_activation_bytes
from refimpl.oracle import load_backend

SWEEP = [1.0, 0.0] * 6  # twelve compiles of one function: past dynamo's limit of eight


def issue13(x, w1, w2):
    s1 = (x @ w1).sum(1)
    return s1.cos().sum() + (x @ w2).cos().sum()


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(64, n, requires_grad=True) for n in (64, 256, 64)]


def _fresh_torch_bytes(budget: float, args) -> int:
    torch._dynamo.reset()
    with fconfig.patch(activation_memory_budget=budget):
        compiled = torch.compile(issue13, backend="aot_eager_decomp_partition")
        return saved_activation_bytes(compiled, *args)


def test_each_compile_of_one_function_gets_torchs_plan_at_its_budget():
    args = _inputs()
    expected = {b: _fresh_torch_bytes(b, args) for b in (0.0, 1.0)}
    assert expected[0.0] < expected[1.0], expected  # the sweep below can tell them apart
    torch._dynamo.reset()
    compile_fn = load_backend("torch").compile
    observed = [saved_activation_bytes(compile_fn(issue13, memory_budget=b), *args)
                for b in SWEEP]
    assert observed == [expected[b] for b in SWEEP], (
        f"expected {[expected[b] for b in SWEEP]}, observed {observed}")
