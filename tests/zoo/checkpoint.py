"""Activation-checkpoint bugs from torch's tracker and fairscale's, re-planted in refimpl's
composable checkpoint.

Each backend applies :func:`refimpl.checkpoint` with the one thing the historical code got
wrong: an option forced, or a context (through ``context_fn``, composed with the caller's
own) that undoes, around the forward or the recomputation, what refimpl restores.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

import refimpl


class _PlantedCheckpoint:
    """refimpl's checkpoint with ``forward_context``/``recompute_context`` (module ->
    context manager, or None) entered inside the caller's own contexts."""

    component = "checkpoint"
    forward_context = None
    recompute_context = None

    def options(self, options: dict) -> dict:
        return options

    def checkpoint(self, module: nn.Module, **options):
        options = self.options(dict(options))
        if self.forward_context or self.recompute_context:
            options["context_fn"] = _composed(options.get("context_fn"), module,
                                              self.forward_context, self.recompute_context)
        return refimpl.checkpoint(module, **options)


def _composed(user_fn, module, forward, recompute):
    """A ``context_fn`` entering the caller's pair (if any), then the planted contexts."""

    @contextlib.contextmanager
    def both(first, make_second):
        with first:
            if make_second is None:
                yield
            else:
                with make_second(module):
                    yield

    def context_fn():
        first, again = user_fn() if user_fn else (contextlib.nullcontext(),
                                                  contextlib.nullcontext())
        return both(first, forward), both(again, recompute)

    return context_fn


class RngNotRestoredCheckpoint(_PlantedCheckpoint):
    """pytorch/pytorch#91265, "Restore RNG states for composable reentrant activation
    checkpointing".

    The composable checkpoint did not restore the RNG state before recomputing, so a
    ``dropout`` (or ``randperm``) in the region drew anew in the backward and the gradients
    were taken through a mask the forward never used. Planted: ``preserve_rng_state`` is
    always False. Caught by test_checkpoint_properties.py's
    ``test_gradients_and_rng_match_unwrapped``.
    """

    name = "zoo:checkpoint-rng-not-restored"
    issue = "pytorch/pytorch#91265"
    title = "Restore RNG states for composable reentrant activation checkpointing"
    catcher = "test_checkpoint_properties::test_gradients_and_rng_match_unwrapped"

    def options(self, options: dict) -> dict:
        return {**options, "preserve_rng_state": False}


def _cpu_autocast_off(module):
    return torch.autocast("cpu", enabled=False)


class CpuAutocastDroppedCheckpoint(_PlantedCheckpoint):
    """pytorch/pytorch#71169, "Propagate full autocast state to CheckpointFunction's
    forward-inside-backward" (fixing #71124).

    The recomputation re-entered only CUDA autocast's enabled flag: CPU autocast (and the
    autocast dtype) was dropped, so the recomputed region ran in float32 where the forward
    ran in bfloat16, and the gradients differed. Planted: CPU autocast is off during the
    recomputation. Caught by test_checkpoint_properties.py's
    ``test_autocast_gradients_match_unwrapped``.
    """

    name = "zoo:checkpoint-cpu-autocast-dropped"
    issue = "pytorch/pytorch#71169"
    title = "Propagate full autocast state to CheckpointFunction's forward-inside-backward"
    catcher = "test_checkpoint_properties::test_autocast_gradients_match_unwrapped"
    recompute_context = staticmethod(_cpu_autocast_off)


@contextlib.contextmanager
def _norm_statistics_kept(module):
    """The batchnorms' buffers as they were before the body ran (the body's update undone)."""
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [(m, {k: b.clone() for k, b in m.named_buffers(recurse=False)}) for m in norms]
    try:
        yield
    finally:
        with torch.no_grad():
            for norm, buffers in saved:
                for key, value in buffers.items():
                    getattr(norm, key).copy_(value)


class NormStatsSkippedInForwardCheckpoint(_PlantedCheckpoint):
    """facebookresearch/fairscale#1035, "Running stats with gradient checkpointing".

    fairscale's ``patch_batchnorm`` let a checkpointed BatchNorm accumulate running
    statistics only when grad was enabled, that is in the recomputation, not in the first
    forward: after a forward the statistics differed from the unwrapped model's. Planted:
    the first forward leaves the batchnorms' buffers as they were. Caught by
    test_checkpoint_properties.py's ``test_buffers_as_the_composable_checkpoint``.
    """

    name = "zoo:checkpoint-norm-stats-skipped-in-forward"
    issue = "facebookresearch/fairscale#1035"
    title = "Running stats with gradient checkpointing"
    catcher = "test_checkpoint_properties::test_buffers_as_the_composable_checkpoint"
    forward_context = staticmethod(_norm_statistics_kept)


def _default_autocast_dtype(module):
    """Autocast re-entered with float16 (``torch.cuda.amp.autocast()``'s default) when the
    forward ran under autocast, whatever dtype the forward used."""
    if torch.is_autocast_enabled("cpu"):
        return torch.autocast("cpu", dtype=torch.float16)
    return contextlib.nullcontext()


class AutocastDefaultDtypeCheckpoint(_PlantedCheckpoint):
    """facebookresearch/fairscale#1199, "Why autocast in checkpoint_activation uses default
    dtype?".

    fairscale's recomputation re-entered ``torch.cuda.amp.autocast()`` with its default
    dtype (float16) whenever autocast was on, though the forward ran under bfloat16: the
    recomputed activations had another dtype (and range) than the forward's. Planted: the
    recomputation runs CPU autocast in float16 when the forward's autocast was on. Caught by
    test_checkpoint_properties.py's ``test_autocast_gradients_match_unwrapped``.
    """

    name = "zoo:checkpoint-autocast-default-dtype"
    issue = "facebookresearch/fairscale#1199"
    title = "Why autocast in checkpoint_activation uses default dtype?"
    catcher = "test_checkpoint_properties::test_autocast_gradients_match_unwrapped"
    recompute_context = staticmethod(_default_autocast_dtype)


ZOO = [RngNotRestoredCheckpoint, CpuAutocastDroppedCheckpoint, NormStatsSkippedInForwardCheckpoint,
       AutocastDefaultDtypeCheckpoint]
