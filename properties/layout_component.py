"""The layout component of the backend under test, in either of its forms, for the layout
properties: an FX pass (``optimize_layout``) or a compiler (``layout_compiler``, as inductor
provides it on GPU). Both give a compiled module and what says a conversion happened, so the
properties judge the two forms alike.

Invariant: the conversion is never the backend's report about itself: for a pass it is read
off the values the returned graph computes (:func:`refimpl.expect.layout.converted_values`);
for a compiler it is the decision the compiler took on its graph, recorded as it compiled.
The node count a nodes-per-conv rule is judged on is that of the graph the decision was
taken on: the traced module for a pass; for a compiler, the graph it lowered (its
``node_counts``: inductor's is AOTAutograd's graph, parameters lifted to inputs), or dynamo's
graph where a compiler records none.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import reject
from torch import fx

from refimpl.expect.layout import compile_with, converted_values
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by

__all__ = ["LayoutSeen", "layout_compile", "layout_converts", "layout_seen"]


@dataclass(frozen=True)
class LayoutSeen:
    """What a layout component did with one graph: whether it converted, and how many nodes
    the graph it decided on had."""

    converted: bool
    node_count: int


def _layout_compiler(backend, device: str):
    """A fresh ``layout_compiler`` of ``backend``, dynamo reset; rejects the example where the
    compiler optimises layouts only on other devices (its ``layout_devices``): it would prove
    nothing here."""
    compiler = component(backend, "layout_compiler")()
    if device not in getattr(compiler, "layout_devices", (device,)):
        reject()
    torch._dynamo.reset()
    return compiler


def layout_compile(backend, module, device: str):
    """``module`` (already on ``device``) compiled through ``backend``'s layout component, and
    the list that gets, per graph compiled, what says a layout was converted: for an FX pass
    (``optimize_layout``, :func:`compile_with`) the values its result computes channels-last;
    for a compiler (``layout_compiler``: inductor) its own decision. ``any(list)`` is the
    reach. Dynamo is reset first."""
    if provided_by(backend, "layout") != "layout_compiler":
        return compile_with(component(backend, "optimize_layout"), module)
    compiler = _layout_compiler(backend, device)
    return torch.compile(module, backend=compiler), compiler.decisions


def layout_seen(backend, module, x: torch.Tensor, training: bool) -> LayoutSeen:
    """What ``backend``'s layout component does with ``module``'s graph for input ``x``
    (both on one device), in training or inference: an FX pass's result read off the graph it
    returns (:func:`converted_values`), a compiler's own decision on the graph it compiled;
    with the node count of the graph decided on (module docstring)."""
    inputs = [x.clone().requires_grad_(training)]
    gm = fx.symbolic_trace(module)  # the graph a pass is given; its count is a pass's
    traced_nodes = len(gm.graph.nodes)
    if provided_by(backend, "layout") == "layout_compiler":
        compiler = _layout_compiler(backend, x.device.type)
        with torch.set_grad_enabled(training):
            torch.compile(module, backend=compiler)(*inputs)
        lowered = getattr(compiler, "node_counts", None) or [traced_nodes]
        return LayoutSeen(any(compiler.decisions), max(lowered))
    with torch.set_grad_enabled(training):
        out = component(backend, "optimize_layout")(gm, inputs)
    return LayoutSeen(bool(converted_values(out, [x])), traced_nodes)


def layout_converts(backend, module, x: torch.Tensor, training: bool) -> bool:
    """Whether ``backend``'s layout component converts ``module``'s graph for input ``x``:
    :func:`layout_seen`'s ``converted``."""
    return layout_seen(backend, module, x, training).converted
