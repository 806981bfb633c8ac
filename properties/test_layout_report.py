"""What a layout pass reports it decided and planned, through the backend under test, against
what eager's own tensors say (:mod:`refimpl.expect.layout_report`,
:mod:`refimpl.expect.layout_nodes`).

refimpl's pass attaches its report to the graph it returns, ``gm.meta["refimpl_layout"]``
(a ``LayoutResult``, :mod:`refimpl.layout`): the decision (the conv sites with their
weights, groups, FLOPs and classes, the node count, the training flag, the FLOP totals, the
verdict), and, when it converts, the plain facts of every node and the plan. A user reads
that report to learn why a graph was or was not converted, so every figure in it is checked
exactly:

* each conv site: its node, weight shape, groups, FLOPs (counted by definition), class
  (inductor's rule, written by hand) and that it is static, in graph order;
* the node count, the inference flag (grad mode off, or nothing that requires grad), the
  FLOP total and the FLOP-weighted total, and the verdict by inductor's rule;
* when converted, each node's facts (op family, tensor inputs, first input, 4-d-ness,
  strides on dims of size > 1, alias root, identity alias, opacity) and the plan by name:
  what computes channels-last, which convs get a converted input, what is restored at its
  definition, before which consumer, and each output's alias root; when not, neither.

The graphs: those of test_layout_nodes.py (random nets on contiguous and laid-out inputs,
chains of every op family in each call form, a conv's output viewed and written), two
``torch.conv2d`` calls in each call form (all positional, groups by keyword, weight by
keyword, groups left out, input by keyword, which is no conv site), and nets whose only conv
is none a 2-d pass converts. The example values come as the graph gives them: none (the pass
propagates fake tensors itself), ``meta["val"]`` (make_fx) or ``meta["example_value"]``
(dynamo). A node the graph gives no value is opaque: the input, where a case hides it, and,
before torch 2.13, every plain int (``size(1)`` and arithmetic on it), which FakeTensorProp
does not record. Grad mode is off, or on with the input, the parameters or nothing requiring
grad.

The pass leaves the example values the graph came with as they were: each original node
carries the same objects under the same keys afterwards, so a graph given none carries none
(a pass that propagates values itself takes them off again; left on the graph, a second
read takes them for a tracer's and a node they miss for an opaque one, which made refimpl's
report call ``size()`` nodes opaque on torch 2.10, docs/findings.md, "Layout").

A backend that attaches no such report (torch's own passes) is skipped, saying so; so is a
compiler form.

Reach: the pass converted the graph (the facts and the plan were checked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, reject
from hypothesis import strategies as st
from torch import fx, nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from refimpl.expect.layout_nodes import eager_nodes, layout_strides, planned_layout
from refimpl.expect.layout_report import (
    INDUCTOR_COSTS,
    eager_conv_sites,
    eager_facts,
    inductor_rule,
    without_values,
)
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach
from refimpl.properties.test_layout_nodes import (
    NoConvSite,
    _meets_the_open_stride_bug,
    node_cases,
    on_device,
)
from refimpl.strategies.nets import devices

REPORT_KEY = "refimpl_layout"
CALL_FORMS = ("positional", "groups keyword", "weight keyword", "groups left out",
              "input keyword")
GRAD_MODES = ("off", "off", "input", "parameters", "nothing")
EXAMPLE_VALUES = ("none", "val", "example_value")
#: where tracers store a node's example value: make_fx, dynamo
EXAMPLE_KEYS = ("val", "example_value")


class FunctionalConvs(nn.Module):
    """Two ``torch.conv2d`` calls (3x3 then 1x1, ``channels`` wide, ``groups`` groups) in one
    call form of :data:`CALL_FORMS`, a relu between, and a residual add."""

    def __init__(self, form: str, channels: int, groups: int) -> None:
        super().__init__()
        self.form, self.groups = form, groups
        group_inputs = channels // groups
        self.w1 = nn.Parameter(torch.randn(channels, group_inputs, 3, 3) / 8)
        self.w2 = nn.Parameter(torch.randn(channels, group_inputs, 1, 1) / 8)
        self.b1 = nn.Parameter(torch.randn(channels) / 8)

    def conv(self, x, weight, bias, padding: int):
        groups = self.groups
        if self.form == "positional":
            return torch.conv2d(x, weight, bias, 1, padding, 1, groups)
        if self.form == "groups keyword":
            return torch.conv2d(x, weight, bias, 1, padding, groups=groups)
        if self.form == "weight keyword":
            return torch.conv2d(x, weight=weight, bias=bias, padding=padding, groups=groups)
        if self.form == "groups left out":
            return torch.conv2d(x, weight, bias, 1, padding)
        return torch.conv2d(input=x, weight=weight, bias=bias, padding=padding, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x, self.w1, self.b1, 1))
        return self.conv(h, self.w2, None, 0) + h


NO_CONV_SITES = ("conv1d", "conv3d", "unbatched", "keyword", "reflect", "linear")


def call_form_graphs(channels: int, groups: int, forms: tuple[str, ...],
                     no_conv: tuple[str, ...]) -> list[tuple]:
    """(what, module, input, graph) for the call forms ``forms`` of :class:`FunctionalConvs`
    (``groups`` where the form passes it) and the :class:`NoConvSite` kinds ``no_conv``."""
    torch.manual_seed(0)
    cases = []
    for form in forms:
        module = FunctionalConvs(form, channels, 1 if form == "groups left out" else groups)
        cases.append((f"FunctionalConvs({form!r}, {channels}, {module.groups})", module.eval(),
                      torch.randn(2, channels, 5, 5)))
    for kind in no_conv:
        module = NoConvSite(kind).eval()
        cases.append((f"NoConvSite({kind!r})", module, module.example_input()))
    return [(what, module, x, fx.symbolic_trace(module)) for what, module, x in cases]


def give_example_values(gm: fx.GraphModule, inputs: list, where: str) -> None:
    """Store fake example values on every node under ``meta[where]`` (``val``: as make_fx
    does; ``example_value``: as dynamo does); ``none`` leaves the graph bare."""
    if where == "none":
        return
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    if where == "example_value":
        for node in gm.graph.nodes:
            if "val" in node.meta:
                node.meta["example_value"] = node.meta.pop("val")


def strided_copy(t: torch.Tensor) -> torch.Tensor:
    """A fresh copy of ``t`` with its strides (``clone`` makes a sliced tensor dense)."""
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t.detach())


def set_grad(module: nn.Module, x: torch.Tensor, grad: str) -> tuple[torch.Tensor, bool]:
    """Make ``grad`` hold (:data:`GRAD_MODES`); returns the input to pass and whether the
    pass must treat the graph as inference (grad off, or nothing requires grad)."""
    module.requires_grad_(grad == "parameters")
    if grad == "input":
        x = x.detach().clone().requires_grad_(True)
    return x, grad in ("off", "nothing")


def check_decision(decision, sites, node_count: int, inference: bool, where: str) -> None:
    """The decision's figures and verdict (property docstring)."""
    reported = [(c.node, tuple(c.weight_shape), c.groups, c.flops, c.kind, c.dynamic)
                for c in decision.convs]
    expected = [(s.node, s.weight_shape, s.groups, s.flops, s.kind, False) for s in sites]
    assert reported == expected, f"conv sites {reported}, eager's {expected} ({where})"
    total = sum(s.flops for s in sites)
    weighted = sum(s.flops * INDUCTOR_COSTS[s.kind] for s in sites)
    figures = (decision.node_count, decision.is_inference, decision.total_flops)
    assert figures == (node_count, inference, total), (
        f"(node count, inference, FLOPs) {figures}, expected {(node_count, inference, total)}"
        f" ({where})")
    assert math.isclose(decision.weighted_flops, weighted, rel_tol=1e-12, abs_tol=0.0), (
        f"weighted FLOPs {decision.weighted_flops}, expected {weighted} ({where})")
    verdict = inductor_rule(sites, node_count, inference)
    assert decision.channels_last == verdict, (
        f"channels_last={decision.channels_last} ({decision.reason!r}), inductor's rule "
        f"says {verdict} ({where})")


