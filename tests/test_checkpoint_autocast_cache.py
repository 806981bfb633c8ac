"""A module checkpointed with a selective policy and called twice in one forward under
autocast: refimpl's checkpoint with torch's selective contexts does what torch's own selective
checkpoint does on the release in use. On torch 2.13 both raise in the backward (a finding,
docs/findings.md); on 2.10 both give eager's gradients.

Autocast caches a weight's cast: the second call's forward reuses the first call's, while its
recomputation (in the backward, a fresh autocast context) casts, so the recomputation runs an
op the forward did not, which the selective policy's cache of torch 2.13 rejects. Turning the
cast cache off in both runs would avoid the error but changes the weight's gradient in its
last bits (two casts accumulate in float32, eager's one cast in bfloat16), so refimpl keeps
torch's behaviour rather than improving on it.
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

NOT_FOUND = "encountered during backward but not found in storage"


def save_mm(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return (CheckpointPolicy.MUST_SAVE if op in (torch.ops.aten.mm.default,
                                                torch.ops.aten.addmm.default)
            else CheckpointPolicy.PREFER_RECOMPUTE)


CONTEXT_FN = functools.partial(create_selective_checkpoint_contexts, save_mm)


def _grads(call_twice) -> list[torch.Tensor]:
    """Input and parameter gradients of ``lin`` applied twice under CPU autocast."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 2)
    x = torch.linspace(-1, 1, 2).reshape(1, 2).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = call_twice(lin, x)
    out.float().sum().backward()
    return [x.grad, lin.weight.grad, lin.bias.grad]


def _refimpl_checkpointed(lin, x):
    refimpl.checkpoint(lin, context_fn=CONTEXT_FN)
    return lin(lin(x))


def _torch_checkpointed(lin, x):
    def once(h):
        return checkpoint(lin, h, use_reentrant=False, context_fn=CONTEXT_FN)
    return once(once(x))


def _eager(lin, x):
    return lin(lin(x))


def _outcome(call_twice) -> tuple:
    """("raised", first line of the error) or ("gradients", their values as lists)."""
    try:
        return ("gradients", [g.tolist() for g in _grads(call_twice)])
    except RuntimeError as error:
        return ("raised", str(error).splitlines()[0])


def test_refimpl_does_as_torch_does_on_this_release() -> None:
    torch_did = _outcome(_torch_checkpointed)
    refimpl_did = _outcome(_refimpl_checkpointed)
    assert refimpl_did == torch_did, f"torch: {torch_did}; refimpl: {refimpl_did}"


@pytest.mark.torch_releases("2.13")
def test_refimpl_raises_where_torch_does() -> None:
    with pytest.raises(RuntimeError, match=NOT_FOUND):
        _grads(_refimpl_checkpointed)


@pytest.mark.torch_releases("2.10")
def test_both_give_eagers_gradients_where_torch_does_not_raise() -> None:
    eager = _outcome(_eager)
    assert eager[0] == "gradients"
    assert _outcome(_torch_checkpointed) == eager
    assert _outcome(_refimpl_checkpointed) == eager


@pytest.mark.torch_releases("2.13")
def test_finding_torch_selective_checkpoint_under_autocast_raises() -> None:
    with pytest.raises(RuntimeError, match=NOT_FOUND):
        _grads(_torch_checkpointed)
