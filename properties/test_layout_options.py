"""A layout pass's options, through the backend under test: what each one means, and the
values it cannot mean refused with an error naming the option.

A pass may take options by keyword, ``optimize_layout(gm, example_inputs, **options)``; these
are their meanings (refimpl's :class:`refimpl.layout.LayoutOptions` names them; inductor has
the first two as config flags):

``mode``                ``"auto"`` applies the rule of test_layout_strength.py; ``"always"``
                        converts every graph with a static 2-d conv (inductor's
                        ``force_layout_optimization``); ``"never"`` converts nothing
                        (``layout_optimization=False``);
``is_inference``        True or False states which rule applies (the inference rule weighs
                        FLOPs, the training rule reads conv classes); None infers it;
``max_nodes_per_conv``  an int >= 1: a graph with at least this many nodes per conv is left
                        alone;
``multipliers``         a positive number (not a bool) for exactly each conv class
                        (grouped, small, in_out, default): the inference rule converts iff
                        ``sum(flops * multipliers[class]) <= sum(flops)``.

Anything else is the user's mistake, and a pass that takes it anyway decides something
nobody asked for (a zero limit converts nothing, a missing class fails later with a
KeyError, a negative cost always converts). The first property draws a net and options and
checks, under every mode, that the pass converted iff the stated rule (written here by hand,
classes by :func:`refimpl.expect.layout.inductor_conv_class`) says, with eager's outputs and
strides; the second checks that every value of :data:`BAD` is refused with a ValueError or
TypeError naming its option. Whether the pass converted is read off the values its graph
computes (:func:`refimpl.expect.layout.converted_values`), never off its report.

A compiler form (``layout_compiler``) and a pass that takes no keyword options are skipped,
with that reason.

Reach: the pass converted under the drawn options in ``auto`` mode, or those options make the
stated rule decide otherwise than the defaults would (first property); the pass converted
with no options (second).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import fx, nn

from refimpl.expect.layout import converted_values, inductor_conv_class
from refimpl.flops.formulas.conv import conv_flops
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach
from refimpl.strategies.nets import devices

CLASSES = ("grouped", "small", "in_out", "default")
#: inductor's channels-last cost per conv class (torch/_inductor/graph.py, decide_layout_opt).
INDUCTOR_COSTS = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
#: (in, out, kernel, groups) of one conv of each class, and a wide default conv.
CONVS = {"grouped": (16, 16, 3, 2), "small": (16, 32, 3, 1), "in_out": (160, 72, 3, 1),
         "default": (72, 96, 3, 1)}
#: option -> values it cannot take.
BAD = {
    "mode": ["sometimes", "Auto", "", None, 1, True],
    "is_inference": [0, 1, "yes", "False"],
    "max_nodes_per_conv": [0, -1, True, False, 2.5, "300", None],
    "multipliers": [
        None, ["small"], {}, {c: 1.0 for c in CLASSES[1:]},
        {**INDUCTOR_COSTS, "depthwise": 1.0}, {**INDUCTOR_COSTS, "small": 0},
        {**INDUCTOR_COSTS, "default": -0.5}, {**INDUCTOR_COSTS, "grouped": "1.3"},
        {**INDUCTOR_COSTS, "in_out": True}, {**INDUCTOR_COSTS, "small": float("nan")},
        {**INDUCTOR_COSTS, "default": None}],
}

#: option -> the values at the edge of what it can mean, each one step from a value of BAD:
#: the pass must take them (a validation that refuses them narrows the option).
EDGE = {
    "mode": ["auto", "always", "never"],
    "is_inference": [None, True, False],
    "max_nodes_per_conv": [1, 2, 10**9],
    "multipliers": [dict.fromkeys(CLASSES, 1e-12), dict.fromkeys(CLASSES, 1),
                    {**INDUCTOR_COSTS, "small": 10**6}],
}


class ConvRelu(nn.Module):
    """One conv (``(in, out, kernel, groups)``) and a relu, then a second conv of the same
    class when ``twice``."""

    def __init__(self, conv: tuple[int, int, int, int], twice: bool) -> None:
        super().__init__()
        in_ch, out_ch, kernel, groups = conv
        self.first = nn.Conv2d(in_ch, out_ch, kernel, padding=kernel // 2, groups=groups)
        self.second = (nn.Conv2d(out_ch, out_ch, kernel, padding=kernel // 2, groups=groups)
                       if twice else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.first(x))
        return self.second(h) if self.second is not None else h


def takes_options(backend) -> None:
    """Skip (with the reason) a compiler form, or a pass whose signature takes no keyword
    options: nothing here can be asked of it."""
    if provided_by(backend, "layout") == "layout_compiler":
        pytest.skip(f"backend {backend.name!r} provides layouts as a compiler, which takes "
                    "no options")
    component(backend, "optimize_layout")  # skips, with the reason, where it has none
    params = inspect.signature(backend.optimize_layout).parameters.values()
    if not any(p.kind in (p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        pytest.skip(f"backend {backend.name!r}: optimize_layout takes no keyword options")


def eager_convs(module: nn.Module, x: torch.Tensor) -> list[tuple[tuple, int, int]]:
    """(weight shape, groups, FLOPs) of each conv eager ran, FLOPs by the formula table."""
    found = []

    def hook(mod, args, out):
        found.append((tuple(mod.weight.shape), mod.groups,
                      conv_flops(args[0].shape, mod.weight.shape, out.shape,
                                 transposed=False)))

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        module(x.clone())
    for handle in handles:
        handle.remove()
    return found


def stated_rule(convs, node_count: int, inference: bool, mode: str, limit: int,
                costs: dict) -> bool:
    """The module docstring's meaning of the options, for these convs."""
    if mode == "never" or not convs:
        return False
    if mode == "always":
        return True
    if node_count >= limit * len(convs):
        return False
    kinds = [inductor_conv_class(weight, groups) for weight, groups, _ in convs]
    if inference:
        total = sum(flops for _, _, flops in convs)
        return sum(flops * costs[k] for (_, _, flops), k in zip(convs, kinds)) <= total
    return not ({"grouped", "in_out"} & set(kinds)) and set(kinds) != {"small"}


