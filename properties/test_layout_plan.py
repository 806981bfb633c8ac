"""Where an FX layout pass computes channels-last, on small nets whose answer is derived here
by hand: written to kill mutants of refimpl's layout plan and rewrite that the output
properties of test_layout.py cannot see (docs/oracle-strength.md). Restoring eager's strides
too early (after every conv) or too late (letting an eager-layout consumer read a
channels-last tensor) mostly leaves the values alone; what changes is which values are
channels-last, and which outputs alias each other.

The net: a small conv (4 -> 8 channels, 3x3, a 4x4 image; in inference inductor's rule
converts it: a small conv's channels-last cost is 0.783 of contiguous) returning its own
output and the end of a chain of steps drawn from every op family a channels-last value
flows through, in each call form a graph holds (:data:`STEPS`):

*pointwise*  activations (``torch.relu``, ``F.silu``, ``F.gelu``, ``h.sigmoid()``,
             ``torch.tanh``, ``nn.ReLU()``), arithmetic with a number or with itself
             (``2 * h``, ``torch.sub``, ``h.mul``, ``h + h``), batch norm and pooling
             (``nn.BatchNorm2d``, ``nn.MaxPool2d``, ``F.avg_pool2d``,
             ``F.adaptive_avg_pool2d``): channels-last when ``h`` is;
*in place*   ``h.relu_()``, ``h.mul_``, ``h.add_``, ``h.sub_``, ``F.relu(h, True)``,
             ``F.hardtanh(h, -2.0, 2.0, True)``, ``nn.ReLU(inplace=True)``,
             ``nn.SiLU(inplace=True)``: the result is ``h`` (and channels-last when ``h`` is);
*eager layout*  ``torch.cat([h, h])`` and ``h.clone()``: eager-layout consumers
             (refimpl.layout.ops: they only ever see eager strides), so their result is
             contiguous, as is all that follows (a clone of a channels-last tensor would be
             channels-last).

The functions dynamo keeps as calls (``F.relu``, ``F.silu``, ``F.hardtanh``,
``F.adaptive_avg_pool2d``) stay calls in the traced graph, with their arguments as written
(dynamo records ``F.relu(h, True)`` with ``inplace`` by position).

Expected: the conv and every step before the first eager-layout consumer are computed
channels-last, none from it on (a chain of layout-agnostic ops after a conv stays
channels-last, with no round trip, as inductor's pointwise ops follow their input's layout);
the outputs have eager's values and strides, and alias each other exactly when eager's do.

An FX pass's graph is read (:func:`refimpl.expect.layout.converted_values`); a compiler target
(``layout_compiler``) gives no graph to read: skipped, saying so.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import fx, nn

from refimpl.expect.layout import converted_values
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.properties.reach import reach
from refimpl.strategies.nets import devices

#: step -> what it does to ``h`` (module steps use the module the chain holds for them).
STEPS = {
    "relu": lambda m, h: torch.relu(h),
    "silu": lambda m, h: F.silu(h),
    "gelu": lambda m, h: F.gelu(h),
    "sigmoid": lambda m, h: h.sigmoid(),
    "tanh": lambda m, h: torch.tanh(h),
    "ReLU": lambda m, h: m.relu(h),
    "scale": lambda m, h: 2 * h,
    "sub": lambda m, h: torch.sub(h, 1.0),
    "mul": lambda m, h: h.mul(0.5),
    "add": lambda m, h: h + h,
    "BatchNorm2d": lambda m, h: m.bn(h),
    "MaxPool2d": lambda m, h: m.max_pool(h),
    "avg_pool2d": lambda m, h: F.avg_pool2d(h, 3, 1, 1),
    "adaptive_avg_pool2d": lambda m, h: F.adaptive_avg_pool2d(h, 4),
    "relu_": lambda m, h: h.relu_(),
    "mul_": lambda m, h: h.mul_(0.5),
    "add_": lambda m, h: h.add_(1.0),
    "sub_": lambda m, h: h.sub_(h, alpha=0.5),
    "F.relu(h, True)": lambda m, h: F.relu(h, True),
    "F.hardtanh(h, -2.0, 2.0, True)": lambda m, h: F.hardtanh(h, -2.0, 2.0, True),
    "ReLU(inplace=True)": lambda m, h: m.relu_module_(h),
    "SiLU(inplace=True)": lambda m, h: m.silu_module_(h),
    "cat": lambda m, h: torch.cat([h, h]),
    "clone": lambda m, h: h.clone(),
}
EAGER_LAYOUT = ("cat", "clone")
FLOWING = tuple(sorted(s for s in STEPS if s not in EAGER_LAYOUT))
#: the functions dynamo records as calls (not traced into), kept so by the tracer here.
KEPT_CALLS = (F.relu, F.silu, F.hardtanh, F.adaptive_avg_pool2d)


class ConvChain(nn.Module):
    """A conv, then ``steps`` (:data:`STEPS`); returns the conv's output and the chain's end."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.relu, self.bn, self.max_pool = nn.ReLU(), nn.BatchNorm2d(8), nn.MaxPool2d(3, 1, 1)
        self.relu_module_, self.silu_module_ = nn.ReLU(inplace=True), nn.SiLU(inplace=True)
        self.steps = steps

    def forward(self, x: torch.Tensor):
        y = self.conv(x)
        h = y
        for step in self.steps:
            h = STEPS[step](self, h)
        return y, h