def check_facts(facts, record, hidden: frozenset[str], where: str) -> None:
    """Each node's facts against eager's (strides on dims of size > 1: a dim of size 1
    places nothing, and fake tensors may give it another stride); the nodes ``hidden``
    have no value and are opaque."""
    expected = eager_facts(record, hidden)
    assert [f.name for f in facts] == [e.name for e in expected], (
        f"facts for nodes {[f.name for f in facts]} ({where})")
    shapes = {n.name: n.shape for n in record}
    for fact, want in zip(facts, expected):
        got = (fact.op, fact.kind, fact.inputs, fact.first_input, fact.dense_4d,
               fact.alias_root, fact.identity_alias, fact.opaque, fact.stride is None)
        wanted = (want.op, want.kind, want.inputs, want.first_input, want.dense_4d,
                  want.alias_root, want.identity_alias, want.opaque, want.stride is None)
        assert got == wanted, f"{fact.name}: facts {got}, eager's {wanted} ({where})"
        if want.stride is not None:
            shape = shapes[want.name]
            assert layout_strides(shape, fact.stride) == layout_strides(shape, want.stride), (
                f"{fact.name}: strides {fact.stride}, eager's {want.stride} ({where})")


def check_plan(plan, record, where: str) -> None:
    """The plan by name against the planning rule on eager's record."""
    planned = planned_layout(record)
    got = (plan.channels_last, plan.convert_inputs, plan.restore_at_definition,
           plan.restore_before, plan.restore_outputs)
    wanted = (planned.channels_last, planned.convert_names,
              planned.restore_at_definition_names, planned.restore_before_names,
              planned.restore_output_roots)
    names = ("channels_last", "convert_inputs", "restore_at_definition", "restore_before",
             "restore_outputs")
    for name, g, w in zip(names, got, wanted):
        assert g == w, f"plan.{name} = {g}, the rule's {w} ({where})"


