"""The seed's assertions (test/distributed/_composable/test_checkpoint.py), in our own code.

Each test runs the same network with and without ``refimpl.checkpoint`` on some submodules and
compares gradients (bit for bit on CPU, where both runs execute the same kernels), the
activation memory the forward leaves for backward, and the checkpoint state afterwards.
"""

from __future__ import annotations

import copy
from collections import OrderedDict, deque

import pytest
import torch
from torch import nn

import refimpl
from refimpl.memory import measure_saved


class ToyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(100, 100)
        self.seq = nn.Sequential(nn.ReLU(), nn.Linear(100, 100), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.seq(self.l1(x))


class RandomModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.randn(100, 100))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(self.p, torch.randn(100, 100, device=self.p.device))
        return torch.matmul(x, y)


class MultiOutputModel(nn.Module):
    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn((100, 100), device=device))
        self.w2 = nn.Parameter(torch.randn((100, 100), device=device))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = nn.functional.relu(x @ self.w1) @ self.w2
        return z.sin(), z.cos()


class MultiInputModel(nn.Module):
    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn((100, 100), device=device))

    def forward(self, xs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        if len(xs) != 2:
            raise ValueError(f"xs: expected 2 tensors, got {len(xs)}")
        x, y = xs
        return nn.functional.relu((x + y) @ self.w)


def graph_size(out: torch.Tensor) -> int:
    """Number of autograd nodes reachable from ``out`` (counted per path, as the seed does)."""
    queue, count = deque([out.grad_fn]), 0
    while queue:
        fn = queue.pop()
        count += 1
        queue.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    return count


def assert_same_grads(net1: nn.Module, net2: nn.Module) -> None:
    pairs = list(zip(net1.named_parameters(), net2.named_parameters(), strict=True))
    assert pairs, "the networks have no parameters to compare"
    for (name1, p1), (name2, p2) in pairs:
        assert name1 == name2, "checkpoint renamed a parameter"
        assert p1.grad is not None and p2.grad is not None, f"{name1} got no gradient"
        assert torch.equal(p1.grad, p2.grad), f"gradient of {name1} differs"


def _active_cuda_bytes() -> int:
    return torch.cuda.memory_stats()["active_bytes.all.current"]


def _run_tensor_only(net: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """Forward+backward with and without ``checkpoint(net.seq)``; the figures the seed reads."""
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    net1, net2 = net, copy.deepcopy(net)
    refimpl.checkpoint(net2.seq)
    figures: dict[str, int] = {}
    for tag, model, inp in (("plain", net1, x1), ("ckpt", net2, x2)):
        before = _active_cuda_bytes() if x.is_cuda else 0
        report = measure_saved(lambda m, i: m(i).sum(), model, inp)
        figures[f"{tag}_cuda_delta"] = (_active_cuda_bytes() - before) if x.is_cuda else 0
        figures[f"{tag}_bytes"], figures[f"{tag}_storages"] = report.bytes, report.storages
        figures[f"{tag}_nodes"] = graph_size(report.outputs)
        report.outputs.backward()
    assert_same_grads(net1, net2)
    return figures


def test_tensor_only_cpu() -> None:
    torch.manual_seed(0)
    f = _run_tensor_only(ToyModel(), torch.randn(20, 100))
    # Unwrapped: seq's first ReLU output (saved by that ReLU and by the Linear after it) and
    # its last ReLU output: 2 distinct 20x100 fp32 storages (ReLU saves its result).
    assert (f["plain_bytes"], f["plain_storages"]) == (2 * 20 * 100 * 4, 2)
    # Checkpointed, seq keeps only its input, l1's output: one 20x100 fp32 storage.
    assert (f["ckpt_bytes"], f["ckpt_storages"]) == (20 * 100 * 4, 1)
    # The composable checkpoint works through saved-tensor hooks: the graph keeps its nodes
    # (the seed computes the node count but never compares it), what shrinks is what it holds.
    assert f["ckpt_nodes"] == f["plain_nodes"] > 0


@pytest.mark.cuda
def test_tensor_only_gpu() -> None:
    torch.manual_seed(0)
    f = _run_tensor_only(ToyModel().to("cuda:0"), torch.randn(20, 100, device="cuda:0"))
    assert f["ckpt_cuda_delta"] < f["plain_cuda_delta"]
    assert f["ckpt_bytes"] < f["plain_bytes"]


def test_random_cpu() -> None:
    torch.manual_seed(0)
    x1 = torch.randn(20, 100, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    net1 = RandomModel()
    net2 = copy.deepcopy(net1)
    rng = torch.get_rng_state()
    net1(x1).sum().backward()
    after_plain = torch.rand(3)
    torch.set_rng_state(rng)
    refimpl.checkpoint(net2)(x2).sum().backward()
    after_ckpt = torch.rand(3)
    assert_same_grads(net1, net2)
    assert torch.equal(x1.grad, x2.grad)
    # The recomputation restores the caller's RNG stream afterwards.
    assert torch.equal(after_plain, after_ckpt)


def test_multi_args() -> None:
    torch.manual_seed(0)
    device = torch.device("cpu")
    net1 = nn.Sequential(MultiOutputModel(device), MultiInputModel(device),
                         MultiOutputModel(device), MultiInputModel(device))
    net2 = copy.deepcopy(net1)
    refimpl.checkpoint(net2[0])
    refimpl.checkpoint(net2[2])
    x1 = torch.randn(20, 100, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    plain = measure_saved(lambda net, x: net(x).sum(), net1, x1)
    ckpt = measure_saved(lambda net, x: net(x).sum(), net2, x2)
    plain.outputs.backward()
    ckpt.outputs.backward()
    assert_same_grads(net1, net2)
    assert torch.equal(x1.grad, x2.grad)
    # Every model keeps 2 internal 20x100 fp32 storages when unwrapped (MultiOutput: relu's
    # result and z; MultiInput: x + y and relu's result). Checkpointed, a MultiOutputModel
    # keeps none: its inputs are x2 (an input) and net2[1]'s relu result (already saved).
    assert (plain.bytes, plain.storages) == (8 * 20 * 100 * 4, 8)
    assert (ckpt.bytes, ckpt.storages) == (4 * 20 * 100 * 4, 4)


class FailingModel(nn.Module):
    """Raises "foo" in the forward, or (``raise_in_recomp``) only when run a second time."""

    def __init__(self, raise_in_recomp: bool) -> None:
        super().__init__()
        self.fwd_count = 0
        self.raise_in_recomp = raise_in_recomp
        self.a = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.raise_in_recomp or self.fwd_count == 1:
            raise RuntimeError("foo")
        self.fwd_count += 1
        return self.a(x)


def test_clears_state_on_error_in_recomputation() -> None:
    m = FailingModel(raise_in_recomp=True)
    seq = nn.Sequential(OrderedDict({"m": m}))
    refimpl.checkpoint(seq.m)
    out = seq(torch.randn(1, 2)).sum()
    assert refimpl.checkpoint.state(m)._ac_generator is None
    with pytest.raises(RuntimeError, match="foo"):
        out.backward()
    state = refimpl.checkpoint.state(m)
    assert state._ac_generator is None
    assert state.enable_hook, "the recomputation left the module's hooks switched off"


def test_clears_state_on_error_in_forward() -> None:
    m = refimpl.checkpoint(FailingModel(raise_in_recomp=False))
    with pytest.raises(RuntimeError, match="foo"):
        m(torch.randn(1, 2))
    assert refimpl.checkpoint.state(m)._ac_generator is None
    # The dropping hooks were popped too: a plain op now saves its tensors for real.
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None
