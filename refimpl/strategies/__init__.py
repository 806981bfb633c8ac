"""Public Hypothesis strategies: graphs, shapes, conv configs, module stacks, conv nets.

Each family lives in its own submodule; a name is looked up in them lazily, so importing
``refimpl.strategies`` does not import every family. No submodule shares a name with a
strategy: importing a submodule binds its name on this package, which would shadow the
strategy.

| submodule   | what it generates |
| ----------- | ----------------- |
| conv        | convolution configs (1-3 spatial dims, groups, stride, padding, transposed, ...) |
| matmul      | shapes for the mm family |
| graphs      | random FX op graphs (``op_graphs``) |
| programs    | random differentiable programs with weights, for the partitioner |
| modules     | random module stacks, for the checkpoint wrapper |
| nets        | random conv nets (``conv_nets``) and the device axis (``devices``): layout |
| flop_models | random models of one matmul-class layer family, for model-level FLOP counts |
| fused       | torch.nn modules with a fused inference path (``fused_cases``) |
| flop_programs | free-op, in-place and torch.cond programs; arithmetic with no FLOP formula |
| mutating    | programs writing an input (``mutation_programs``, ``aliased_mutation_programs``) |
| write_between | one op twice, an in-place write, a read (``write_between_repeats``) |
| features    | the table type of what each generator must draw (``Feature``, ``all_features``) |
"""

from __future__ import annotations

import importlib

SUBMODULES = ("conv", "matmul", "graphs", "programs", "modules", "nets", "flop_models",
              "features", "fused", "flop_programs", "mutating", "write_between")


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    for sub in SUBMODULES:
        try:
            module = importlib.import_module(f"{__name__}.{sub}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{sub}":
                raise
            continue
        if name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"refimpl.strategies has no strategy {name!r}")
