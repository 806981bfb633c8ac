"""The composable activation checkpoint: ``checkpoint(module)``, in place, as forward hooks.

A checkpointed module keeps nothing of its forward for backward but its inputs; the backward
reruns the forward to get what it needs. The mechanism is refimpl's own: saved-tensor hooks
that drop what the forward saves and recompute it on first unpack.

| module    | what |
| --------- | ---- |
| options   | ``CheckpointOptions`` (one frozen dataclass), ``CheckpointError`` |
| replay    | RNG and autocast state captured in the forward, replayed in the recomputation |
| versions  | the version check: what the recomputation reads is unchanged since the forward |
| frame     | one checkpointed call: keep inputs, drop saves, recompute, determinism check |
| debug     | op logs of forward and recomputation for determinism errors |
| wrapper   | ``checkpoint(module, **options)`` and ``checkpoint.state(module)`` |
"""

from refimpl.checkpointing.options import (
    AlreadyCheckpointedError,
    CheckpointError,
    CheckpointOptions,
    ModifiedInPlaceError,
    NotAModuleError,
    OptionTypeError,
    UseReentrantError,
)
from refimpl.checkpointing.wrapper import CheckpointState, checkpoint, checkpoint_state

__all__ = ["AlreadyCheckpointedError", "CheckpointError", "CheckpointOptions",
           "CheckpointState", "ModifiedInPlaceError", "NotAModuleError", "OptionTypeError",
           "UseReentrantError", "checkpoint", "checkpoint_state"]
