"""Properties of the backend under test's ``checkpoint(module)`` on a CUDA device, where the
device changes the answer: dropout draws from the CUDA generator (whose state the
recomputation must restore), and CUDA autocast runs in float16 or bfloat16.

Every expectation is the unwrapped model run eagerly on the same device, under the same CUDA
seed and the same autocast; never the checkpoint under test.

* Output and gradients of parameters and input equal the unwrapped model's bit for bit on
  CUDA, and the CUDA generator's state after the step is the unwrapped run's.
* The same under ``torch.autocast("cuda", dtype)`` for dtype in {float16, bfloat16}.

Without a CUDA device every property skips, visibly, with the reason (the ``cuda`` marker).

Reach (each example): the stack holds a dropout layer, so the CUDA generator matters.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from refimpl.expect.checkpoint import loss, wrapped
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.modules import ModuleStack, module_stacks

pytestmark = pytest.mark.cuda


@dataclass
class CudaStep:
    """One forward+backward on CUDA: loss, gradients in parameter order, input grad, and the
    CUDA generator's state after."""

    out: torch.Tensor
    grads: list[torch.Tensor | None]
    input_grad: torch.Tensor | None
    rng_after: torch.Tensor


def cuda_step(model: nn.Module, x: torch.Tensor, dtype: torch.dtype | None) -> CudaStep:
    """``model`` moved to CUDA, run once under CUDA seed 7 (the same dropout masks in every
    run), under CUDA autocast of ``dtype`` when given."""
    model = model.cuda()
    x = x.detach().cuda().requires_grad_()
    torch.cuda.manual_seed(7)
    ctx = torch.autocast("cuda", dtype=dtype) if dtype else contextlib.nullcontext()
    with ctx:
        out = loss(model, x)
    out.backward()
    grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    return CudaStep(out.detach(), grads, x.grad, torch.cuda.get_rng_state())


def assert_same_cuda_step(want: CudaStep, got: CudaStep, what: str) -> None:
    """Output, every gradient and the input gradient are equal bit for bit."""
    assert torch.equal(want.out, got.out), f"{what}: output {got.out}, expected {want.out}"
    assert len(want.grads) == len(got.grads), f"{what}: parameter count differs"
    for i, (a, b) in enumerate(zip(want.grads, got.grads)):
        assert (a is None) == (b is None), f"{what}: gradient {i}: expected {a}, got {b}"
        assert a is None or torch.equal(a, b), f"{what}: gradient {i} differs"
    assert torch.equal(want.input_grad, got.input_grad), f"{what}: input gradient differs"


def has_dropout(stack: ModuleStack) -> bool:
    return any(isinstance(m, nn.Dropout) for m in stack.build().modules())


@given(stack=module_stacks())
def test_cuda_rng_restored_on_recompute(refimpl_backend, stack: ModuleStack) -> None:
    """Checkpointed on CUDA: output, gradients and the CUDA generator after the step equal the
    unwrapped model's under the same CUDA seed."""
    apply = component(refimpl_backend, "checkpoint")
    reach(has_dropout(stack))
    x = stack.example_input()
    plain = cuda_step(stack.build(), x, None)
    got = cuda_step(wrapped(stack, apply).model, x, None)
    what = f"{refimpl_backend.name} checkpoint on CUDA on {stack.checkpointed}"
    assert_same_cuda_step(plain, got, what)
    assert torch.equal(plain.rng_after, got.rng_after), \
        f"{what}: the CUDA generator after the step differs from the unwrapped run's"


@given(stack=module_stacks(), dtype=st.sampled_from([torch.float16, torch.bfloat16]))
def test_cuda_autocast_gradients_match_unwrapped(refimpl_backend, stack: ModuleStack,
                                                 dtype: torch.dtype) -> None:
    """Under ``torch.autocast("cuda", dtype)`` the checkpointed model's gradients equal the
    unwrapped model's under the same autocast: the recomputation replays autocast."""
    apply = component(refimpl_backend, "checkpoint")
    reach(has_dropout(stack))
    x = stack.example_input()
    plain = cuda_step(stack.build(), x, dtype)
    got = cuda_step(wrapped(stack, apply).model, x, dtype)
    assert_same_cuda_step(plain, got, f"{refimpl_backend.name} checkpoint under CUDA autocast "
                          f"({dtype}) on {stack.checkpointed}")
