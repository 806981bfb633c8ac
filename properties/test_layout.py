"""Properties of a layout pass, on random conv nets, through the backend under test.

With the backend's ``optimize_layout`` applied to the dynamo graph (then eager AOTAutograd),
compiled outputs have eager's strides and pass ``same`` against eager with a float64
reference; in training, gradients too; and the pass is deterministic. Each example checks
that the backend really ran (a net that fell back to eager would prove nothing).
"""

from __future__ import annotations

import copy

import torch
from hypothesis import Phase, given, settings

from refimpl.layout import LayoutOptions, decide_layout
from refimpl.layout.backend import make_layout_backend
from refimpl.oracle import component
from refimpl.strategies.nets import HEADS, TAILS, ConvNetSpec, conv_nets
from refimpl.testing.same import mismatch


def compile_with(pass_fn, module):
    """``module`` compiled with ``pass_fn`` on its dynamo graph; the list of graphs seen."""
    seen = []

    def recording(gm, example_inputs):
        seen.append(gm)
        return pass_fn(gm, example_inputs)

    torch._dynamo.reset()
    return torch.compile(module, backend=make_layout_backend(recording)), seen


def tensors(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def dense_strides(t: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """(size, stride) of the dims of size > 1: the strides that decide the memory layout.

    The autograd engine keeps a gradient whose strides agree with its parameter's on these
    dims (``obeys_layout_contract``), so e.g. a 1x1 conv's weight gradient may come back
    as (3, 1, 3, 3) where eager gives (3, 1, 1, 1): the same memory layout.
    """
    return tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1)


def check_same(expected, actual, fp64, what: str, spec: ConvNetSpec, *, outputs: int) -> None:
    """``same`` on everything; exact strides on the first ``outputs`` tensors (the graph's
    outputs), the autograd engine's layout contract on the rest (gradients)."""
    why = mismatch(expected, actual, fp64)
    assert why is None, f"{what}: {why}\nreproduce with: {spec!r}"
    for i, (e, a) in enumerate(zip(tensors(expected), tensors(actual))):
        got, want = (a.stride(), e.stride()) if i < outputs else (dense_strides(a),
                                                                   dense_strides(e))
        assert got == want, f"{what} #{i}: strides {got} != eager {want}\nreproduce: {spec!r}"


@given(spec=conv_nets())
def test_inference_outputs_match_eager(refimpl_backend, spec):
    pass_fn = component(refimpl_backend, "optimize_layout")
    module, x = spec.build().eval(), spec.example_input()
    fp64_module = copy.deepcopy(module).double()
    with torch.no_grad():
        expected = module(x.clone())
        fp64 = fp64_module(x.double())
        compiled, seen = compile_with(pass_fn, module)
        actual = compiled(x.clone())
    assert seen, "the backend was never called"
    check_same(expected, actual, fp64, "output", spec, outputs=1)


def _train_step(module, x):
    x = x.clone().requires_grad_(True)
    out = module(x)
    out.sum().backward()
    return [out.detach(), x.grad, *[p.grad for p in module.parameters()]]


@settings(max_examples=6)
@given(spec=conv_nets(training=True))
def test_training_outputs_and_gradients_match_eager(refimpl_backend, spec):
    pass_fn = component(refimpl_backend, "optimize_layout")
    module, x = spec.build().train(), spec.example_input()
    fp64_module = copy.deepcopy(module).double()
    compiled_module = copy.deepcopy(module)
    expected = _train_step(module, x)
    fp64 = _train_step(fp64_module, x.double())
    compiled, seen = compile_with(pass_fn, compiled_module)
    actual = _train_step(compiled, x)
    assert seen, "the backend was never called"
    check_same(expected, actual, fp64, "output and gradients", spec, outputs=1)


@settings(max_examples=10)
@given(spec=conv_nets())
def test_pass_is_deterministic(refimpl_backend, spec):
    pass_fn = component(refimpl_backend, "optimize_layout")
    x = spec.example_input()
    codes = []
    for _ in range(2):
        gm = torch.fx.symbolic_trace(spec.build().eval())
        with torch.no_grad():
            codes.append(pass_fn(gm, [x]).code)
    assert codes[0] == codes[1]


# --- the strategy itself ---------------------------------------------------------------


@settings(max_examples=10)
@given(spec=conv_nets())
def test_generated_nets_are_valid(spec):
    assert spec.layers[0].kind == "conv" and spec.head in HEADS and spec.tail in TAILS
    channels = spec.in_channels
    for layer in spec.layers:
        if layer.kind == "conv":
            assert channels % layer.groups == 0 and layer.out_channels % layer.groups == 0
            channels = layer.out_channels
    with torch.no_grad():
        out = spec.build().eval()(spec.example_input())
    flat = spec.tail in ("view", "mutate_base")
    assert out.dim() == (1 if flat else (2 if spec.head == "linear" else 4))


@settings(max_examples=5)
@given(spec=conv_nets(training=True))
def test_training_nets_backpropagate_in_eager(spec):
    assert spec.tail in ("none", "view")
    grads = _train_step(spec.build().train(), spec.example_input())
    assert all(g is not None for g in grads[1:])


FIND_BUDGET = 2000


def _decision(spec: ConvNetSpec, training: bool = False) -> bool:
    gm = torch.fx.symbolic_trace(spec.build().train(training))
    options = LayoutOptions(is_inference=not training)
    return decide_layout(gm, [spec.example_input()], options).channels_last


def test_strategy_reaches_every_feature():
    """Each feature the properties rely on is generated (hypothesis.find fails otherwise)."""
    from hypothesis import find

    # find's first hit is enough: generation only, no shrinking.
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
    # A search budget for find (stops at the first hit), not a property's example count.
    search = settings(database=None, max_examples=FIND_BUDGET, phases=(Phase.generate,))
    for name, predicate in features.items():
        assert predicate(find(conv_nets(), predicate, settings=search)), name
