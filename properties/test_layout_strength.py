"""Whether the backend's layout pass converts a net, against inductor's rule derived here by
hand: written to kill mutants of refimpl's layout decision that the output properties of
test_layout.py cannot see (docs/oracle-strength.md). A wrong decision still gives eager's
outputs and strides (only speed changes), so only a property about the decision catches it.

The rule (``GraphLowering.decide_layout_opt`` in torch/_inductor/graph.py, without its
mkldnn-on-CPU shortcut, as refimpl documents in docs/differences.md): each 2-d conv is
classified by its weight ``(out, in/groups, kh, kw)``: *grouped* (groups > 1 and
in/groups > 1), else *small* (out <= 64 and in/groups <= 64), else *in_out*
(2 * out <= in/groups and kh > 1), else *default*: written by hand in
:func:`refimpl.expect.layout.inductor_conv_class` (nothing of refimpl's pass), which
tests/test_layout_conv_class.py holds to torch's own ``decide_layout_opt``. A graph with at least
300 nodes per conv is left alone (counted on the graph the backend decided on: the traced
module for a pass, AOTAutograd's graph for inductor, whose lifted parameters make it
larger). Inference: convert iff the FLOP-weighted cost ``sum(flops * multiplier[class])``
is at most ``sum(flops)``, with inductor's measured multipliers below. Training: never with
a grouped or an in_out conv, nor when every conv is small; else convert. Conv FLOPs: the
formula table's (:func:`refimpl.flops.formulas.conv.conv_flops`).

Whether the pass converted is read off the values its graph computes
(``refimpl.expect.layout.converted_values``), not off its report; for a compiler (the
``inductor`` target on GPU) it is the compiler's own decision on the graph it compiled
(``refimpl.properties.layout_component.layout_converts``), so there the properties set
inductor's decision against the rule as refimpl states it. Nets run on each device this
machine offers.

A net whose first conv reads one channel or a 1x1 image cannot show a conversion
(channels-last and contiguous are then the same order, and the convs after it inherit
contiguous outputs): filtered out.

The last property draws one conv of each class, in inference and training (conv_nets rarely
draws a grouped or a channel-reducing conv that decides a net, and its training nets rarely
convert, so the training rule is checked there).

Reach: a conversion happened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from torch import fx, nn

from refimpl.expect.layout import ConvCall, inductor_conv_class, inductor_decides
from refimpl.expect.layout_report import NODES_PER_CONV, inductor_rule
from refimpl.flops.formulas.conv import conv_flops
from refimpl.properties.layout_component import layout_compile, layout_converts, layout_seen
from refimpl.properties.reach import reach
from refimpl.strategies.nets import TieSpec, conv_nets, devices, exact_tie_nets

#: inductor's channels-last cost per conv class (torch/_inductor/graph.py, decide_layout_opt).


@dataclass(frozen=True)
class Conv:
    """One 2-d conv as eager ran it."""

    weight: tuple[int, int, int, int]
    groups: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    @property
    def kind(self) -> str:
        """Its class by inductor's rule, written by hand (:func:`inductor_conv_class`), held
        to torch's ``decide_layout_opt`` by tests/test_layout_conv_class.py."""
        return inductor_conv_class(self.weight, self.groups)

    @property
    def flops(self) -> int:
        """The formula table's count (:func:`conv_flops`), as inductor counts them."""
        return conv_flops(self.input_shape, self.weight, self.output_shape, transposed=False)

    @property
    def visible(self) -> bool:
        """Its input in channels-last order differs from contiguous (C > 1 and H*W > 1)."""
        _, c, h, w = self.input_shape
        return c > 1 and h * w > 1


def eager_convs(module: nn.Module, x: torch.Tensor) -> list[Conv]:
    found: list[Conv] = []

    def hook(mod, args, out):
        found.append(Conv(tuple(mod.weight.shape), mod.groups, tuple(args[0].shape),
                          tuple(out.shape)))

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        module(x.clone())
    for h in handles:
        h.remove()
    return found


def assert_decision(backend, converted: bool, expected: bool, whose: str, training: bool,
                    convs: list[Conv], reproduce: str = "") -> None:
    """Reach (a conversion happened), then: the backend converted iff ``whose`` rule says."""
    reach(converted)
    assert converted == expected, (
        f"{backend.name} optimize_layout converted={converted}, {whose} says {expected} "
        f"({'training' if training else 'inference'}; convs "
        f"{[(c.kind, c.weight, c.groups, c.flops) for c in convs]}){reproduce}")


