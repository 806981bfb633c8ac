"""The layout component of the backend under test, in either of its forms, for the layout
properties: an FX pass (``optimize_layout``) or a compiler (``layout_compiler``, as inductor
provides it on GPU). Both give a compiled module and what says a conversion happened, so the
properties judge the two forms alike.

Invariant: the conversion is never the backend's report about itself: for a pass it is read
off the values the returned graph computes (:func:`refimpl.expect.layout.converted_values`);
for a compiler it is the decision the compiler took on its graph, recorded as it compiled.
"""

from __future__ import annotations

import torch
from hypothesis import reject
from torch import fx

from refimpl.expect.layout import compile_with, converted_values
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by

__all__ = ["layout_compile", "layout_converts"]


def layout_compile(backend, module, device: str):
    """``module`` (already on ``device``) compiled through ``backend``'s layout component, and
    the list that gets, per graph compiled, what says a layout was converted: for an FX pass
    (``optimize_layout``, :func:`compile_with`) the values its result computes channels-last;
    for a compiler (``layout_compiler``: inductor) its own decision. ``any(list)`` is the
    reach. A compiler that optimises layouts only on other devices (the compiler's
    ``layout_devices``) rejects the example: it would prove nothing here. Dynamo is reset first."""
    if provided_by(backend, "layout") != "layout_compiler":
        return compile_with(component(backend, "optimize_layout"), module)
    compiler = component(backend, "layout_compiler")()
    if device not in getattr(compiler, "layout_devices", (device,)):
        reject()
    torch._dynamo.reset()
    return torch.compile(module, backend=compiler), compiler.decisions


def layout_converts(backend, module, x: torch.Tensor, training: bool) -> bool:
    """Whether ``backend``'s layout component converts ``module``'s graph for input ``x``
    (both on one device), in training or inference: an FX pass's result read off the graph it
    returns (:func:`converted_values`), a compiler's own decision on the graph it compiled."""
    inputs = [x.clone().requires_grad_(training)]
    if provided_by(backend, "layout") == "layout_compiler":
        compiled, decisions = layout_compile(backend, module, x.device.type)
        with torch.set_grad_enabled(training):
            compiled(*inputs)
        return any(decisions)
    gm = fx.symbolic_trace(module)
    with torch.set_grad_enabled(training):
        out = component(backend, "optimize_layout")(gm, inputs)
    return bool(converted_values(out, [x]))