@dataclass
class Prepared:
    """One graph ready for its report to be checked: what eager's values say of it."""

    what: str
    gm: fx.GraphModule
    x: torch.Tensor
    record: list
    sites: list
    node_count: int
    inference: bool
    where: str
    hidden: frozenset[str] = frozenset()

    @property
    def converts(self) -> bool:
        """Inductor's rule on eager's conv sites."""
        return inductor_rule(self.sites, self.node_count, self.inference)


def bare_nodes(gm: fx.GraphModule, meta: str) -> frozenset[str]:
    """The nodes (output aside) a graph given example values under ``meta[meta]`` gives none:
    a pass must take them for opaque. FakeTensorProp records no plain int before torch 2.13
    (a ``size(1)`` node, and arithmetic on it), so on those releases they are among them."""
    if meta == "none":
        return frozenset()
    return frozenset(n.name for n in gm.graph.nodes if n.op != "output" and meta not in n.meta)


def prepare(case, meta: str, grad: str, device: str, hide_input: bool = False) -> Prepared:
    """Record eager's values of ``case``'s graph, then give it example values as ``meta``
    says (with ``hide_input`` and example values, none for the graph's input, as dynamo
    leaves a node it cannot describe) and make ``grad`` hold. The nodes left without a
    value (:func:`bare_nodes`) are hidden: eager's record as the pass sees them."""
    what, module, x, gm = on_device(case, device)
    x, inference = set_grad(module, x, grad)
    record = eager_nodes(gm, [strided_copy(x)])
    give_example_values(gm, [strided_copy(x)], meta)
    if hide_input and meta != "none":
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                node.meta.pop(meta)
    hidden = bare_nodes(gm, meta)
    record = without_values(record, hidden)
    sites = eager_conv_sites(gm, record)
    where = (f"reproduce with: {what}, example values {meta!r}, grad {grad!r}, input "
             f"{'without' if hide_input and meta != 'none' else 'with'} a value")
    return Prepared(what, gm, x, record, sites, len(gm.graph.nodes), inference, where, hidden)


def given_values(gm: fx.GraphModule) -> dict[str, dict[str, object]]:
    """node -> the example values it carries, by meta key (:data:`EXAMPLE_KEYS`)."""
    return {n.name: {k: n.meta[k] for k in EXAMPLE_KEYS if k in n.meta} for n in gm.graph.nodes}


def check_values_kept(given: dict, gm: fx.GraphModule, where: str) -> None:
    """Each node the graph came with carries the very example values it came with (a pass
    that propagates values itself takes them off again: left there, they would pass for a
    tracer's, and a later pass would take a node they miss for one dynamo left bare)."""
    left = given_values(gm)
    changed = {name: (sorted(kept), sorted(left[name])) for name, kept in given.items()
               if name in left and (kept.keys() != left[name].keys() or any(
                   left[name][k] is not v for k, v in kept.items()))}
    assert not changed, (f"the pass changed the example values the graph came with, node: "
                         f"(meta keys before, after): {changed} ({where})")