def check(backend, spec, training: bool, device: str) -> None:
    module, x = spec.build().to(device), spec.example_input().to(device)
    module.train(training)
    convs = eager_convs(module, x)
    assume(convs[0].visible)
    gm = fx.symbolic_trace(module)
    expected = inductor_rule(convs, len(gm.graph.nodes), is_inference=not training)
    converted = layout_converts(backend, module, x, training)
    assert_decision(backend, converted, expected, "inductor's rule", training, convs,
                    f"\nreproduce: {spec!r}")


@given(spec=conv_nets(), device=devices())
def test_inference_conversion_follows_inductors_rule(refimpl_backend, spec, device):
    check(refimpl_backend, spec, training=False, device=device)



class OneConv(nn.Module):
    """A conv and a relu: the smallest net whose conv class decides the layout."""

    def __init__(self, in_ch: int, out_ch: int, kernel, groups: int) -> None:
        super().__init__()
        kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        self.conv = nn.Conv2d(in_ch, out_ch, (kh, kw), padding=(kh // 2, kw // 2),
                              groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


@st.composite
def one_conv_nets(draw, kinds: tuple[str, ...] = ("default", "default", "grouped", "small",
                                                  "in_out")) -> tuple[OneConv, torch.Tensor]:
    """Every conv class: grouped, small, in_out (2 * out <= in, kernel > 1), and default
    twice as often (in training only a default conv converts: reach); ``kinds`` is drawn
    from, so a class listed more often is drawn more often."""
    kind = draw(st.sampled_from(kinds))
    kernel = draw(st.sampled_from([1, 3]))
    groups = 1
    if kind == "grouped":
        groups = draw(st.sampled_from([2, 4]))
        in_ch, out_ch = 8 * groups, 8 * groups
    elif kind == "small":
        in_ch, out_ch = draw(st.sampled_from([4, 16, 64])), draw(st.sampled_from([4, 16, 64]))
    elif kind == "in_out":
        in_ch, out_ch, kernel = 160, draw(st.sampled_from([8, 80])), 3
    else:
        in_ch, out_ch = draw(st.sampled_from([72, 96])), draw(st.sampled_from([72, 128]))
    torch.manual_seed(0)
    return OneConv(in_ch, out_ch, kernel, groups), torch.randn(1, in_ch, 4, 4)


@given(net=one_conv_nets(), training=st.booleans(), device=devices())
def test_each_conv_class_decides_as_inductor(refimpl_backend, net, training, device):
    """One conv of each class, inference and training: converted iff inductor's rule says."""
    module, x = net
    module, x = module.to(device).train(training), x.to(device)
    convs = eager_convs(module, x)
    gm = fx.symbolic_trace(module)
    expected = inductor_rule(convs, len(gm.graph.nodes), is_inference=not training)
    converted = layout_converts(refimpl_backend, module, x, training)
    assert_decision(refimpl_backend, converted, expected, "inductor's rule", training, convs)


class ConvThenChain(nn.Module):
    """``convs`` convs (72 then 96 channels), then ``length`` relus: a graph of
    ``convs + length + 2`` nodes (the input, the convs, the relus, the output), to put the
    nodes-per-conv limit between two examples."""

    def __init__(self, convs: int, length: int) -> None:
        super().__init__()
        self.convs = nn.Sequential(*(nn.Conv2d(72 if i == 0 else 96, 96, 3, padding=1)
                                     for i in range(convs)))
        self.length = length

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = conv(x)
        for _ in range(self.length):
            x = torch.relu(x)
        return x


#: (in, out, kernel, groups) one step either side of each class boundary of the rule:
#: groups 1 | 2 with 80 input channels a group; out 64 | 65 with in 64; in 64 | 65 with out
#: 64; 2 * out == in (in_out) | 2 * out > in > out (default); kernel 3 | 1 for a
#: channel-reducing conv, and kernel heights 2 | 1 (a 2x2 kernel, and 1x3 | 3x1: inductor reads
#: the kernel's height only); depthwise (one input channel a group, never grouped), wide
#: (default) and narrow (small).
BOUNDARY_CONVS = [(160, 160, 3, 1), (160, 160, 3, 2), (64, 64, 3, 1), (64, 65, 3, 1),
                  (65, 64, 3, 1), (80, 40, 3, 1), (100, 72, 3, 1), (160, 8, 1, 1),
                  (160, 8, 3, 1), (160, 8, 2, 1), (160, 8, (1, 3), 1), (160, 8, (3, 1), 1),
                  (96, 96, 3, 96), (32, 32, 3, 32)]


@given(size=st.integers(2, 5), device=devices())
def test_conv_class_boundaries_decide_as_inductor(refimpl_backend, size, device):
    """Every conv of :data:`BOUNDARY_CONVS`, in inference and training, on a ``size`` x
    ``size`` image: converted iff inductor's rule says (a class threshold moved by one
    flips one of them). Reach: a conversion happened."""
    converted_any = False
    for (in_ch, out_ch, kernel, groups), training in [(c, t) for c in BOUNDARY_CONVS
                                                      for t in (False, True)]:
        torch.manual_seed(0)
        module = OneConv(in_ch, out_ch, kernel, groups).to(device).train(training)
        x = torch.randn(1, in_ch, size, size, device=device)
        convs = eager_convs(module, x)
        expected = inductor_rule(convs, len(fx.symbolic_trace(module).graph.nodes),
                                 is_inference=not training)
        converted = layout_converts(refimpl_backend, module, x, training)
        converted_any |= converted
        assert converted == expected, (
            f"{refimpl_backend.name} optimize_layout converted={converted}, inductor's rule "
            f"says {expected} ({'training' if training else 'inference'}; conv "
            f"{convs[0].kind} {convs[0].weight} groups={groups}, image {size}x{size})")
    reach(converted_any)


@given(convs=st.integers(1, 3), below=st.integers(-1, 6), device=devices())
def test_nodes_per_conv_limit_as_inductor(refimpl_backend, convs, below, device):
    """``convs`` default convs (which convert in inference) in a module whose traced graph
    has ``below`` nodes fewer than ``300 * convs``: a graph of at least 300 nodes per conv is
    left alone, one node fewer converts (the limit scales with the number of convs). The
    count is that of the graph the backend decided on
    (:func:`~refimpl.properties.layout_component.layout_seen`): the traced module for a pass,
    two more a conv for inductor (its graph takes each conv's weight and bias as inputs), so
    the drawn range straddles the limit for both."""
    nodes = NODES_PER_CONV * convs - below
    torch.manual_seed(0)
    module = ConvThenChain(convs, nodes - convs - 2).to(device).eval()
    x = torch.randn(1, 72, 4, 4, device=device)
    assert len(fx.symbolic_trace(module).graph.nodes) == nodes  # the module's own arithmetic
    seen = layout_seen(refimpl_backend, module, x, False)
    expected = inductor_rule(eager_convs(module, x), seen.node_count, is_inference=True)
    reach(seen.converted)
    assert seen.converted == expected, (
        f"{refimpl_backend.name} optimize_layout converted={seen.converted}, inductor's rule "
        f"says {expected} ({convs} default conv(s) in a graph of {seen.node_count} nodes; "
        f"the traced module has {nodes})")


@given(spec=exact_tie_nets(), device=devices())
def test_exact_ties_decide_as_inductor(refimpl_backend, spec: TieSpec, device):
    """A small and a grouped conv whose FLOP-weighted cost equals the total exactly
    (:class:`~refimpl.strategies.nets.TieSpec`), in inference: the backend converts iff
    torch's own ``decide_layout_opt`` does on the same two convolutions
    (:func:`~refimpl.expect.layout.inductor_decides`: inductor's float sum and torch's FLOP
    counter, nothing of refimpl's). At a tie the answer is how the float sum rounds, so a
    backend that counts FLOPs at any other scale or sums in another way flips some ties.
    Reach: a conversion happened."""
    module, x = spec.build().eval().to(device), spec.example_input().to(device)
    convs = eager_convs(module, x)
    calls = [ConvCall(c.input_shape, c.weight, groups=c.groups) for c in convs]
    expected = inductor_decides(calls, is_inference=True)
    converted = layout_converts(refimpl_backend, module, x, False)
    assert_decision(refimpl_backend, converted, expected,
                    "at an exact tie torch's decide_layout_opt", False, convs,
                    f"\nreproduce: {spec!r}")


#: A grouped, a wide depthwise (default, never grouped), two default and a small conv:
#: (in, out, kernel, groups). Whether a backend reads a conv's groups right shows in which
#: of them converts (the second default conv: reach, as in training only default convs do).
FORM_CONVS = [(160, 160, 3, 2), (96, 96, 3, 96), (72, 96, 3, 1), (16, 16, 3, 1),
              (96, 128, 3, 1)]
CONV2D_PARAMETERS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")


class FormConv(nn.Module):
    """One conv and a relu, the conv called as ``form`` says: ``module`` (``self.conv(x)``)
    or ``functional`` (``F.conv2d`` with its first ``positional`` arguments positional, the
    rest by keyword, and ``groups`` left out when it is 1 and ``omit_groups``)."""

    def __init__(self, conv: tuple[int, int, int, int], form: str, positional: int,
                 omit_groups: bool) -> None:
        super().__init__()
        in_ch, out_ch, kernel, groups = conv
        # the padding mode as a model's configuration file gives it: a string equal to
        # "zeros" but not the interned literal, so a backend must compare it by value
        padding_mode = json.loads('{"padding_mode": "zeros"}')["padding_mode"]
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, padding=kernel // 2, groups=groups,
                              padding_mode=padding_mode)
        self.form, self.positional, self.omit_groups = form, positional, omit_groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "module":
            return torch.relu(self.conv(x))
        c = self.conv
        values = (x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
        args = values[:self.positional]
        kwargs = dict(zip(CONV2D_PARAMETERS[self.positional:], values[self.positional:]))
        if self.omit_groups and c.groups == 1:
            kwargs.pop("groups", None)
        return torch.relu(torch.nn.functional.conv2d(*args, **kwargs))


def _form_decision(backend, conv, form: str, graph: str, positional: int,
                   omit_groups: bool, training: bool, device: str):
    """(converted, inductor's rule says, the conv as eager ran it) for one :class:`FormConv`."""
    torch.manual_seed(0)
    module = FormConv(conv, form, positional, omit_groups).to(device).train(training)
    x = torch.randn(1, conv[0], 4, 4, device=device)
    with torch.no_grad():
        out = module(x)
    convs = [Conv(tuple(module.conv.weight.shape), conv[3], tuple(x.shape), tuple(out.shape))]
    expected = inductor_rule(convs, len(fx.symbolic_trace(module).graph.nodes),
                             is_inference=not training)
    if graph == "traced":
        return layout_converts(backend, module, x, training), expected, convs
    compiled, seen = layout_compile(backend, module, device)
    with torch.set_grad_enabled(training):
        compiled(x.clone().requires_grad_(training))
    return any(bool(s) for s in seen), expected, convs


@given(conv=st.sampled_from(FORM_CONVS), form=st.sampled_from(["module", "functional"]),
       graph=st.sampled_from(["traced", "dynamo"]), positional=st.integers(1, 7),
       omit_groups=st.booleans(), training=st.booleans(), device=devices())
def test_conv_call_forms_decide_as_inductor(refimpl_backend, conv, form, graph, positional,
                                            omit_groups, training, device):
    """One conv of :data:`FORM_CONVS`, and the grouped one (whose groups decide it), each
    called as a module or as ``F.conv2d`` with any number of its arguments positional
    (groups positional, by keyword, or left to its default), in the graph
    ``symbolic_trace`` makes (``call_module``, or ``call_function`` with the arguments as
    written) or dynamo's (``torch.conv2d`` with every argument positional): the backend
    converts iff inductor's rule says, on the conv eager ran. A functional call whose groups
    is not positional is also checked with groups left to its default. Reach: the drawn conv
    converted."""
    omits = dict.fromkeys([omit_groups, form == "functional" and positional < 7])
    results = [_form_decision(refimpl_backend, c, form, graph, positional, omit, training,
                              device)
               for c in dict.fromkeys([conv, FORM_CONVS[0]]) for omit in omits]
    reach(results[0][0])
    for converted, expected, convs in results:
        assert converted == expected, (
            f"{refimpl_backend.name} optimize_layout converted={converted}, inductor's rule "
            f"says {expected} ({'training' if training else 'inference'}; convs "
            f"{[(c.kind, c.weight, c.groups, c.flops) for c in convs]}; {form} form, {graph} "
            f"graph, {positional} positional, omit_groups={omit_groups})")
