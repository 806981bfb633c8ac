"""The layout component in its compiler form (``layout_compiler``, the form of the inductor
target on GPU), on CPU: a compiler built here from refimpl's own pass runs the layout
properties, its decisions are their reach, a compiler limited to other devices rejects the
example, and a compiler that breaks its contract is the target's failure."""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from refimpl.expect.layout import converted_values, make_layout_backend
from refimpl.expect.precision import Precision
from refimpl.layout import optimize_layout
from refimpl.oracle import TargetError
from refimpl.oracle.backend import describe, provided_by
from refimpl.properties import test_layout, test_layout_strength
from refimpl.properties.layout_component import (
    LayoutSeen,
    layout_compile,
    layout_converts,
    layout_seen,
)


class PassCompiler:
    """refimpl's layout pass then eager AOTAutograd, deciding as the pass converts."""

    def __init__(self, devices: tuple[str, ...] | None = None) -> None:
        self.decisions: list[bool] = []
        if devices is not None:
            self.layout_devices = devices

    def __call__(self, gm, example_inputs):
        def recording(graph, inputs):
            out = optimize_layout(graph, inputs)
            self.decisions.append(bool(converted_values(out, list(inputs))))
            return out

        return make_layout_backend(recording)(gm, example_inputs)


class CompilerBackend:
    name = "pass-compiler"

    def __init__(self, devices: tuple[str, ...] | None = None) -> None:
        self.devices = devices

    def layout_compiler(self):
        return PassCompiler(self.devices)


class NoDecisions:
    name = "no-decisions"

    def layout_compiler(self):
        return lambda gm, example_inputs: gm.forward  # no 'decisions' list: a broken contract


def wide_net() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(96, 128, 3, padding=1), torch.nn.ReLU()).eval()
    return net, torch.randn(2, 96, 8, 8)


def test_a_compiler_provides_the_layout_component():
    backend = CompilerBackend()
    assert provided_by(backend, "layout") == "layout_compiler"
    assert "layout" in describe(backend)


def test_its_decisions_are_the_reach_and_its_output_is_run():
    net, x = wide_net()
    compiled, decisions = layout_compile(CompilerBackend(), net, "cpu")
    with torch.no_grad():
        expected, actual = net(x), compiled(x)
    assert decisions == [True]  # refimpl's pass converts a wide 3x3 conv in inference
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)
    assert layout_converts(CompilerBackend(), net, x, training=False) is True


class CountingCompiler(PassCompiler):
    """A compiler that also records a node count for each graph it decides on, as inductor's
    does (there the graph it lowers): here its graph's count plus ``extra``, so the count
    differs from the traced module's."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.node_counts: list[int] = []
        self.extra = extra

    def __call__(self, gm, example_inputs):
        self.node_counts.append(len(gm.graph.nodes) + self.extra)
        return super().__call__(gm, example_inputs)


class CountingBackend:
    name = "counting-compiler"

    def __init__(self, extra: int) -> None:
        self.extra = extra
        self.made: list[CountingCompiler] = []

    def layout_compiler(self):
        self.made.append(CountingCompiler(self.extra))
        return self.made[-1]


def test_the_node_count_judged_is_that_of_the_graph_decided_on():
    """For a pass, and for a compiler that records no count: the traced module's (input,
    conv, relu, output: 4 nodes); for a compiler that records one: its own."""
    net, x = wide_net()
    assert len(torch.fx.symbolic_trace(net).graph.nodes) == 4
    assert layout_seen(CompilerBackend(), net, x, training=False) == LayoutSeen(True, 4)
    counting = CountingBackend(100)
    seen = layout_seen(counting, net, x, training=False)
    assert len(counting.made) == 1 and counting.made[0].node_counts[0] >= 104
    assert seen == LayoutSeen(True, counting.made[0].node_counts[0])
    pass_backend = type("PassBackend", (), {"name": "pass",
                                            "optimize_layout": staticmethod(optimize_layout)})()
    assert layout_seen(pass_backend, net, x, training=False) == LayoutSeen(True, 4)


def test_a_compiler_for_other_devices_rejects_the_example():
    """Inside a property (where a rejection belongs): every example is rejected, so
    Hypothesis reports the property unsatisfiable rather than passed."""
    net, _ = wide_net()

    @settings(max_examples=3, database=None, deadline=None)
    @given(st.just("cpu"))
    def on_cpu(device):
        layout_compile(CompilerBackend(devices=("cuda",)), net, device)

    with pytest.raises(Unsatisfiable):
        on_cpu()


def test_a_compiler_without_decisions_is_the_targets_failure():
    net, _ = wide_net()
    with pytest.raises(TargetError, match="list attribute 'decisions'"):
        layout_compile(NoDecisions(), net, "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("prop", [test_layout.test_inference_outputs_match_eager,
                                  test_layout.test_training_outputs_and_gradients_match_eager,
                                  test_layout_strength.test_each_conv_class_decides_as_inductor],
                         ids=lambda p: p.__name__)
def test_the_layout_properties_run_a_compiler(prop):
    fixtures = {"refimpl_backend": CompilerBackend()}
    if "refimpl_precision" in inspect.signature(prop.hypothesis.inner_test).parameters:
        fixtures["refimpl_precision"] = Precision()
    settings(max_examples=4, deadline=None, database=None, derandomize=True)(prop)(**fixtures)
