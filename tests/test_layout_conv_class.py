"""refimpl's conv-class rule is torch's: decided against inductor's own ``decide_layout_opt``.

refimpl had two copies of the rule that classes a channel-reducing conv (*in_out*), and they
disagreed on non-square kernels: ``max(kh, kw) > 1`` in the pass, ``kh > 1`` in a property.
inductor (torch/_inductor/graph.py, ``is_in_out_channel``) reads the weight's dim 2 only, the
kernel's height. In training an in_out conv keeps a graph contiguous and a default one
converts it, so one conv of each disputed shape shows which rule a decision follows.

The expected answer is torch's: :func:`refimpl.expect.layout.inductor_decides` runs
``GraphLowering.decide_layout_opt`` on an aten graph of the same convolution.
"""

from __future__ import annotations

import pytest
import torch
from torch import fx, nn

from refimpl.expect.layout import ConvCall, inductor_conv_class, inductor_decides
from refimpl.layout import LayoutOptions, decide_layout
from refimpl.layout.decision import conv_class

#: (out, in, kh, kw): channel-reducing (2 * out <= in) and not small (in > 64), where the
#: two copies disagreed (kh == 1 < kw) and where they agreed (kh > 1, square or not).
DISPUTED = [(80, 160, 1, 3), (64, 256, 1, 3), (80, 160, 1, 5), (100, 200, 1, 2)]
AGREED = [(80, 160, 3, 1), (80, 160, 3, 3), (80, 160, 1, 1), (64, 256, 2, 1)]


def refimpl_converts(out_ch: int, in_ch: int, kh: int, kw: int, training: bool) -> bool:
    """refimpl's decision on one such conv, traced from a module, on a 6x6 image."""
    module = nn.Conv2d(in_ch, out_ch, (kh, kw)).train(training)
    x = torch.randn(1, in_ch, 6, 6, requires_grad=training)
    options = LayoutOptions(is_inference=not training)
    return decide_layout(fx.symbolic_trace(module), [x], options).channels_last


@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("shape", DISPUTED + AGREED, ids=str)
def test_decision_matches_inductor_on_non_square_kernels(shape, training):
    out_ch, in_ch, kh, kw = shape
    expected = inductor_decides([ConvCall((1, in_ch, 6, 6), shape)], is_inference=not training)
    actual = refimpl_converts(out_ch, in_ch, kh, kw, training)
    assert actual == expected, (
        f"conv weight {shape} ({'training' if training else 'inference'}): refimpl "
        f"converts={actual} (class {conv_class(shape, 1)}), inductor's decide_layout_opt "
        f"says {expected}")


def test_the_disputed_shapes_tell_the_two_rules_apart():
    """The cases above would catch either copy: in training inductor converts every disputed
    conv (a default conv) and keeps every kh > 1 reducing conv contiguous (in_out)."""
    assert all(inductor_decides([ConvCall((1, s[1], 6, 6), s)], is_inference=False)
               for s in DISPUTED)
    reducing = [s for s in AGREED if s[2] > 1]
    assert not any(inductor_decides([ConvCall((1, s[1], 6, 6), s)], is_inference=False)
                   for s in reducing)


#: (out, in/groups, kh, kw, groups): one step either side of each class boundary, and
#: depthwise convs (one input channel a group) narrow and wide.
BOUNDARY = [(160, 80, 3, 3, 1), (160, 80, 3, 3, 2), (64, 64, 3, 3, 1), (65, 64, 3, 3, 1),
            (64, 65, 3, 3, 1), (40, 80, 3, 3, 1), (41, 80, 3, 3, 1), (8, 160, 1, 1, 1),
            (8, 160, 2, 1, 1), (8, 160, 1, 2, 1), (96, 1, 3, 3, 96), (32, 1, 3, 3, 32),
            (192, 1, 3, 3, 96), (128, 2, 3, 3, 64)]


def _rule_converts(weight: tuple[int, int, int, int], groups: int, training: bool) -> bool:
    """One conv: inductor's rule on the class :func:`inductor_conv_class` gives it."""
    kind = inductor_conv_class(weight, groups)
    if training:
        return kind == "default"
    return {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}[kind] <= 1


@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("shape", BOUNDARY, ids=str)
def test_the_hand_written_class_decides_as_inductor(shape, training):
    """The layout properties' hand-written classification
    (:func:`refimpl.expect.layout.inductor_conv_class`) against torch's own
    ``decide_layout_opt``, one conv at a time, at every class boundary."""
    *weight, groups = shape
    call = ConvCall((1, weight[1] * groups, 6, 6), tuple(weight), groups=groups)
    expected = inductor_decides([call], is_inference=not training)
    assert _rule_converts(tuple(weight), groups, training) == expected, (
        f"weight {weight} groups={groups}: class {inductor_conv_class(tuple(weight), groups)}"
        f", torch's decide_layout_opt converts={expected}")