def check_report(backend, case: Prepared, grad: str) -> None:
    """The module docstring's checks on one prepared graph."""
    given = given_values(case.gm)
    with torch.set_grad_enabled(grad != "off"):
        out = component(backend, "optimize_layout")(case.gm, [case.x])
    report = out.meta.get(REPORT_KEY)
    if report is None:
        pytest.skip(f"backend {backend.name!r} attaches no report (gm.meta[{REPORT_KEY!r}])")
    check_values_kept(given, out, case.where)
    check_decision(report.decision, case.sites, case.node_count, case.inference, case.where)
    if not report.decision.channels_last:
        assert report.plan is None and report.facts is None, (
            f"a graph left alone has a plan {report.plan} or facts ({case.where})")
        return
    check_facts(report.facts, case.record, case.hidden, case.where)
    check_plan(report.plan, case.record, case.where)


@given(device=devices())
def test_a_pass_refuses_what_is_not_a_graph_and_its_inputs(refimpl_backend, device):
    """A pass given a module that is not an ``fx.GraphModule``, or example inputs that are
    not a list or tuple, refuses with a TypeError or ValueError naming the argument (never a
    silent fallback). Reach: always (the refusals are the case)."""
    takes_graphs(refimpl_backend)
    run = component(refimpl_backend, "optimize_layout")
    torch.manual_seed(0)
    module = FunctionalConvs("positional", 8, 1).eval().to(device)
    x = torch.randn(1, 8, 4, 4, device=device)
    reach(True)
    for args, name in (((module, [x]), "gm"), ((fx.symbolic_trace(module), x),
                                                  "example_inputs")):
        try:
            run(*args)
        except TargetError as exc:
            why = exc.__cause__
            assert isinstance(why, (TypeError, ValueError)) and name in str(why), (
                f"{refimpl_backend.name}: a bad {name} raised {why!r}, expected a TypeError "
                f"or ValueError naming {name}")
        else:
            raise AssertionError(f"{refimpl_backend.name}: optimize_layout took a bad {name}")


def takes_graphs(backend) -> None:
    """Skip a compiler form: it gives no FX graph to carry a report."""
    if provided_by(backend, "layout") == "layout_compiler":
        pytest.skip("a layout compiler gives no FX graph to carry a report")


@given(case=node_cases(), meta=st.sampled_from(EXAMPLE_VALUES),
       grad=st.sampled_from(GRAD_MODES), device=devices())
def test_the_report_says_what_eager_values_say(refimpl_backend, case, meta, grad, device):
    """The module docstring's checks on a graph of test_layout_nodes.py. Reach: inductor's
    rule converts it (so the facts and the plan were checked)."""
    takes_graphs(refimpl_backend)
    if _meets_the_open_stride_bug(case[3]):
        reject()
    prepared = prepare(case, meta, grad, device)
    reach(prepared.converts)
    check_report(refimpl_backend, prepared, grad)


@given(channels=st.sampled_from((8, 96)), groups=st.sampled_from((1, 2, 8)),
       forms=st.permutations(CALL_FORMS), no_conv=st.permutations(NO_CONV_SITES),
       meta=st.sampled_from(EXAMPLE_VALUES), grad=st.sampled_from(GRAD_MODES),
       hide_input=st.booleans(), device=devices())
def test_the_report_of_every_call_form(refimpl_backend, channels, groups, forms, no_conv, meta,
                                       grad, hide_input, device):
    """The module docstring's checks, in each example, on three call forms of
    ``torch.conv2d`` (:class:`FunctionalConvs`, with ``groups`` groups where the form passes
    them; the first three of a drawn order) and on two nets whose only conv is no 2-d conv
    site (:class:`NoConvSite`, the first two of a drawn order of its kinds); with
    ``hide_input``, the graph's input carries no example value (so the first conv is no
    site: its input's shape is unknown). Reach: inductor's rule converts one of them."""
    takes_graphs(refimpl_backend)
    graphs = call_form_graphs(channels, groups, forms[:3], no_conv[:2])
    cases = [prepare(case, meta, grad, device, hide_input) for case in graphs]
    reach(any(case.converts for case in cases))
    for case in cases:
        check_report(refimpl_backend, case, grad)
