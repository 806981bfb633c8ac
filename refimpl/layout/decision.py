"""Whether a graph's convolutions should run channels-last: inductor's rule, on plain data.

The facts come from inductor's ``GraphLowering.decide_layout_opt`` (torch/_inductor/graph.py).
Each conv is classified by its weight ``(out, in/groups, kh, kw)``:

``grouped``  groups > 1 and in/groups > 1 (depthwise convs, in/groups == 1, are not grouped);
``small``    out <= 64 and in/groups <= 64;
``in_out``   2 * out <= in/groups and a kernel more than one row high, ``kh > 1``
             (channel-reducing; inductor reads the weight's dim 2 only, so a 1x3 kernel is
             not in_out and a 3x1 is);
``default``  the rest.

The rule, first match wins:

1. mode ``never``: no; no 2-d conv: no;
2. any conv with a dynamic (symbolic) shape: no (channels-last regresses under dynamic shapes,
   pytorch/pytorch#102670, and eager's output strides are then symbolic);
3. mode ``always``: yes;
4. at least ``max_nodes_per_conv`` graph nodes per conv: no (too few convs to pay for the
   conversions);
5. inference: yes iff ``sum(flops_c * multiplier[class_c]) <= sum(flops_c)``, i.e. the
   FLOP-weighted channels-last cost is no worse than contiguous;
6. training: no if any conv is grouped, or any is in_out, or all are small; else yes.

Invariant: the decision is a pure function of the :class:`ConvSite` list, the node count,
the training flag and the options, so one graph always gets one decision.

refimpl leaves out inductor's CPU shortcut (with mkldnn, every CPU graph with a conv goes
channels-last): the rule above is the same on every device (docs/differences.md, "Layout").
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.layout.options import LayoutOptions


def conv_class(weight_shape: tuple[int, int, int, int], groups: int) -> str:
    """grouped, small, in_out or default (module docstring), first match wins: the one copy
    of inductor's classification that refimpl and its properties read."""
    out_ch, in_ch, kh, _kw = weight_shape
    if groups > 1 and in_ch > 1:
        return "grouped"
    if out_ch <= 64 and in_ch <= 64:
        return "small"
    if 2 * out_ch <= in_ch and kh > 1:
        return "in_out"
    return "default"


@dataclass(frozen=True)
class ConvSite:
    """One 2-d convolution: its node, weight shape, groups, FLOPs (the formula table's
    :func:`refimpl.flops.formulas.conv.conv_flops`, as inductor counts them), and
    dynamic-ness."""

    node: str
    weight_shape: tuple[int, int, int, int]
    groups: int
    flops: int
    dynamic: bool = False

    @property
    def kind(self) -> str:
        """grouped, small, in_out or default (:func:`conv_class`)."""
        return conv_class(self.weight_shape, self.groups)


@dataclass(frozen=True)
class LayoutDecision:
    """The decision, and the facts it rests on, as plain data."""

    channels_last: bool
    reason: str
    is_inference: bool
    convs: tuple[ConvSite, ...]
    node_count: int
    total_flops: int
    weighted_flops: float


def decide(convs: list[ConvSite], node_count: int, is_inference: bool,
           options: LayoutOptions) -> LayoutDecision:
    """Apply the rule of the module docstring."""
    total = sum(c.flops for c in convs)
    weighted = sum(c.flops * options.multipliers[c.kind] for c in convs)
    yes, reason = _rule(convs, node_count, is_inference, options, total, weighted)
    return LayoutDecision(yes, reason, is_inference, tuple(convs), node_count, total, weighted)


def _rule(convs, node_count, is_inference, options, total, weighted) -> tuple[bool, str]:
    if options.mode == "never":
        return False, "mode='never'"
    if not convs:
        return False, "no 2-d convolution in the graph"
    if any(c.dynamic for c in convs):
        return False, "a convolution has dynamic shapes"
    if options.mode == "always":
        return True, "mode='always'"
    if node_count >= options.max_nodes_per_conv * len(convs):
        return False, (f"{node_count} nodes for {len(convs)} conv(s): at least "
                       f"{options.max_nodes_per_conv} per conv")
    if is_inference:
        if weighted <= total:
            return True, f"inference: weighted FLOPs {weighted:.4g} <= {total}"
        return False, f"inference: weighted FLOPs {weighted:.4g} > {total}"
    kinds = [c.kind for c in convs]
    if "grouped" in kinds:
        return False, "training: a grouped convolution with more than one input channel a group"
    if "in_out" in kinds:
        return False, "training: a convolution reduces channels (2 x out <= in)"
    if all(k == "small" for k in kinds):
        return False, "training: every convolution has <= 64 input and output channels"
    return True, "training: no grouped or channel-reducing conv, not all small"
