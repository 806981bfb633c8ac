"""The two built-in backends: refimpl itself, and torch's own implementations."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import torch
import torch._functorch.config as fconfig
from torch._functorch.compile_utils import fx_graph_cse as torch_fx_graph_cse
from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounterMode

import refimpl
from refimpl.checkpointing import checkpoint
from refimpl.cse import fx_graph_cse as refimpl_fx_graph_cse
from refimpl.expect.checkpoint import REFIMPL as REFIMPL_CHECKPOINT
from refimpl.expect.partition_expect import PartitionPromise
from refimpl.flops.counter import FlopCounterMode as RefimplFlopCounterMode
from refimpl.layout import LayoutOptions, optimize_layout
from refimpl.partition.api import compile as refimpl_compile
from refimpl.partition.api import explain as refimpl_explain
from refimpl.partition.api import explain_many as refimpl_explain_many
from refimpl.partition.api import fresh_entry
from refimpl.partition.api import memory_efficient_fusion as refimpl_memory_efficient_fusion
from refimpl.partition.options import PartitionOptions


class RefimplBackend:
    """refimpl's own components: the oracle checked against itself."""

    name = "refimpl"
    #: the exact solver (torch's default config, "dp", selects it) recomputes the least; the
    #: knapsack heuristics follow refimpl's formulation of torch's knapsack; "brute" is exact
    partition_promise = PartitionPromise(least_recompute=True, modelled_knapsack=True,
                                         exact_solvers=("brute",), refimpl_event_clocks=True)
    #: the composable checkpoint's contract, and refimpl's debug report (docs/differences.md)
    checkpoint_promise = REFIMPL_CHECKPOINT

    @property
    def version(self) -> str:
        return f"refimpl {refimpl.__version__}"

    def fx_graph_cse(self, graph):
        return refimpl_fx_graph_cse(graph)

    def flop_counter(self, **kwargs):
        return RefimplFlopCounterMode(**kwargs)

    def model_flops(self, model, inputs):
        """Forward FLOPs of ``model(*inputs)``, counted by refimpl's FlopCounterMode."""

        with RefimplFlopCounterMode(display=False) as counter:
            model(*inputs)
        return counter.get_total_flops()

    def compile(self, fn, *, memory_budget=None, **options):
        """refimpl's partitioner at ``memory_budget``, with the solver and the runtime
        estimator torch's partitioner config names (``activation_memory_budget_solver``:
        refimpl's exact solver while it is unset; ``..._runtime_estimator``), so a property
        that sets torch's config asks both targets the same. ``options``: refimpl's own
        :class:`PartitionOptions` fields torch has no config for (``profile_repeats``,
        ``solver_time_limit``), which properties/test_partition_api_options.py checks."""
        config = PartitionOptions.from_torch_config()
        return refimpl_compile(fn, memory_budget=memory_budget, solver=config.solver,
                               runtime_estimator=config.runtime_estimator, **options)

    def explain(self, fn, *args, memory_budget=None):
        """The :class:`~refimpl.partition.plan.Plan` :meth:`compile` makes for ``fn(*args)``
        (``refimpl.explain``), under the same solver and runtime estimator of torch's
        partitioner config."""
        config = PartitionOptions.from_torch_config()
        return refimpl_explain(fn, *args, memory_budget=memory_budget, solver=config.solver,
                               runtime_estimator=config.runtime_estimator)

    def memory_efficient_fusion(self, fn):
        """``refimpl.memory_efficient_fusion``: AOTAutograd with refimpl's partitioner."""
        return refimpl_memory_efficient_fusion(fn)

    def explain_many(self, fn, *args, memory_budgets):
        """One :class:`~refimpl.partition.plan.Plan` per budget from one trace of ``fn(*args)``
        (``refimpl.partition.api.explain_many``), each the plan :meth:`explain` makes at that
        budget, under the same solver and runtime estimator of torch's partitioner config."""
        config = PartitionOptions.from_torch_config()
        return refimpl_explain_many(fn, *args, memory_budgets=memory_budgets,
                                    solver=config.solver,
                                    runtime_estimator=config.runtime_estimator)

    def checkpoint(self, module, **options):
        """refimpl's composable checkpoint; ``options`` as torch's (``context_fn``, ...)."""
        return checkpoint(module, **options)

    def optimize_layout(self, gm, example_inputs, **options):
        """refimpl's layout pass; ``options`` are :class:`refimpl.layout.LayoutOptions`'
        fields (``mode``, ``is_inference``, ``max_nodes_per_conv``, ``multipliers``)."""
        return optimize_layout(gm, example_inputs, LayoutOptions(**options))


class TorchBackend:
    """torch's implementations: fx_graph_cse, FlopCounterMode, the min-cut partitioner
    behind ``aot_eager_decomp_partition``, and the composable checkpoint. torch has no
    standalone layout pass (inductor decides layouts while lowering), so that component is
    left out and reported as skipped."""

    name = "torch"
    version = f"torch {torch.__version__}"
    #: torch's fx_graph_cse runs in AOTAutograd on make_fx graphs only, and reads their
    #: ``meta["val"]`` (a symbolic_trace graph's ``slice`` arguments are unhashable to it)
    accepts: ClassVar[dict[str, tuple[str, ...]]] = {"fx_graph_cse": ("aten",)}

    def fx_graph_cse(self, graph):
        return torch_fx_graph_cse(graph)

    def flop_counter(self, **kwargs):
        return TorchFlopCounterMode(**kwargs)

    def model_flops(self, model, inputs):
        """Forward FLOPs of ``model(*inputs)``, counted by torch's FlopCounterMode."""

        with TorchFlopCounterMode(display=False) as counter:
            model(*inputs)
        return counter.get_total_flops()

    def compile(self, fn, *, memory_budget=None):
        """torch's partitioner at ``memory_budget``. Each call compiles anew: dynamo caches
        graphs per code object and does not guard on the budget, so compiling ``fn`` itself
        again would reuse the first compile's plan (and, past the recompile limit, run
        eagerly); ``fresh_entry`` gives each compile a new code object, as refimpl's does."""


        compiled = torch.compile(fresh_entry(fn), backend="aot_eager_decomp_partition")
        budget = 1.0 if memory_budget is None else memory_budget

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any):
            # The budget is read when the graph is partitioned, at the first call.
            with fconfig.patch(activation_memory_budget=budget):
                return compiled(*args, **kwargs)

        return run

    def memory_efficient_fusion(self, fn):
        """``functorch.compile.memory_efficient_fusion``: AOTAutograd with torch's min-cut
        partitioner (and its TorchScript compilers)."""
        # torch's compiler stack: ~1 s to import, loaded on use
        from functorch.compile import memory_efficient_fusion

        return memory_efficient_fusion(fn)

    def checkpoint(self, module, **options):
        # torch.distributed is absent from some torch builds: imported only when asked for
        from torch.distributed._composable import checkpoint

        return checkpoint(module, **options)
