"""Deliberately broken backends: the proof that refimpl's oracle catches real bugs.

Each class breaks one component in a way that a real backend could, and provides only that
component (the others are then reported as skipped). ``tests/test_oracle_catches_bugs.py``
runs ``refimpl fuzz`` against each, under the ci profile, and requires a failure.
"""

from __future__ import annotations

import torch
from torch import fx

aten = torch.ops.aten


# --- FLOPs --------------------------------------------------------------------------------
def _with_mapping(mapping: dict, kwargs: dict):
    from refimpl.flops.counter import FlopCounterMode

    return FlopCounterMode(custom_mapping={**mapping, **kwargs.pop("custom_mapping", {})},
                           **kwargs)


def _raw(formula):
    formula._get_raw = True
    return formula


class OffByOneConvFlops:
    """Counts one FLOP too many for every forward convolution."""

    name = "broken:off-by-one-conv"

    def flop_counter(self, **kwargs):
        from refimpl.flops.formulas import flop_formulas

        conv = flop_formulas[aten.convolution]
        return _with_mapping(
            {aten.convolution: _raw(lambda *a, out_val=None, **k: conv(*a, out_val=out_val,
                                                                      **k) + 1)}, kwargs)


class BackwardBlindFlops:
    """Counts nothing for convolution_backward (a table that forgot the backward op)."""

    name = "broken:backward-blind"

    def flop_counter(self, **kwargs):
        return _with_mapping({aten.convolution_backward: lambda *a, **k: 0}, kwargs)


class TransposedAsForwardFlops:
    """Counts a transposed convolution with the output's spatial size, as a plain one."""

    name = "broken:transposed-as-forward"

    def flop_counter(self, **kwargs):
        from math import prod

        def conv(x, w, *args, out_val=None, **kwargs):
            return 2 * x.shape[0] * prod(out_val.shape[2:]) * prod(w.shape)

        return _with_mapping({aten.convolution: _raw(conv)}, kwargs)


# --- CSE ----------------------------------------------------------------------------------
def _naive_cse(graph: fx.Graph, *, respect_random: bool) -> fx.Graph:
    """Merge nodes with equal (op, target, args, kwargs); optionally skip random ops."""
    new, env, seen = fx.Graph(), {}, {}
    for node in graph.nodes:
        args = fx.node.map_arg((node.args, node.kwargs), lambda n: env[n])
        schema = getattr(node.target, "_schema", None)
        random = schema is not None and getattr(schema, "is_nondeterministic_seeded", False)
        random = random or "rand" in str(node.target) or "dropout" in str(node.target)
        key = None
        if node.op == "call_function" and not (respect_random and random):
            key = (node.target, repr(args))
        if key is not None and key in seen:
            env[node] = seen[key]
            continue
        env[node] = new.node_copy(node, lambda n: env[n])
        if key is not None:
            seen[key] = env[node]
    return new


class RandomMergingCSE:
    """Merges two random ops with the same arguments into one (two draws become one)."""

    name = "broken:cse-merges-random"

    def fx_graph_cse(self, graph):
        return _naive_cse(graph, respect_random=False)


class MutationBlindCSE:
    """Respects random ops but merges across in-place mutations (and merges in-place ops)."""

    name = "broken:cse-mutation-blind"

    def fx_graph_cse(self, graph):
        return _naive_cse(graph, respect_random=True)


# --- partitioner --------------------------------------------------------------------------
class BudgetIgnoringPartitioner:
    """Always plans for budget 1.0, whatever memory_budget says."""

    name = "broken:ignores-budget"

    def compile(self, fn, *, memory_budget=None):
        import refimpl

        return refimpl.compile(fn, memory_budget=1.0)


class FreshDropoutRecompute:
    """Recomputes the whole forward in backward, random ops with fresh randomness."""

    name = "broken:fresh-dropout"

    def compile(self, fn, *, memory_budget=None):
        from torch.utils.checkpoint import checkpoint

        def run(*args, **kwargs):
            return checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=False,
                              **kwargs)

        return run


# --- checkpoint ---------------------------------------------------------------------------
class RngDroppingCheckpoint:
    """refimpl's checkpoint without restoring the RNG state for the recomputation."""

    name = "broken:checkpoint-drops-rng"

    def checkpoint(self, module):
        import refimpl

        return refimpl.checkpoint(module, preserve_rng_state=False)


class NoopCheckpoint:
    """Claims to checkpoint but keeps every activation (no memory saved)."""

    name = "broken:checkpoint-noop"

    def checkpoint(self, module):
        return module


# --- layout -------------------------------------------------------------------------------
class ChannelsLastLeak:
    """refimpl's layout pass, but 4-D outputs are left in channels-last."""

    name = "broken:layout-leaks-channels-last"

    def optimize_layout(self, gm, example_inputs):
        from refimpl.layout import optimize_layout

        gm = optimize_layout(gm, example_inputs)
        out = next(n for n in gm.graph.nodes if n.op == "output")

        def leak(value):
            if not isinstance(value, fx.Node):
                return value
            val = value.meta.get("val", value.meta.get("example_value"))
            if val is None or getattr(val, "dim", lambda: 0)() != 4:
                return value
            with gm.graph.inserting_before(out):
                return gm.graph.call_method("contiguous", (value,),
                                            {"memory_format": torch.channels_last})

        out.args = fx.node.map_aggregate(out.args, leak)
        gm.recompile()
        return gm


# --- no components at all ------------------------------------------------------------------
class NoComponents:
    """Provides nothing: every property of every component must be skipped, none passed."""

    name = "broken:no-components"


#: broken backend -> the component whose properties must catch it.
BROKEN = {
    OffByOneConvFlops: "flops",
    BackwardBlindFlops: "flops",
    TransposedAsForwardFlops: "flops",
    RandomMergingCSE: "cse",
    MutationBlindCSE: "cse",
    BudgetIgnoringPartitioner: "partition",
    FreshDropoutRecompute: "partition",
    RngDroppingCheckpoint: "checkpoint",
    NoopCheckpoint: "checkpoint",
    ChannelsLastLeak: "layout",
}
