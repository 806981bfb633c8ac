"""The global state a recomputation must see as the forward saw it: RNG states and autocast.

Algorithm
    ``capture`` runs in the forward pre-hook and records, as plain data, the CPU RNG state,
    the RNG state of every CUDA device the forward can draw from (the devices of the tensor
    inputs and the current device; only if CUDA is already initialised, so capturing never
    initialises it) and the autocast settings of each device type. ``replayed`` is a context
    manager for the recomputation: it stashes the current RNG states, installs the captured
    ones, enters autocast with the captured settings, and on exit (normal or not) puts the
    stashed RNG states back.

Invariant: the recomputation draws the same random numbers as the forward, and the caller's
RNG stream after the backward is the one it would have been without checkpointing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from refimpl.checkpointing.options import CheckpointError


@dataclass(frozen=True)
class Autocast:
    """One device type's autocast settings."""

    device_type: str
    enabled: bool
    dtype: torch.dtype
    cache_enabled: bool


@dataclass(frozen=True)
class GlobalState:
    """What ``capture`` recorded; ``cpu_rng`` is None when RNG state is not preserved."""

    cpu_rng: torch.Tensor | None
    cuda_rng: dict[int, torch.Tensor] = field(default_factory=dict)
    autocast: tuple[Autocast, ...] = ()
    cuda_was_initialized: bool = False


def _autocast_device_types() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def _cuda_devices(inputs: Any) -> list[int]:
    devices = {t.device.index for t in tree_leaves(inputs)
               if isinstance(t, torch.Tensor) and t.device.type == "cuda"}
    devices.add(torch.cuda.current_device())
    return sorted(devices)


def capture(inputs: Any, preserve_rng_state: bool) -> GlobalState:
    """Record the RNG states (if ``preserve_rng_state``) and autocast settings now in force."""
    autocast = tuple(Autocast(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d),
                              torch.is_autocast_cache_enabled())
                     for d in _autocast_device_types())
    cuda_init = torch.cuda.is_initialized()
    if not preserve_rng_state:
        return GlobalState(None, {}, autocast, cuda_init)
    cuda_rng = {d: torch.cuda.get_rng_state(d) for d in _cuda_devices(inputs)} if cuda_init \
        else {}
    return GlobalState(torch.get_rng_state(), cuda_rng, autocast, cuda_init)


def check_cuda_not_initialized_during(state: GlobalState) -> None:
    """The forward may not initialise CUDA when RNG state is preserved: it was not captured."""
    if state.cpu_rng is not None and not state.cuda_was_initialized \
            and torch.cuda.is_initialized():

        raise CheckpointError("CUDA was initialised inside a checkpointed forward with "
                              "preserve_rng_state=True, so its RNG state could not be saved; "
                              "initialise CUDA before the forward or pass "
                              "preserve_rng_state=False")


@contextlib.contextmanager
def _rng_installed(state: GlobalState) -> Iterator[None]:
    if state.cpu_rng is None:
        yield
        return
    stashed_cpu = torch.get_rng_state()
    stashed_cuda = {d: torch.cuda.get_rng_state(d) for d in state.cuda_rng}
    torch.set_rng_state(state.cpu_rng)
    for device, rng in state.cuda_rng.items():
        torch.cuda.set_rng_state(rng, device)
    try:
        yield
    finally:
        torch.set_rng_state(stashed_cpu)
        for device, rng in stashed_cuda.items():
            torch.cuda.set_rng_state(rng, device)


@contextlib.contextmanager
def replayed(state: GlobalState) -> Iterator[None]:
    """Run the body under the captured RNG states and autocast settings (module docstring)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_rng_installed(state))
        for ac in state.autocast:
            stack.enter_context(torch.autocast(ac.device_type, dtype=ac.dtype,
                                               enabled=ac.enabled, cache_enabled=ac.cache_enabled))
        yield
