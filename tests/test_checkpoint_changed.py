"""A tensor a checkpointed call read, changed in place before the backward (issue 32, item 2).

Eager raises autograd's "modified by an inplace operation"; refimpl's checkpoint raises a
RuntimeError too (``ModifiedInPlaceError``, naming the tensor) instead of recomputing from the
changed tensor. torch's composable checkpoint recomputes silently (a finding, pinned below).
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from refimpl.checkpointing import ModifiedInPlaceError, checkpoint

STALE = "modified by an inplace operation"


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))


def _input() -> torch.Tensor:
    return torch.linspace(-1, 1, 8).reshape(2, 4).requires_grad_()


def _changed_weight_step(apply) -> torch.Tensor:
    """The issue's steps: forward, ``m[0].weight.add_(1)`` under no_grad, backward; x.grad."""
    m = _model()
    if apply is not None:
        apply(m)
    x = _input()
    out = m(x)
    with torch.no_grad():
        m[0].weight.add_(1)
    out.sum().backward()
    return x.grad


def test_eager_raises_on_the_issue_example() -> None:
    with pytest.raises(RuntimeError, match=STALE):
        _changed_weight_step(None)


def test_refimpl_raises_naming_the_weight() -> None:
    with pytest.raises(ModifiedInPlaceError, match=STALE) as info:
        _changed_weight_step(checkpoint)
    assert isinstance(info.value, RuntimeError)
    assert "parameter '0.weight' of the checkpointed Sequential" in str(info.value)
    versions = re.search(r"is at version (\d+); expected version (\d+)", str(info.value))
    assert versions and int(versions[1]) == int(versions[2]) + 1, str(info.value)


def test_refimpl_raises_for_a_changed_input() -> None:
    m = checkpoint(_model())
    x = _input()
    h = x * 2  # a non-leaf input: changed in place, it bumps its version
    out = m(h)
    with torch.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match=STALE):
        out.sum().backward()


def test_unchanged_step_gives_eager_gradients() -> None:
    want, got = [], []
    for apply, grads in ((None, want), (checkpoint, got)):
        m = _model()
        if apply is not None:
            apply(m)
        x = _input()
        m(x).sum().backward()
        grads += [x.grad, *(p.grad for p in m.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(want, got))


def test_buffers_the_forward_writes_are_not_a_change() -> None:
    """A batchnorm's running statistics change during the forward (and each recomputation),
    nested checkpoints included: not a change between forward and backward."""
    torch.manual_seed(0)
    inner = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    m = nn.Sequential(nn.Sequential(inner, nn.ReLU()), nn.Linear(4, 4))
    for path in ("", "0", "0.0"):
        checkpoint(m.get_submodule(path))
    m(torch.randn(8, 4, requires_grad=True)).sum().backward()
    assert m[0][0][1].num_batches_tracked.item() == 4  # the forward and three recomputations


def test_a_change_after_the_backward_is_not_checked() -> None:
    m = checkpoint(_model())
    m(_input()).sum().backward()
    with torch.no_grad():
        m[0].weight.add_(1)
    m(_input()).sum().backward()  # a new forward reads the new weight: no error


@pytest.mark.torch_releases("2.13", "2.14")
def test_finding_composable_checkpoint_recomputes_from_a_changed_weight() -> None:
    """Finding (docs/findings.md, "Checkpoint"): where eager raises, torch's composable
    checkpoint returns the gradient recomputed from the changed weight, silently."""
    from torch.distributed._composable import checkpoint as torch_checkpoint

    got = _changed_weight_step(torch_checkpoint)
    m = _model()
    with torch.no_grad():
        m[0].weight.add_(1)
    x = _input()
    m(x).sum().backward()  # eager, forward run on the changed weight
    assert torch.equal(got, x.grad)
