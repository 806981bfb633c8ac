"""``checkpoint(module)``: the composable activation checkpoint, as forward hooks on a module.

Algorithm
    ``checkpoint`` stores a :class:`CheckpointState` on the module and registers two hooks;
    the module's class, parameters and names are untouched.

    * The forward pre-hook (if the state's ``enable_hook`` is on) calls ``context_fn``,
      builds a :class:`~refimpl.checkpointing.frame.Frame` (which keeps the inputs and
      captures RNG/autocast state) and starts a generator that enters the dropping hooks and
      the forward context and then pauses; the generator is kept as ``_ac_generator``.
    * The forward hook, registered first and ``always_call=True`` so it also runs when the
      forward raises, resumes the generator to its end (leaving the contexts) and clears
      ``_ac_generator``.
    * The recomputation calls the module again with its ``enable_hook`` off, so its own hooks
      stand aside while checkpointed submodules inside it still checkpoint (nesting).

Invariant: after every forward, successful or not, ``_ac_generator`` is None and the
saved-tensor hook stack is as it was before the forward; ``enable_hook`` is restored after
every recomputation, successful or not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from refimpl.checkpointing.debug import OpLogs
from refimpl.checkpointing.frame import Frame, forward_region
from refimpl.checkpointing.options import (
    AlreadyCheckpointedError,
    CheckpointError,
    CheckpointOptions,
    NotAModuleError,
    OptionTypeError,
)
from refimpl.checkpointing.versions import Reads

#: where a module keeps its checkpoint state (in ``module.__dict__``, not as a submodule).
STATE_KEY = "_refimpl_checkpoint_state"


@dataclass
class CheckpointState:
    """Per-module state: the options, the hook switch and the running forward generator."""

    options: CheckpointOptions
    enable_hook: bool = True
    _ac_generator: Generator[None, None, None] | None = field(default=None, repr=False)


def _context_pair(options: CheckpointOptions) -> tuple[Any, Any]:
    if options.context_fn is None:
        return contextlib.nullcontext(), contextlib.nullcontext()
    pair = options.context_fn()
    if not (isinstance(pair, tuple) and len(pair) == 2
            and all(hasattr(c, "__enter__") and hasattr(c, "__exit__") for c in pair)):
        raise OptionTypeError("context_fn must return a pair (forward_ctx, recompute_ctx) of "
                              f"context managers, got {pair!r}")
    return pair


@contextlib.contextmanager
def _hooks_disabled(state: CheckpointState) -> Iterator[None]:
    previous, state.enable_hook = state.enable_hook, False
    try:
        yield
    finally:
        state.enable_hook = previous


def _recompute_runner(module: nn.Module, state: CheckpointState):
    def run(*args: Any, **kwargs: Any) -> Any:
        with _hooks_disabled(state):
            return module(*args, **kwargs)

    return run


def _forward_generator(frame: Frame | None, forward_ctx: Any) -> Generator[None, None, None]:
    with forward_region(frame, forward_ctx):
        yield


def _pre_forward(module: nn.Module, args: tuple, kwargs: dict) -> None:
    state = checkpoint_state(module)
    if state is None or not state.enable_hook:
        return
    if state._ac_generator is not None:
        raise CheckpointError("a checkpointed module was called again inside its own forward; "
                              "checkpoint a submodule instead")
    forward_ctx, recompute_ctx = _context_pair(state.options)
    frame = None
    if torch.is_grad_enabled():
        logs = OpLogs() if state.options.debug else None
        frame = Frame(_recompute_runner(module, state), args, kwargs, state.options,
                      recompute_ctx, logs, Reads.of(module, args, kwargs))
    generator = _forward_generator(frame, forward_ctx)
    next(generator)
    state._ac_generator = generator


def _post_forward(module: nn.Module, args: tuple, output: Any) -> None:
    state = checkpoint_state(module)
    if state is None or not state.enable_hook:
        return
    generator, state._ac_generator = state._ac_generator, None
    if generator is not None:
        next(generator, None)  # its one yield passed, it leaves the contexts and ends


def checkpoint(module: nn.Module, **kwargs: Any) -> nn.Module:
    """Checkpoint ``module`` in place and return it (``torch.distributed._composable.checkpoint``).

    Inside the module's forward nothing but its inputs is kept for backward; the backward
    reruns the forward to get what it needs. Keyword arguments: ``preserve_rng_state``,
    ``context_fn``, ``determinism_check``, ``debug``, ``early_stop`` (see
    :class:`CheckpointOptions`) and ``use_reentrant`` (only False). Applying it twice to a
    module is an error.
    """
    if not isinstance(module, nn.Module):
        raise NotAModuleError(f"module must be a torch.nn.Module, got "
                              f"{type(module).__name__}")
    options = CheckpointOptions.from_kwargs(kwargs)
    if checkpoint_state(module) is not None:
        raise AlreadyCheckpointedError(f"module: checkpoint has already been applied to this "
                         f"{type(module).__name__}; apply it once per module")
    module.__dict__[STATE_KEY] = CheckpointState(options)
    module.register_forward_pre_hook(_pre_forward, with_kwargs=True)
    module.register_forward_hook(_post_forward, prepend=True, always_call=True)
    return module


def checkpoint_state(module: nn.Module) -> CheckpointState | None:
    """The module's :class:`CheckpointState`, or None if it is not checkpointed (as torch)."""
    if not isinstance(module, nn.Module):
        raise NotAModuleError(f"module must be a torch.nn.Module, got "
                              f"{type(module).__name__}")
    return module.__dict__.get(STATE_KEY)


checkpoint.state = checkpoint_state  # type: ignore[attr-defined]
