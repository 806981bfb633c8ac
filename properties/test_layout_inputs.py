"""A layout pass on nets whose input is not contiguous, through the backend under test.

Each drawn net (:func:`refimpl.strategies.nets.laid_out_input_nets`) runs on the same input
values laid out three ways (:data:`~refimpl.strategies.nets.INPUT_LAYOUTS`): channels-last
(NHWC memory), channels-last with every other column (not dense), and height and width
swapped in memory. Eager's values then keep a layout of their own: a conv of a channels-last
input is channels-last, and so are the batch norms, activations, pools and ``cat`` after it.
A layout pass that takes "eager's layout" to mean contiguous returns outputs with the wrong
strides, and an ``as_strided`` that reads a value's memory reads other elements
(pytorch/pytorch#174963, #91233).

The expectation is eager itself on the same input: its values, and the strides of every
output on the dims of size > 1 (:func:`layout_strides`); a float64 run of the same net on a
float64 input laid out the same way is the reference dynamo's accuracy rule measures errors
against (:mod:`refimpl.expect.same`). Eager on a channels-last input is the channels-last
eager run; :func:`refimpl.expect.layout.run_channels_last` is not used, as it makes a net's
value contiguous before an ``as_strided`` tail, which here must read channels-last memory.
Nothing here reads refimpl's layout pass. The compiled run must leave its input as it found
it (values and strides).

Precision: eager, float64 and compiled runs are in one ``refimpl_precision.applied()``
block, as in test_layout.py.

Reach (each example): the backend rewrote the graph for at least one of the layouts: an FX
pass returned code other than the code it was given (read off the graph, not the backend's
report), or a compiler (``layout_compiler``) decided to convert.
"""

from __future__ import annotations

import copy

import torch
from hypothesis import given

from refimpl.expect.layout import make_layout_backend
from refimpl.expect.same import mismatch
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.properties.layout_component import layout_compile
from refimpl.properties.reach import reach
from refimpl.strategies.nets import (
    INPUT_LAYOUTS,
    ConvNetSpec,
    devices,
    laid_out_input_nets,
    lay_out,
)


def tensors(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def layout_strides(t: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """(size, stride) of the dims of size > 1: where each element lies in memory. A dim of
    size 1 is never stepped along, so its stride places nothing: dynamo and AOTAutograd
    return such a stride other than eager's even with no layout pass (a conv to one
    channel of a channels-last input: eager (16, 1, 4, 1), ``aot_eager`` (16, 16, 4, 1))."""
    return tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1)


def compile_watching(backend, module, device: str):
    """``module`` compiled through ``backend``'s layout component, and the list that gets,
    per graph compiled, whether the component rewrote it: for an FX pass, whether the code
    it returned differs from the code it was given; for a compiler, its own decision
    (:func:`refimpl.properties.layout_component.layout_compile`). Dynamo is reset first."""
    if provided_by(backend, "layout") == "layout_compiler":
        return layout_compile(backend, module, device)
    pass_fn = component(backend, "optimize_layout")
    rewritten: list[bool] = []

    def watching(gm, example_inputs):
        given_code = gm.code  # the pass may rewrite gm in place: read it first
        out = pass_fn(gm, example_inputs)
        rewritten.append(out.code != given_code)
        return out

    torch._dynamo.reset()
    return torch.compile(module, backend=make_layout_backend(watching)), rewritten


def check_layout(backend, precision, spec: ConvNetSpec, device: str, layout: str,
                 reached: bool) -> bool:
    """Eager's values and output strides from ``spec``'s net on its input laid out as
    ``layout``, the input left as it was. Records the example's reach before asserting:
    ``reached`` (an earlier layout's) or whether the backend rewrote this graph; returns it.
    """
    module = spec.build().eval().to(device)
    fp64_module = copy.deepcopy(module).double()
    values = spec.example_input().to(device)
    x, x_fp64 = lay_out(values, layout), lay_out(values.double(), layout)
    given_strides = x.stride()
    with torch.no_grad(), precision.applied():
        expected = module(x)
        fp64 = fp64_module(x_fp64)
        compiled, rewritten = compile_watching(backend, module, device)
        actual = compiled(x)
    where = f"input laid out {layout}, strides {given_strides}\nreproduce with: {spec!r}"
    reached = reach(reached or any(rewritten))
    assert rewritten, f"the backend was never called ({where})"
    assert x.stride() == given_strides and torch.equal(x, values), (
        f"the compiled run changed its input ({where})")
    why = mismatch(expected, actual, fp64)
    assert why is None, f"against eager: {why} ({where})"
    for i, (e, a) in enumerate(zip(tensors(expected), tensors(actual), strict=True)):
        assert layout_strides(a) == layout_strides(e), (
            f"output #{i}: strides {a.stride()} != eager {e.stride()} ({where})")
    return reached


@given(spec=laid_out_input_nets(), device=devices())
def test_laid_out_inputs_keep_eager_values_and_strides(refimpl_backend, refimpl_precision,
                                                       spec, device):
    reached = False
    for layout in INPUT_LAYOUTS:
        reached = check_layout(refimpl_backend, refimpl_precision, spec, device, layout,
                               reached)