def trace(module: nn.Module) -> fx.GraphModule:
    """``module``'s graph as dynamo records it: :data:`KEPT_CALLS` kept as calls, and an
    ``inplace`` argument by position (the tracer records it by keyword; dynamo records
    ``F.relu(h, True)`` as written)."""
    graph = fx.Tracer(autowrap_functions=KEPT_CALLS).trace(module)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in KEPT_CALLS and node.kwargs:
            bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)
            bound.apply_defaults()
            node.args, node.kwargs = tuple(bound.arguments.values()), {}
    return fx.GraphModule(module, graph)


def expected_channels_last(gm: fx.GraphModule, steps: tuple[str, ...]) -> set[str]:
    """The conv's node and the step nodes before the first eager-layout consumer."""
    compute = [n.name for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    conv, step_nodes = compute[0], compute[1:]
    assert len(step_nodes) == len(steps), f"traced {compute} for steps {steps}"
    first_eager = next((i for i, s in enumerate(steps) if s in EAGER_LAYOUT), len(steps))
    return {conv, *step_nodes[:first_eager]}


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@st.composite
def chains(draw) -> tuple[str, ...]:
    """Up to every layout-agnostic step once, in a drawn order (so each family appears in
    about half the examples), with an eager-layout consumer at a drawn place, or none."""
    order = draw(st.permutations(FLOWING))
    flowing = order[:draw(st.integers(1, len(FLOWING)))]
    eager = draw(st.sampled_from([None, *EAGER_LAYOUT]))
    if eager is None:
        return tuple(flowing)
    at = draw(st.integers(0, len(flowing)))
    return (*flowing[:at], eager, *flowing[at:])


@given(steps=chains(), device=devices())
def test_chain_after_conv_stays_channels_last(refimpl_backend, steps, device):
    """The conv and the steps before an eager-layout consumer compute channels-last, nothing
    after; outputs keep eager's values, strides and aliasing."""
    if provided_by(refimpl_backend, "layout") == "layout_compiler":
        pytest.skip("a layout compiler gives no FX graph whose values could be read")
    torch.manual_seed(0)
    module = ConvChain(steps).eval().to(device)
    x = torch.randn(1, 4, 4, 4, device=device)
    gm = trace(module)
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


#: views a net takes of a conv's (channels-last) output: each reads the conv's storage.
VIEWS = {
    "view(-1)": lambda h: h.view(-1),
    "h[:, :4]": lambda h: h[:, :4],
    "transpose(2, 3)": lambda h: h.transpose(2, 3),
    "permute(0, 2, 3, 1)": lambda h: h.permute(0, 2, 3, 1),
    "unsqueeze(0)": lambda h: h.unsqueeze(0),
    "as_strided": lambda h: h.as_strided((8, 8), (8, 1)),
}
#: in-place ops that write through a view or its base (refimpl.layout.ops: in place).
WRITES = {"mul_": lambda t: t.mul_(2.0), "add_": lambda t: t.add_(1.0),
          "relu_": lambda t: t.relu_()}


class ViewedConv(nn.Module):
    """A small conv whose output ``h`` is viewed (``view``, :data:`VIEWS`), then written in
    place (``write``, :data:`WRITES`) through the base or the view, before or after the view
    is taken; returns the view and ``h``, which alias each other in eager."""

    def __init__(self, view: str, write: str, target: str, order: str) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.view, self.write, self.target, self.order = view, write, target, order

    def forward(self, x: torch.Tensor):
        h = self.conv(x)
        if self.order == "write first":
            WRITES[self.write](h)
        v = VIEWS[self.view](h)
        if self.order == "view first":
            WRITES[self.write](v if self.target == "view" else h)
        return v, h


@given(view=st.sampled_from(sorted(VIEWS)), write=st.sampled_from(sorted(WRITES)),
       target=st.sampled_from(["base", "view"]),
       order=st.sampled_from(["view first", "view first", "write first"]), device=devices())
def test_views_and_writes_of_a_conv_output_alias_as_in_eager(refimpl_backend, view, write,
                                                             target, order, device):
    """A view of a conv's output, written in place through the view or its base, before or
    after the view is taken (:class:`ViewedConv`): both outputs have eager's values and
    strides, and alias each other as in eager (a pass that lets a view read a converted copy
    of its base loses the write; one that views a channels-last base gets other strides).
    Reach: the pass converted (the conv runs channels-last)."""
    if provided_by(refimpl_backend, "layout") == "layout_compiler":
        pytest.skip("a layout compiler gives no FX graph whose values could be read")
    torch.manual_seed(0)
    module = ViewedConv(view, write, target, order).eval().to(device)
    x = torch.randn(1, 4, 4, 4, device=device)
    where = f"{view}, {write} through the {target}, {order}"
    with torch.no_grad():
        eager = module(x.clone())
        out = component(refimpl_backend, "optimize_layout")(fx.symbolic_trace(module), [x])
        reach(bool(converted_values(out, [x])))
        compiled = out(x.clone())
    for what, e, c in zip(("view", "base"), eager, compiled):
        torch.testing.assert_close(c, e, msg=lambda m, w=what: f"{w} ({where}): {m}")
        assert c.stride() == e.stride(), f"{what}: strides {c.stride()} != eager {e.stride()}"
    assert shares_storage(*compiled) == shares_storage(*eager), (
        f"outputs alias each other: compiled {shares_storage(*compiled)}, eager "
        f"{shares_storage(*eager)} ({where})")
