"""A module checkpointed with a selective policy and called twice in one forward under
autocast: torch's selective checkpoint raises in the backward (a finding, docs/findings.md),
and refimpl's checkpoint with the same torch selective contexts raises the same.

Autocast caches a weight's cast: the second call's forward reuses the first call's, while its
recomputation (in the backward, a fresh autocast context) casts, so the recomputation runs an
op the forward did not, which the selective policy's cache rejects. Turning the cast cache off
in both runs would avoid the error but changes the weight's gradient in its last bits (two
casts accumulate in float32, eager's one cast in bfloat16), so refimpl keeps torch's behaviour.
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


def test_refimpl_raises_as_torch_does() -> None:
    def checkpointed(lin, x):
        refimpl.checkpoint(lin, context_fn=CONTEXT_FN)
        return lin(lin(x))

    with pytest.raises(RuntimeError, match=NOT_FOUND):
        _grads(checkpointed)


@pytest.mark.torch_releases("2.13")
def test_finding_torch_selective_checkpoint_under_autocast_raises() -> None:
    def checkpointed(lin, x):
        def once(h):
            return checkpoint(lin, h, use_reentrant=False, context_fn=CONTEXT_FN)
        return once(once(x))

    with pytest.raises(RuntimeError, match=NOT_FOUND):
        _grads(checkpointed)