@st.composite
def drawn_options(draw) -> dict:
    """Options other than the mode: each left out, or one of its meaningful values; the
    limit is drawn relative to the traced graph's node count later (``limit``)."""
    options: dict = {}
    inference = draw(st.sampled_from([None, True, False]))
    if inference is not None:
        options["is_inference"] = inference
    cost = draw(st.sampled_from([None, 0.5, 0.5, 1.0, 1.5, "inductor", "per class"]))
    if cost == "inductor":
        options["multipliers"] = dict(INDUCTOR_COSTS)
    elif cost == "per class":
        options["multipliers"] = {c: draw(st.sampled_from([0.5, 1.0, 2.0])) for c in CLASSES}
    elif cost is not None:
        options["multipliers"] = dict.fromkeys(CLASSES, cost)
    return options


@given(kind=st.sampled_from(["default", "default", *CLASSES[:3]]), twice=st.booleans(),
       training=st.booleans(), options=drawn_options(),
       limit=st.sampled_from([None, None, "above", "at", "one"]),
       device=devices())
def test_options_decide_as_stated(refimpl_backend, kind, twice, training, options, limit,
                                  device):
    """Under each mode, with the drawn ``is_inference``, ``multipliers`` and
    ``max_nodes_per_conv`` (None: left out; ``at``: the traced nodes per conv, rounded down,
    which leaves the graph alone; ``above``: one more, which does not; ``one``: 1): converted
    iff the stated rule says, and eager's outputs and strides. Reach: ``auto`` converts, or
    the drawn options make the stated rule decide otherwise than the defaults would."""
    takes_options(refimpl_backend)
    torch.manual_seed(0)
    module = ConvRelu(CONVS[kind], twice).to(device).train(training)
    x = torch.randn(1, CONVS[kind][0], 4, 4, device=device)
    convs = eager_convs(module, x)
    nodes = len(fx.symbolic_trace(module).graph.nodes)
    if limit is not None:
        per_conv = {"at": nodes // len(convs), "above": nodes // len(convs) + 1, "one": 1}
        options = {**options, "max_nodes_per_conv": per_conv[limit]}
    inference = options.get("is_inference", not training)
    rule = {"limit": options.get("max_nodes_per_conv", 300),
            "costs": options.get("multipliers", INDUCTOR_COSTS)}
    by_default = stated_rule(convs, nodes, not training, "auto", 300, INDUCTOR_COSTS)
    with torch.set_grad_enabled(training):
        expected_out = module(x)
    for mode in ("auto", "always", "never"):
        given_options = {**options, "mode": mode}
        inputs = [x.clone().requires_grad_(training)]
        with torch.set_grad_enabled(training):
            gm = component(refimpl_backend, "optimize_layout")(
                fx.symbolic_trace(module), inputs, **given_options)
            out = gm(*inputs)
        converted = bool(converted_values(gm, [x]))
        expected = stated_rule(convs, nodes, inference, mode, rule["limit"], rule["costs"])
        if mode == "auto":
            reach(converted or expected != by_default)
        assert converted == expected, (
            f"{refimpl_backend.name} optimize_layout(**{given_options}) converted={converted},"
            f" the stated rule says {expected} ({kind} conv{'s' if twice else ''}, "
            f"{'training' if training else 'inference'} inputs, {nodes} traced nodes)")
        assert out.stride() == expected_out.stride(), (
            f"strides {out.stride()} != eager {expected_out.stride()} ({given_options})")
        torch.testing.assert_close(out, expected_out, rtol=1e-4, atol=1e-4)


def refusal(run, module: nn.Module, x: torch.Tensor, options: dict) -> BaseException | None:
    """What ``run`` (the backend's pass) raised on ``module``'s graph with ``options`` (the
    target's exception, as the oracle chains it), or None."""
    try:
        run(fx.symbolic_trace(module), [x], **options)
    except TargetError as exc:
        return exc.__cause__
    return None


@given(kind=st.sampled_from(["default", "in_out"]), device=devices())
def test_options_it_cannot_mean_are_refused(refimpl_backend, kind, device):
    """Every value of :data:`BAD`, one option at a time, on a net the pass converts with no
    options: refused with a ValueError or TypeError whose message names the option; every
    value of :data:`EDGE` (one step inside each refused range) is taken."""
    takes_options(refimpl_backend)
    module = ConvRelu(CONVS[kind], twice=False).to(device).eval()
    x = torch.randn(1, CONVS[kind][0], 4, 4, device=device)
    run = component(refimpl_backend, "optimize_layout")
    with torch.no_grad():
        reach(bool(converted_values(run(fx.symbolic_trace(module), [x]), [x])))
        for option, values in BAD.items():
            for value in values:
                why = refusal(run, module, x, {option: value})
                where = f"optimize_layout({option}={value!r})"
                assert why is not None, f"{refimpl_backend.name}: {where} was accepted"
                assert isinstance(why, (ValueError, TypeError)) and option in str(why), (
                    f"{refimpl_backend.name}: {where} raised {why!r}, expected a ValueError "
                    f"or TypeError naming {option}")
        for option, values in EDGE.items():
            for value in values:
                why = refusal(run, module, x, {option: value})
                assert why is None, (f"{refimpl_backend.name}: optimize_layout({option}="
                                     f"{value!r}) refused a value the option means: {why!r}")
