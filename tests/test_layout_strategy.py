"""Self-checks behind the layout properties: meta-tests of ``refimpl.strategies.nets``.

The properties of the target live in properties/test_layout.py. These check the strategy
itself: valid nets, trainable training nets, every feature generated, and how often the pass
converts (the reach the properties rely on).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import Phase, given, settings

from refimpl.expect.layout import run_channels_last
from refimpl.layout import LayoutOptions, decide_layout
from refimpl.properties.test_layout_nodes import node_cases, on_device
from refimpl.strategies.nets import CHANNELS, HEADS, TAILS, ConvNetSpec, LayerSpec, conv_nets
from tests.finding import find_example


def _train_step(module, x):
    x = x.clone().requires_grad_(True)
    out = module(x)
    out.sum().backward()
    return [out.detach(), x.grad, *[p.grad for p in module.parameters()]]


@settings(max_examples=10)  # a meta-test of the strategy, not a property
@given(spec=conv_nets())
def test_generated_nets_are_valid(spec):
    assert spec.layers[0].kind == "conv" and spec.head in HEADS and spec.tail in TAILS
    channels = spec.in_channels
    for layer in spec.layers:
        if layer.kind == "conv":
            assert channels % layer.groups == 0 and layer.out_channels % layer.groups == 0
            channels = layer.out_channels
        elif layer.kind == "cat":  # a value with itself along channels
            channels *= 2
    with torch.no_grad():
        out = spec.build().eval()(spec.example_input())
    if spec.extra_output:
        out, first = out
        assert first.dim() == 4
    flat = spec.tail in ("view", "mutate_base", "as_strided")
    assert out.dim() == (1 if flat else (2 if spec.head == "linear" else 4))


@settings(max_examples=5)  # a meta-test of the strategy, not a property
@given(spec=conv_nets(training=True))
def test_training_nets_backpropagate_in_eager(spec):
    assert spec.tail in ("none", "view", "as_strided") and not spec.extra_output
    grads = _train_step(spec.build().train(), spec.example_input())
    assert all(g is not None for g in grads[1:])


def test_training_nets_backpropagate_in_eager_at_campaign_scale():
    """Every training net a campaign may draw trains in eager, contiguous and channels-last:
    five examples (above) are too few to reach a write into an output autograd saved, seen
    through a view (``relu``, ``as_strided``, ``relu_``: found by a GPU campaign, where
    eager itself raised and the property failed on the reference, not the backend)."""
    search = settings(database=None, max_examples=400, phases=(Phase.generate,),
                      derandomize=True, deadline=None)

    @search
    @given(spec=conv_nets(training=True))
    def trains(spec):
        module, x = spec.build().train(), spec.example_input()
        run_channels_last(module, x, _train_step)  # the properties' second eager reference
        _train_step(module, x)

    trains()


FIND_BUDGET = 2000


def _decision(spec: ConvNetSpec, training: bool = False) -> bool:
    gm = torch.fx.symbolic_trace(spec.build().train(training))
    options = LayoutOptions(is_inference=not training)
    return decide_layout(gm, [spec.example_input()], options).channels_last


def test_strategy_reaches_every_feature():
    """Each feature the properties rely on is generated (the search fails otherwise)."""
    # the search's first hit is enough: generation only, no shrinking.
    convs = lambda s: [layer for layer in s.layers if layer.kind == "conv"]
    features = {
        "grouped": lambda s: any(c.groups > 1 and c.groups != c.out_channels for c in convs(s)),
        "depthwise": lambda s: any(c.groups > 1 and c.groups * 2 == c.out_channels
                                   for c in convs(s)),
        "wide": lambda s: any(c.out_channels > 64 for c in convs(s)),
        "strided": lambda s: any(c.stride == 2 for c in convs(s)),
        "residual": lambda s: any(layer.kind == "residual" for layer in s.layers),
        "inplace": lambda s: any(layer.kind == "relu_" for layer in s.layers),
        "pool": lambda s: any(layer.kind.endswith("pool") for layer in s.layers),
        "linear head": lambda s: s.head == "linear",
        **{f"tail {t}": (lambda s, t=t: s.tail == t) for t in TAILS},
        "converted in inference": _decision,
        "converted in training": lambda s: _decision(s, training=True),
        "not converted in training": lambda s: not _decision(s, training=True),
    }
    # A search budget (stops at the first hit), not a property's example count.
    for name, predicate in features.items():
        found = find_example(conv_nets(), predicate, max_examples=FIND_BUDGET, shrink=False)
        assert predicate(found), name


def test_most_training_nets_are_converted():
    """Issue 11: most training draws must reach a conversion (8 of 60 did before)."""
    results = []
    search = settings(database=None, max_examples=60, phases=(Phase.generate,),
                      derandomize=True, deadline=None)

    @search
    @given(spec=conv_nets(training=True))
    def draw(spec):
        results.append(_decision(spec, training=True))

    draw()
    assert sum(results) >= 0.55 * len(results), f"{sum(results)} of {len(results)} converted"


def test_gradients_zero_by_construction_are_found():
    """A conv then training-mode batch norm: the conv's bias gradient is zero in exact
    arithmetic (the norm subtracts the bias back out), so the layout property checks it as
    noise rather than by `same` (shrunk from a 300-example campaign, where `same` compared
    two rounding noises and failed)."""
    from refimpl.expect.layout import assert_noise_only, zero_by_construction

    spec = ConvNetSpec(batch=2, in_channels=4, size=5,
                       layers=(LayerSpec("conv", 72, 1, 1, 4), LayerSpec("bn")))
    module = spec.build().train().double()
    x = spec.example_input().double().requires_grad_(True)
    out = module(x)
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64)).sum().backward()
    grads = [x.grad, *[p.grad for p in module.parameters()]]
    # x, conv weight (small, not zero: the norm's eps), conv bias (zero), bn weight, bn bias
    assert zero_by_construction(grads) == [False, False, True, False, False]
    assert_noise_only(torch.full((3,), 1e-6), 1.0, "noise")
    with pytest.raises(AssertionError, match="zero by construction"):
        assert_noise_only(torch.full((3,), 1e-2), 1.0, "not noise")


def test_a_training_conv_after_very_wide_channels_can_be_drawn():
    """Pins a strategy bug a 1,000-example campaign found: after a depthwise conv doubled the
    channels to 2 x 128 or more, no width in CHANNELS was "not halving", and drawing the next
    training conv raised ``InvalidArgument: Cannot sample from a length-zero sequence``."""
    from refimpl.strategies.nets import _conv

    layer = find_example(_conv(256, 8, training=True), lambda layer: True)
    assert layer.kind == "conv" and 2 * layer.out_channels > 256


def test_training_nets_draw_without_error_at_campaign_scale():
    """Drawing alone (no module is built), many times: the 5 and 10 examples of the meta-tests
    above build modules and are too few to reach rare draws such as a wide conv then a doubling
    depthwise one; this is how the bug pinned above would have been caught before a campaign."""
    widest = []
    search = settings(database=None, max_examples=1500, phases=(Phase.generate,),
                      derandomize=True, deadline=None)

    @search
    @given(spec=conv_nets(training=True))
    def draw(spec):
        widths = [layer.out_channels for layer in spec.layers if layer.kind == "conv"]
        widest.append(max(widths))

    draw()
    assert max(widest) >= 2 * max(CHANNELS), "no draw reached 2 x the widest width"


@settings(max_examples=20)  # a meta-test of the layout properties' cases, not a property
@given(case=node_cases())
def test_a_node_case_moves_to_a_device_whole(case):
    """``on_device`` leaves no tensor of the module, the input or the traced graph behind:
    moved to the meta device, every parameter and buffer of both is there (moving the module
    alone left the graph's copy of a ``to_5d`` chain's buffer on the CPU, which a GPU check
    saw as two devices in one add)."""
    _, module, x, gm = on_device(case, "meta")
    left_behind = [name for owner in (module, gm)
                   for name, t in [*owner.named_parameters(), *owner.named_buffers()]
                   if not t.is_meta]
    assert x.is_meta and not left_behind, f"left on their old device: {left_behind}"
