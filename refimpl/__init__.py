"""refimpl: a readable reference for five PyTorch memory/compile systems.

The public names below are imported lazily (PEP 562), so ``import refimpl`` stays cheap and
each component loads only when it is first used. ``refimpl.__all__`` is the public contract
of docs/design.md ("The public API"); outside test suites rely on these names.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> "module:attribute" it lives in.
_EXPORTS: dict[str, str] = {
    # FLOP formula table and counter
    "FlopCounterMode": "refimpl.flops.counter:FlopCounterMode",
    "register_flop_formula": "refimpl.flops.formulas:register_flop_formula",
    "flop_formulas": "refimpl.flops.formulas:flop_formulas",
    # common-subexpression elimination
    "fx_graph_cse": "refimpl.cse:fx_graph_cse",
    # memory-budget partitioner
    "compile": "refimpl.partition.api:compile",
    "explain": "refimpl.partition.api:explain",
    "partition_fn": "refimpl.partition.api:partition_fn",
    "memory_efficient_fusion": "refimpl.partition.api:memory_efficient_fusion",
    "Plan": "refimpl.partition.plan:Plan",
    "PartitionOptions": "refimpl.partition.options:PartitionOptions",
    # activation meter
    "saved_activation_bytes": "refimpl.memory:saved_activation_bytes",
    "measure_saved": "refimpl.memory:measure_saved",
    "measure_held": "refimpl.memory:measure_held",
    # checkpoint wrapper
    "checkpoint": "refimpl.checkpointing:checkpoint",
    "CheckpointError": "refimpl.checkpointing:CheckpointError",
    "CheckpointOptions": "refimpl.checkpointing:CheckpointOptions",
    # layout pass and accuracy rule
    "optimize_layout": "refimpl.layout:optimize_layout",
    "same": "refimpl.expect.same:same",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        target = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'refimpl' has no attribute {name!r}") from None
    module_name, attribute = target.split(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value  # cache: the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
