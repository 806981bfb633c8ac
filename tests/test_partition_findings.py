"""The partitioner findings of docs/findings.md, pinned: refimpl's answer, and torch's
behaviour as a strict xfail (an XPASS means torch fixed it: update the docs)."""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config as fconfig

import refimpl.partition.backend  # noqa: F401  (registers backend "refimpl" if needed)


def times_fresh_noise(x):
    return x * torch.rand_like(x)


def gradient_is_the_forwards_draw(backend: str) -> bool:
    x = torch.randn(6, requires_grad=True)
    torch._dynamo.reset()
    with fconfig.patch(activation_memory_budget=0.0):
        y = torch.compile(times_fresh_noise, backend=backend)(x)
        y.sum().backward()
    return torch.allclose(x.grad, y.detach() / x.detach())  # d(x * r)/dx = r = y / x


def test_refimpl_keeps_the_forwards_random_draw():
    assert gradient_is_the_forwards_draw("refimpl")


@pytest.mark.xfail(strict=True, reason="docs/findings.md Partitioner 1: torch redraws")
def test_torch_keeps_the_forwards_random_draw():
    assert gradient_is_the_forwards_draw("aot_eager_decomp_partition")
