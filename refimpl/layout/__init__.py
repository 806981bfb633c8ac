"""Convolution layout optimisation (channels-last) that keeps eager semantics.

``optimize_layout(gm, example_inputs)`` is an FX pass over a dynamo graph (torch-level ops,
before AOTAutograd); refimpl's dynamo backend applies it first. It

1. reads plain facts off the graph's example values (:mod:`.facts`);
2. decides, with inductor's documented heuristic, whether channels-last pays
   (:mod:`.decision`; the answer and its reason are a :class:`LayoutDecision`);
3. if so, plans which nodes compute channels-last and where layouts convert (:mod:`.plan`),
   and inserts the conversions (:mod:`.rewrite`).

Guarantees: graph outputs have exactly eager's strides; views and in-place mutations of conv
outputs and of their bases behave as in eager; ops outside the layout-agnostic table
(:mod:`.ops`: views, linear, losses such as ``nll_loss2d`` and its backward) only ever see
eager strides; graphs with dynamic-shaped convs are left alone. The result is attached to
the graph as ``gm.meta["refimpl_layout"]`` (a :class:`LayoutResult`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import fx

from refimpl.layout.decision import ConvSite, LayoutDecision, decide
from refimpl.layout.facts import (
    NodeFact,
    conv_sites,
    example_values,
    infer_is_inference,
    node_facts,
)
from refimpl.layout.options import LayoutOptions
from refimpl.layout.plan import LayoutPlan, plan_layout
from refimpl.layout.rewrite import apply_plan, restore_strides, to_channels_last

META_KEY = "refimpl_layout"

__all__ = ["META_KEY", "ConvSite", "LayoutDecision", "LayoutOptions", "LayoutPlan",
           "LayoutResult", "decide_layout", "optimize_layout", "restore_strides",
           "to_channels_last"]


@dataclass(frozen=True)
class LayoutResult:
    """What the pass decided and did: the decision, and, when converting, the plain facts of
    each node the plan was made from (:class:`~refimpl.layout.facts.NodeFact`, graph order)
    and the plan (both None when not converting)."""

    decision: LayoutDecision
    plan: LayoutPlan | None
    facts: tuple[NodeFact, ...] | None = None


def _check(gm: Any, example_inputs: Any, options: Any) -> LayoutOptions:
    if not isinstance(gm, fx.GraphModule):
        raise TypeError(f"gm must be a torch.fx.GraphModule, got {type(gm).__name__}")
    if not isinstance(example_inputs, (list, tuple)):
        raise TypeError("example_inputs must be a list or tuple of the graph's inputs, got "
                        f"{type(example_inputs).__name__}")
    options = LayoutOptions() if options is None else options
    if not isinstance(options, LayoutOptions):
        raise TypeError(f"options must be a LayoutOptions, got {type(options).__name__}")
    return options


def decide_layout(gm: fx.GraphModule, example_inputs: list[Any],
                  options: LayoutOptions | None = None) -> LayoutDecision:
    """The decision alone (no rewrite): deterministic for a given graph and options."""
    options = _check(gm, example_inputs, options)
    values = example_values(gm, list(example_inputs))
    is_inference = options.is_inference
    if is_inference is None:
        is_inference = infer_is_inference(gm, list(example_inputs))
    return decide(conv_sites(gm, values), len(gm.graph.nodes), is_inference, options)


def optimize_layout(gm: fx.GraphModule, example_inputs: list[Any],
                    options: LayoutOptions | None = None) -> fx.GraphModule:
    """Run convs channels-last where the decision says it pays; eager semantics kept.

    Rewrites ``gm`` in place and returns it, with ``gm.meta["refimpl_layout"]`` set.
    """
    options = _check(gm, example_inputs, options)
    decision = decide_layout(gm, example_inputs, options)
    plan, facts = None, None
    if decision.channels_last:
        facts = node_facts(gm, example_values(gm, list(example_inputs)))
        plan = plan_layout(facts)
        apply_plan(gm, facts, plan)
    gm.meta[META_KEY] = LayoutResult(decision, plan, tuple(facts) if facts else None)
    return gm
