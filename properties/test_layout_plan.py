"""Where an FX layout pass computes channels-last, on small nets whose answer is derived here
by hand: written to kill mutants of refimpl's layout plan and rewrite that the output
properties of test_layout.py cannot see (docs/oracle-strength.md). Restoring eager's strides
too early (after every conv) or too late (letting an eager-layout consumer read a
channels-last tensor) mostly leaves the values alone; what changes is which values are
channels-last, and which outputs alias each other.

The net: a small conv (4 -> 8 channels, 3x3, a 4x4 image; in inference inductor's rule
converts it: a small conv's channels-last cost is 0.783 of contiguous) returning its own
output and the end of a chain of steps drawn from

``relu``   ``torch.relu(h)``: pointwise, so channels-last when ``h`` is;
``relu_``  ``h.relu_()``: in place, so it is ``h`` (and channels-last when ``h`` is);
``scale``  ``2 * h``: pointwise with a number first;
``cat``    ``torch.cat([h, h], 1)``: an eager-layout consumer (refimpl.layout.ops: it only
           ever sees eager strides), so its result is contiguous, as is all that follows;
``clone``  ``h.clone()``: an eager-layout consumer taking ``h`` itself, not in a list
           (a clone of a channels-last tensor would be channels-last).

Expected: the conv and every step before the first ``cat`` or ``clone`` are computed
channels-last, none from it on (a chain of layout-agnostic ops after a conv stays
channels-last, with no round trip, as inductor's pointwise ops follow their input's layout);
the outputs have eager's values and strides, and alias each other exactly when eager's do.

An FX pass's graph is read (:func:`refimpl.expect.layout.converted_values`); a compiler target
(``layout_compiler``) gives no graph to read: skipped, saying so.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import fx, nn

from refimpl.expect.layout import converted_values
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.properties.reach import reach
from refimpl.strategies.nets import devices

STEPS = ("relu_", "relu", "scale", "cat", "clone")
EAGER_LAYOUT = ("cat", "clone")


class ConvChain(nn.Module):
    """A conv, then ``steps``; returns the conv's output and the chain's end."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.steps = steps

    def forward(self, x: torch.Tensor):
        y = self.conv(x)
        h = y
        for step in self.steps:
            if step == "relu_":
                h = h.relu_()
            elif step == "relu":
                h = torch.relu(h)
            elif step == "scale":
                h = 2 * h
            elif step == "cat":
                h = torch.cat([h, h], 1)
            else:
                h = h.clone()
        return y, h


def expected_channels_last(gm: fx.GraphModule, steps: tuple[str, ...]) -> set[str]:
    """The conv's node and the step nodes before the first eager-layout consumer."""
    compute = [n.name for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    conv, step_nodes = compute[0], compute[1:]
    assert len(step_nodes) == len(steps), f"traced {compute} for steps {steps}"
    first_eager = next((i for i, s in enumerate(steps) if s in EAGER_LAYOUT), len(steps))
    return {conv, *step_nodes[:first_eager]}


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@given(steps=st.lists(st.sampled_from(STEPS), min_size=1, max_size=3).map(tuple),
       device=devices())
def test_chain_after_conv_stays_channels_last(refimpl_backend, steps, device):
    """The conv and the steps before an eager-layout consumer compute channels-last, nothing
    after; outputs keep eager's values, strides and aliasing."""
    if provided_by(refimpl_backend, "layout") == "layout_compiler":
        pytest.skip("a layout compiler gives no FX graph whose values could be read")
    torch.manual_seed(0)
    module = ConvChain(steps).eval().to(device)
    x = torch.randn(1, 4, 4, 4, device=device)
    gm = fx.symbolic_trace(module)
    names = {n.name for n in gm.graph.nodes}
    expected = expected_channels_last(gm, steps)
    with torch.no_grad():
        eager = module(x.clone())
        out = component(refimpl_backend, "optimize_layout")(gm, [x])
        converted = set(converted_values(out, [x])) & names
        compiled = out(x.clone())
    reach(len(expected) > 1)  # a step after the conv computes channels-last
    assert converted == expected, (
        f"{refimpl_backend.name} optimize_layout computes {sorted(converted)} channels-last, "
        f"expected {sorted(expected)} (steps {steps})")
    for what, e, c in zip(("conv output", "chain end"), eager, compiled):
        torch.testing.assert_close(c, e, msg=lambda m, w=what: f"{w} (steps {steps}): {m}")
        assert c.stride() == e.stride(), f"{what}: strides {c.stride()} != eager {e.stride()}"
    assert shares_storage(*compiled) == shares_storage(*eager), (
        f"outputs alias each other: compiled {shares_storage(*compiled)}, eager "
        f"{shares_storage(*eager)} (steps {steps})")
