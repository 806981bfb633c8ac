"""Properties of a layout pass, on random conv nets, through the backend under test.

With the backend's layout component (``optimize_layout`` applied to the dynamo graph, then
eager AOTAutograd; or its ``layout_compiler``, e.g. inductor, compiling forward and backward
itself), compiled outputs have eager's strides and pass ``same`` against eager with a float64
reference; in training, gradients too; and an FX pass is deterministic. Each example checks
that the backend really ran (a net that fell back to eager would prove nothing). Nets run on
each device this machine offers (``device``: cuDNN's channels-last kernels are not the CPU's).

Precision: every run a comparison rests on (eager, channels-last eager, float64 and the
compiled run) runs inside one ``refimpl_precision.applied()`` block (``--refimpl-precision``,
:mod:`refimpl.expect.precision`): full float32 by default, TF32 on CUDA with ``tf32``. On
CPU, TF32 changes no value.

Reach (each example): a conversion happened: the graph the pass returned computes some value
channels-last (:func:`refimpl.expect.layout.converted_values`), or the compiler decided to
convert (:func:`refimpl.properties.layout_component.layout_compile`).
"""

from __future__ import annotations

import copy

import torch
from hypothesis import given

from refimpl.expect.layout import (
    assert_noise_only,
    converted_values,
    run_channels_last,
    zero_by_construction,
)
from refimpl.expect.same import mismatch
from refimpl.oracle import component
from refimpl.properties.layout_component import layout_compile
from refimpl.properties.reach import reach
from refimpl.strategies.nets import ConvNetSpec, conv_nets, devices


def tensors(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def dense_strides(t: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """(size, stride) of the dims of size > 1: the strides that decide the memory layout.

    The autograd engine keeps a gradient whose strides agree with its parameter's on these
    dims (``obeys_layout_contract``), so e.g. a 1x1 conv's weight gradient may come back
    as (3, 1, 3, 3) where eager gives (3, 1, 1, 1): the same memory layout.
    """
    return tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1)


def check_same(expected, actual, fp64, what: str, spec: ConvNetSpec, *, outputs: int,
               channels_last) -> None:
    """``same`` on everything; exact strides on the first ``outputs`` tensors (the graph's
    outputs), the autograd engine's layout contract on the rest (gradients). A gradient that
    is zero by construction (float64 reference) is checked to be noise, not by ``same``.

    Two eager runs are references for the values: ``expected`` (contiguous) and
    ``channels_last`` (the same module and input in channels-last memory format). torch's
    channels-last kernels round differently, and a converted graph runs exactly those. Found
    at 1,000 examples (tests/test_layout_channels_last_reference.py): gradients bit-identical
    to channels-last eager, which is 3.2x as far from float64 as contiguous eager (rounding),
    or 1.4% off where one ReLU input 6.4e-7 from zero changes side (a kink). The values must
    be ``same`` as one of the two; the strides are eager's (contiguous)."""
    if isinstance(actual, list):
        zero = zero_by_construction(fp64)
        scale = max((t.abs().max().item() for t, z in zip(actual, zero)
                     if isinstance(t, torch.Tensor) and t.numel() and not z), default=0.0)
        for i, (a, z) in enumerate(zip(actual, zero)):
            if z:
                assert_noise_only(a, scale, f"{what} #{i}",
                                  references=(expected[i], channels_last[i]))
        expected, actual, fp64, channels_last = (
            [None if z else t for t, z in zip(ts, zero)]
            for ts in (expected, actual, fp64, channels_last))
    why = mismatch(expected, actual, fp64)
    why_channels_last = mismatch(channels_last, actual, fp64)
    assert why is None or why_channels_last is None, (
        f"{what}: against contiguous eager, {why}; against channels-last eager, "
        f"{why_channels_last}\nreproduce with: {spec!r}")
    for i, (e, a) in enumerate(zip(tensors(expected), tensors(actual))):
        if e is None:  # zero by construction: checked above
            continue
        got, want = (a.stride(), e.stride()) if i < outputs else (dense_strides(a),
                                                                   dense_strides(e))
        assert got == want, f"{what} #{i}: strides {got} != eager {want}\nreproduce: {spec!r}"


@given(spec=conv_nets(), device=devices())
def test_inference_outputs_match_eager(refimpl_backend, refimpl_precision, spec, device):
    module, x = spec.build().eval().to(device), spec.example_input().to(device)
    fp64_module = copy.deepcopy(module).double()
    with torch.no_grad(), refimpl_precision.applied():
        expected = module(x.clone())
        fp64 = fp64_module(x.double())
        channels_last = run_channels_last(module, x, lambda m, cl_x: m(cl_x))
        compiled, seen = layout_compile(refimpl_backend, module, device)
        actual = compiled(x.clone())
    assert seen, "the backend was never called"
    reach(any(seen))
    check_same(expected, actual, fp64, "output", spec, outputs=len(tensors(expected)),
               channels_last=channels_last)


def _train_step(module, x):
    """Forward and backward of ``(out * probe).sum()``, probe a fixed random tensor. Not
    ``out.sum()``: after a training-mode batch norm that loss is constant, so every gradient
    is zero in exact arithmetic and the runs would compare rounding noise (found at 300
    examples: a 72-channel conv then batch norm, weight gradients 4e-5 vs 2e-3 of noise)."""
    x = x.clone().requires_grad_(True)
    out = module(x)
    probe = torch.randn(out.shape, generator=torch.Generator().manual_seed(0),
                        dtype=torch.float64).to(out.device, out.dtype)
    (out * probe).sum().backward()
    return [out.detach(), x.grad, *[p.grad for p in module.parameters()]]


@given(spec=conv_nets(training=True), device=devices())
def test_training_outputs_and_gradients_match_eager(refimpl_backend, refimpl_precision, spec,
                                                    device):
    module, x = spec.build().train().to(device), spec.example_input().to(device)
    fp64_module = copy.deepcopy(module).double()
    compiled_module = copy.deepcopy(module)
    with refimpl_precision.applied():
        channels_last = run_channels_last(module, x, _train_step)  # before the step: fresh
        expected = _train_step(module, x)
        fp64 = _train_step(fp64_module, x.double())
        compiled, seen = layout_compile(refimpl_backend, compiled_module, device)
        actual = _train_step(compiled, x)
    assert seen, "the backend was never called"
    reach(any(seen))
    check_same(expected, actual, fp64, "output and gradients", spec, outputs=1,
               channels_last=channels_last)


@given(spec=conv_nets(), device=devices())
def test_pass_is_deterministic(refimpl_backend, spec, device):
    """An FX pass gives the same code twice (a compiler's code is its own business)."""
    pass_fn = component(refimpl_backend, "optimize_layout")
    x = spec.example_input().to(device)
    codes, converted = [], []
    for _ in range(2):
        gm = torch.fx.symbolic_trace(spec.build().eval().to(device))
        with torch.no_grad():
            out = pass_fn(gm, [x])
        codes.append(out.code)
        converted.append(converted_values(out, [x]))
    reach(bool(converted[0]))
    assert codes[0] == codes[1], f"two runs of the pass differ:\n{codes[0]}\n---\n{codes[1]}"
