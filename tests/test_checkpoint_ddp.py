"""The checkpoint wrapper under DistributedDataParallel: 2 gloo processes on CPU.

Each rank trains the same model on its own shard twice, once plain and once with checkpointed
blocks, both wrapped in DDP; after the all-reduce the gradients must be equal bit for bit
(the same kernels run on the same data in both), and equal across ranks.
"""

from __future__ import annotations

import copy
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

WORLD_SIZE = 2


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Sequential(nn.Linear(32, 32), nn.GELU(),
                                                          nn.Dropout(0.1)),
                         nn.Sequential(nn.Linear(32, 32), nn.ReLU()), nn.Linear(32, 4))


def _grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    torch.manual_seed(1234)  # same dropout masks in both runs
    model(x).square().mean().backward()
    return [p.grad.clone() for p in model.parameters()]


def _worker(rank: int, port: int, results: dict) -> None:
    import refimpl

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD_SIZE)
    try:
        torch.set_num_threads(1)
        plain = _model()
        ckpt = copy.deepcopy(plain)
        refimpl.checkpoint(ckpt[1])
        refimpl.checkpoint(ckpt[2])
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
        g_plain = _grads(DistributedDataParallel(plain), x)
        g_ckpt = _grads(DistributedDataParallel(ckpt), x)
        gathered = [None] * WORLD_SIZE
        dist.all_gather_object(gathered, [g.sum().item() for g in g_ckpt])
        results[rank] = {
            "equal": all(torch.equal(a, b) for a, b in zip(g_plain, g_ckpt)),
            "same_across_ranks": gathered[0] == gathered[1],
            "generator_cleared": refimpl.checkpoint.state(ckpt[1])._ac_generator is None,
        }
    finally:
        dist.destroy_process_group()


@pytest.mark.distributed
def test_checkpoint_under_ddp_gloo() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with the gloo backend is not available in this build")
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_worker, args=(_free_port(), results), nprocs=WORLD_SIZE, join=True)
        results = dict(results)
    assert sorted(results) == [0, 1]
    for rank, r in results.items():
        assert r == {"equal": True, "same_across_ranks": True, "generator_cleared": True}, rank
