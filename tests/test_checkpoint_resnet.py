"""Checkpoint on torchvision's ResNet-18 (issue 11), where torchvision is installed.

Each residual stage (``layer1`` .. ``layer4``) is checkpointed by refimpl and by each built-in
torch checkpoint target. Gradients must equal the unwrapped model's bit for bit (CPU, one
thread), and the bytes kept must equal the hand prediction of
:func:`refimpl.expect.checkpoint.predict_saved` and strictly drop. Skipped, visibly, where
torchvision is not installed (the README's torch 2.13 environment).
"""

from __future__ import annotations

import pytest
import torch

from refimpl.expect.checkpoint import COMPOSABLE, loss, predict_saved, run_step
from refimpl.oracle import load_backend

torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")

STAGES = ("layer1", "layer2", "layer3", "layer4")


def resnet18() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torchvision.models.resnet18(num_classes=10).train()


def _checkpointed(name: str) -> torch.nn.Module:
    model, backend = resnet18(), load_backend(name)
    for stage in STAGES:
        new = backend.checkpoint(getattr(model, stage))
        if new is not None:
            setattr(model, stage, new)
    return model


@pytest.mark.parametrize("name", ["refimpl", "torch-checkpoint", "torch-checkpoint-reentrant",
                                  "torch-sac", "checkpoint-wrapper"])
def test_resnet18_stages_checkpointed(name: str) -> None:
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    plain = run_step(resnet18(), x)
    got = run_step(_checkpointed(name), x)
    for (param, _), want, have in zip(resnet18().named_parameters(), plain.grads, got.grads):
        assert torch.equal(want, have), f"{name}: gradient of {param} differs"
    assert torch.equal(plain.input_grad, got.input_grad)
    model = resnet18()
    prediction = predict_saved(model, [getattr(model, s) for s in STAGES], loss, x)
    promise = getattr(load_backend(name), "checkpoint_promise", None) or COMPOSABLE
    assert plain.saved == prediction.unwrapped_bytes()
    assert got.saved == prediction.expected_bytes(promise) < plain.saved, \
        (name, got.saved, prediction.expected_bytes(promise), plain.saved)
