"""Built-in checkpoint targets: the activation checkpoints people use, as ``checkpoint(module)``.

- ``torch-checkpoint``: ``torch.utils.checkpoint.checkpoint(forward, use_reentrant=False)``;
- ``torch-checkpoint-reentrant``: the same with ``use_reentrant=True``;
- ``torch-sac``: non-reentrant, ``context_fn`` = selective checkpoint contexts whose policy
  saves the matmuls (:data:`MATMULS`) and recomputes the rest;
- ``checkpoint-wrapper``: ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper``
  (non-reentrant by default), a wrapper module.

The first three replace the module's ``forward`` on the instance (module hooks stay outside the
checkpoint, as with the composable checkpoint); ``checkpoint-wrapper`` returns a new module
wrapping the given one, and the properties put it in the module's place.

Each adapter states its promise as data (:class:`~refimpl.expect.checkpoint.CheckpointPromise`,
attribute ``checkpoint_promise``): what its forward keeps for backward, and which inputs it
supports, so a property never fails a target for a saving it does not promise.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import torch
from torch import nn
from torch.utils import checkpoint as tuc

from refimpl.expect.checkpoint import COMPOSABLE, CheckpointPromise

#: the ops the ``torch-sac`` policy saves (aten op packet names): the matmul family.
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm"})

_ONLY_CHECKPOINT = "this target is a checkpoint implementation only"


class _CheckpointTarget:
    """A target with only the checkpoint component; subclasses set name and promise."""

    name = ""
    checkpoint_promise: CheckpointPromise = COMPOSABLE
    skip_reasons: ClassVar[dict[str, str]] = {m: _ONLY_CHECKPOINT for m in
                    ("fx_graph_cse", "flop_counter", "compile", "optimize_layout", "model_flops")}
    version = f"torch {torch.__version__}"

    def checkpoint(self, module: nn.Module) -> nn.Module:
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        module.forward = functools.partial(tuc.checkpoint, module.forward, **self._kwargs())
        return module

    def _kwargs(self) -> dict:
        return {"use_reentrant": False}


class TorchCheckpoint(_CheckpointTarget):
    """``torch.utils.checkpoint``, non-reentrant: keeps the inputs, recomputes the rest."""

    name = "torch-checkpoint"


class TorchCheckpointReentrant(_CheckpointTarget):
    """``torch.utils.checkpoint``, reentrant. Documented: inputs nested in containers get no
    gradient (only top-level tensor arguments are tracked), so those cases are not promised;
    it has no determinism check; it saves its inputs with save_for_backward in every call;
    a call none of whose inputs needs a gradient gives its parameters none (with a warning)."""

    name = "torch-checkpoint-reentrant"
    checkpoint_promise = CheckpointPromise(keeps_inputs="always", nested_inputs=False,
                                           checks_determinism=False,
                                           grads_without_input_grad=False,
                                           per_op_graph=False, stops_early=False)

    def _kwargs(self) -> dict:
        return {"use_reentrant": True}


def save_matmuls(ctx, op, *args, **kwargs) -> tuc.CheckpointPolicy:
    """The selective-checkpoint policy: keep the outputs of :data:`MATMULS`, recompute others."""
    return (tuc.CheckpointPolicy.MUST_SAVE if op.overloadpacket.__name__ in MATMULS
            else tuc.CheckpointPolicy.PREFER_RECOMPUTE)


class TorchSAC(_CheckpointTarget):
    """Selective activation checkpointing: non-reentrant, matmul outputs kept."""

    name = "torch-sac"
    #: torch's debug mode raises "debug=True is incompatible with non-default context_fn", and
    #: a second recomputation "Trying to backward an extra time" (both documented)
    checkpoint_promise = CheckpointPromise(kept_ops=MATMULS, debug_mode=False,
                                           recomputes_repeatedly=False)

    def _kwargs(self) -> dict:
        return {"use_reentrant": False,
                "context_fn": functools.partial(tuc.create_selective_checkpoint_contexts,
                                                save_matmuls)}


class CheckpointWrapper(_CheckpointTarget):
    """``checkpoint_wrapper(module)`` (non-reentrant by default): a new wrapping module."""

    name = "checkpoint-wrapper"

    def checkpoint(self, module: nn.Module) -> nn.Module:
        # torch.distributed is absent from some torch builds: imported only when asked for
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

        return checkpoint_wrapper(module)
