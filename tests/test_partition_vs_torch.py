"""Never worse than torch: refimpl recomputes no more than torch's partitioner where torch's
plan fits refimpl's bound, measured with the meter and the FLOP counter; and docs/findings.md
Partitioner 3 (torch recomputes four times the FLOPs at equal saved bytes) and the smallest
program of Partitioner 2 (torch keeps a one-op program's budget-1.0 bytes at 0.5) pinned."""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config as fconfig

import refimpl
from refimpl.partition.api import explain_many


def summary(x, w1, w2, w3):
    """Row statistics of two matmuls (a sum, an amax) and a matmul used whole."""
    s1, s2 = (x @ w1).sum(1), (x @ w2).amax(1)
    return (s1.cos() * s2.sin()).sum() + (x @ w3).cos().sum()


def inputs():
    torch.manual_seed(0)
    return [torch.randn(s, requires_grad=True) for s in [(64, 64), (64, 512), (64, 256),
                                                           (64, 64)]]


def measured(fn, args) -> tuple[int, int]:
    """(bytes held for backward, backward FLOPs) of one step of ``fn``."""
    fn(*args).backward()
    report = refimpl.measure_saved(lambda: fn(*args))
    with refimpl.FlopCounterMode(display=False) as counter:
        report.outputs.backward()
    return report.bytes, counter.get_total_flops()


def torch_step(budget: float, args) -> tuple[int, int]:
    torch._dynamo.reset()
    with fconfig.patch(activation_memory_budget=budget):
        return measured(torch.compile(summary, backend="aot_eager_decomp_partition"), args)


@pytest.mark.parametrize("budget", [0.1, 0.6, 0.9])
def test_refimpl_never_recomputes_more_than_torch_within_its_bound(budget):
    args = inputs()
    eager = measured(summary, args)[1]
    plan, = explain_many(summary, *args, memory_budgets=[budget])
    ours = measured(refimpl.compile(summary, memory_budget=budget), args)
    assert ours[0] == plan.saved_bytes <= plan.bound_bytes
    theirs = torch_step(budget, args)
    if theirs[0] <= plan.bound_bytes:
        assert ours[1] - eager <= theirs[1] - eager, (ours, theirs)


@pytest.mark.torch_releases("2.13", "2.14")
def test_finding_torch_recomputes_more_at_equal_bytes():
    """docs/findings.md Partitioner 3: at budget 0.6 both save 16896 bytes; torch recomputes
    the 64x256 matmul (2.10 MFLOP), refimpl only the 64x64 one (0.52 MFLOP): it saves the
    amax's boolean mask (16 KiB) instead of the matmul that feeds the whole-tensor cosine."""
    args = inputs()
    eager = measured(summary, args)[1]
    ours = measured(refimpl.compile(summary, memory_budget=0.6), args)
    theirs = torch_step(0.6, args)
    assert ours[0] == theirs[0] == 16896
    assert (ours[1] - eager, theirs[1] - eager) == (2 * 64 * 64 * 64, 2 * 64 * 64 * 256)


def sliced(x, w):
    """A one-column slice of a matmul: the slice's backward scatters into a fresh ``full``
    (a factory, reading no tensor) that only the backward reads."""
    return (x @ w)[:, :1].cos().sum()


def row_max(x, w):
    """amax's backward divides by the count of ties, ``sum(eq)``, which only it reads."""
    return (x @ w).amax(1, keepdim=True).cos().sum()


@pytest.mark.parametrize(("fn", "torch_bytes", "saved"), [
    (sliced, 8, ("sin",)),
    (row_max, 20, ("amax", "eq")),
])
def test_backward_only_nodes_are_not_banned_at_budget_one(fn, torch_bytes, saved):
    """At budget 1.0 a forward-side node the forward outputs never read runs once in any
    plan, so refimpl does not ban it from the backward (torch's rule too): refimpl used to
    save the slice backward's 48-byte ``full`` (56 bytes in all) and amax's 16-byte tie
    count (36 in all). ``torch_bytes`` is torch 2.13.0's figure, measured by
    ``refimpl.measure_saved(torch.compile(fn, backend="aot_eager_decomp_partition"),
    x, w)`` on these inputs, after ``torch._dynamo.reset()``."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, requires_grad=True), torch.randn(3, 6, requires_grad=True)
    torch._dynamo.reset()
    plan = refimpl.explain(fn, x, w, memory_budget=1.0)
    torch._dynamo.reset()
    ours = refimpl.measure_saved(refimpl.compile(fn, memory_budget=1.0), x, w).bytes
    assert (ours, plan.saved) == (torch_bytes, saved)


def one_reduction_bytes(budget: float, backend: str) -> int:
    """Bytes ``amax`` of a 4 x 4 input keeps for backward, compiled by ``backend`` at
    ``budget``."""
    x = (torch.rand(4, 4, generator=torch.Generator().manual_seed(0)) + 0.5).requires_grad_()
    torch._dynamo.reset()
    with fconfig.patch(activation_memory_budget=budget):
        fn = torch.compile(lambda t: t.amax(), backend=backend)
        return refimpl.saved_activation_bytes(lambda: fn(x))


def test_finding_torch_keeps_a_one_op_programs_budget_one_bytes_at_half():
    """docs/findings.md Partitioner 2, its smallest program (found by the GPU check's inductor
    fuzz as ``test_partition_one_op_program``): torch keeps 0 bytes at budget 0.0 and the
    16-byte mask ``x == amax(x)`` at 1.0, and at 0.5 still all 16, over the bound
    ``0 + 0.5 x 16``; refimpl's plan at 0.5 keeps none (its budget-1.0 plan keeps the 4-byte
    amax and recomputes the mask)."""
    torch_bytes = [one_reduction_bytes(b, "aot_eager_decomp_partition") for b in (0.0, 0.5, 1.0)]
    refimpl_bytes = [one_reduction_bytes(b, "refimpl") for b in (0.0, 0.5, 1.0)]
    assert torch_bytes == [0, 16, 16]
    assert refimpl_bytes == [0, 0, 4]
