"""The checkpoint wrapper's options: one frozen dataclass, validated once, and its error type.

``checkpoint(module, **kwargs)`` accepts the keyword arguments of
``torch.distributed._composable.checkpoint``; :meth:`CheckpointOptions.from_kwargs` turns them
into this dataclass, or raises an error naming the argument and the allowed values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch.utils.checkpoint

#: determinism_check values and what they compare between forward and recomputation.
DETERMINISM_CHECKS = ("default", "none")


class CheckpointError(torch.utils.checkpoint.CheckpointError):
    """The recomputation did not reproduce what the forward saved, or the wrapper was misused.

    A subclass of ``torch.utils.checkpoint.CheckpointError`` (itself a RuntimeError), so code
    that catches torch's class catches refimpl's.
    """


class ModifiedInPlaceError(RuntimeError):
    """A tensor the checkpointed forward read (an input, a parameter, a buffer) was changed in
    place before the backward recomputed from it. A RuntimeError, as eager autograd's error
    for a saved tensor changed in place; not a CheckpointError (the recomputation is not at
    fault)."""


# The argument errors below subclass every class torch raises for the same input (torch
# 2.13/2.14, ``torch.distributed._composable.checkpoint``), and the class refimpl raised before.


class UseReentrantError(NotImplementedError, TypeError, ValueError):
    """``use_reentrant`` other than False. torch: NotImplementedError for any truthy value."""


class OptionTypeError(TypeError, ValueError):
    """An option (or what ``context_fn`` returns) of the wrong type. torch: ValueError for a
    truthy ``debug``, TypeError or ValueError for a ``context_fn`` result that is not a pair."""


class AlreadyCheckpointedError(ValueError, AssertionError):
    """``checkpoint`` applied twice to a module. torch: AssertionError (its ``contract``)."""


class NotAModuleError(TypeError, AttributeError):
    """``module`` is not an ``nn.Module``. torch: TypeError (checkpoint), AttributeError
    (``checkpoint.state``)."""


@dataclass(frozen=True)
class CheckpointOptions:
    """How a checkpointed module saves, recomputes and checks.

    preserve_rng_state  stash the CPU and CUDA RNG states before the forward and restore them
                        for the recomputation, so random ops draw the same numbers.
    context_fn          ``None`` or a callable returning ``(forward_ctx, recompute_ctx)``, two
                        context managers entered around the forward and the recomputation
                        (e.g. ``torch.utils.checkpoint.create_selective_checkpoint_contexts``).
    determinism_check   ``"default"``: the recomputation must save as many tensors as the
                        forward, with equal shape, dtype and device; ``"none"``: no check.
    debug               on a determinism failure, add the op logs of both runs to the error;
                        works together with ``context_fn``.
    early_stop          stop the recomputation as soon as every dropped tensor is recomputed.
    """

    preserve_rng_state: bool = True
    context_fn: Callable[[], tuple[Any, Any]] | None = None
    determinism_check: str = "default"
    debug: bool = False
    early_stop: bool = True

    def __post_init__(self) -> None:
        for name in ("preserve_rng_state", "debug", "early_stop"):
            if not isinstance(getattr(self, name), bool):
                raise OptionTypeError(f"{name} must be True or False, got "
                                      f"{getattr(self, name)!r}")
        if self.determinism_check not in DETERMINISM_CHECKS:
            raise ValueError(f"determinism_check={self.determinism_check!r} is not one of "
                             f"{', '.join(map(repr, DETERMINISM_CHECKS))}")
        if self.context_fn is not None and not callable(self.context_fn):
            raise TypeError("context_fn must be None or a callable returning two context "
                            f"managers, got {type(self.context_fn).__name__}")

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> CheckpointOptions:
        """The options named by ``checkpoint(module, **kwargs)``; unknown names are an error."""
        kwargs = dict(kwargs)
        use_reentrant = kwargs.pop("use_reentrant", False)
        if not isinstance(use_reentrant, bool):
            raise UseReentrantError(f"use_reentrant must be a bool (True or False), got "
                                    f"{use_reentrant!r}; the composable checkpoint allows only "
                                    "use_reentrant=False")
        if use_reentrant:
            raise UseReentrantError("use_reentrant=True is not supported by the composable "
                                    "checkpoint; allowed: use_reentrant=False (use "
                                    "torch.utils.checkpoint for the reentrant variant)")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            raise ValueError(f"unexpected keyword argument(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(['use_reentrant', *allowed])}")
        return cls(**kwargs)
