"""User checkpoint regions and selective-checkpoint policies inside a compiled function.

torch records them in the joint graph's node meta (``recompute``: a ``CheckpointPolicy``;
``ac_graph_id``: the region) and its partitioner honours them at every budget: a node marked
recompute is never saved, one marked ``MUST_SAVE`` never recomputed, and the value between two
consecutive regions is saved (``cleanup_recompute_tags``). The seed-style test is PyTorch's
upstream ``test_ac.py::test_manual_ac``, measured on CPU with refimpl's meter and FLOP
counter: compiled at budget 0.01 it keeps eager's saved bytes and backward FLOPs.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

import refimpl
from refimpl.partition.api import explain_many

MiB = 2**20


def four_matmuls(x):
    a = torch.matmul(x, x.T)
    a = torch.matmul(a, a)
    a = torch.matmul(a, a)
    return torch.matmul(a, x)


def checkpointed_twice(x):
    x = checkpoint(four_matmuls, x, use_reentrant=False)
    return checkpoint(four_matmuls, x, use_reentrant=False)


def saved_and_backward_flops(fn, x) -> tuple[int, int]:
    """(bytes held for backward by one forward, FLOPs of its backward)."""
    fn(x).sum().backward()  # compile outside the measurement
    report = refimpl.measure_saved(lambda: fn(x).sum())
    with refimpl.FlopCounterMode(display=False) as counter:
        report.outputs.backward()
    return report.bytes, counter.get_total_flops()


@pytest.fixture
def x():
    torch.manual_seed(0)
    return torch.randn(64, 1024, requires_grad=True)


def test_manual_ac_keeps_eager_bytes_and_flops(x):
    eager = saved_and_backward_flops(checkpointed_twice, x)
    assert eager[0] == MiB // 4  # the first region's output, the second region's input
    compiled = refimpl.compile(checkpointed_twice, memory_budget=0.01)
    assert saved_and_backward_flops(compiled, x) == eager


@pytest.mark.parametrize("solver", ["exact", "dp", "greedy", "ilp"])
def test_regions_are_honoured_at_every_budget(x, solver):
    budgets = [0.0, 0.01, 0.5, 1.0]
    for plan in explain_many(checkpointed_twice, x, memory_budgets=budgets, solver=solver):
        assert plan.saved_bytes == MiB // 4, plan.summary()  # one storage: the boundary


def policy_save_matmuls(ctx, op, *args, **kwargs):
    if op in (torch.ops.aten.mm.default, torch.ops.aten.matmul.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def selective(x, w1, w2):
    context = functools.partial(create_selective_checkpoint_contexts, policy_save_matmuls)
    return checkpoint(lambda a: torch.mm(torch.mm(a, w1).cos(), w2).sin(), x,
                      use_reentrant=False, context_fn=context).sum()


def test_selective_policy_saves_the_matmuls_at_every_budget():
    torch.manual_seed(0)
    args = [torch.randn(16, 16, requires_grad=True) for _ in range(3)]
    plans = explain_many(selective, *args, memory_budgets=[0.0, 0.3, 1.0])
    for plan in plans:
        assert plan.recompute_cost == 0, plan.summary()  # matmuls are saved, never redone
        assert plan.saved_bytes == 2 * 16 * 16 * 4, plan.summary()  # both mm outputs only
        assert all(not name.startswith("mm") for name in plan.recomputed)
    out = refimpl.compile(selective, memory_budget=0.0)(*args)
    out.backward()
    expected = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    selective(*args).backward()
    for a, e in zip(args, expected):
        torch.testing.assert_close(a.grad, e)
