"""The ``inductor`` target: ``torch.compile``'s default backend, end to end.

``compile(fn, memory_budget=b)`` is ``torch.compile(fn)`` with inductor (C++ code on CPU:
it needs a C compiler; Triton on GPU), the budget handed over the way a user does it,
``torch._functorch.config.activation_memory_budget = b``, in force when the graph is
partitioned (the first call). Two settings make its results checkable, and are part of the
target's definition:

* ``torch._inductor.config.fallback_random = True``: random ops run as aten's, drawing the
  numbers eager's random stream gives; inductor's own generator draws numbers no reference
  can reproduce, so a gradient could not be checked against the draws the forward made;
* each ``compile`` hands dynamo a fresh code object and runs with
  ``fail_on_recompile_limit_hit``: a budget sweep over one function past dynamo's recompile
  limit (8) raises instead of silently running eagerly, and a call that compiled no graph
  raises :class:`RanEagerly`.

Layout: inductor optimises layouts (channels-last convolutions) only on GPU. Without a
CUDA device the component is absent, with its reason in ``skip_reasons``; with one,
:meth:`InductorBackend.optimize_layout` applies inductor's own decision
(``GraphLowering.decide_layout_opt``) and, where inductor would optimise, makes the FX graph
compute its convolutions channels-last (inductor's lowering is not an FX pass, so the
rewrite is stated here, as inductor lowers: conv inputs and weights channels-last, the
graph's outputs in eager's layout).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from refimpl.partition.api import fresh_entry

NO_GPU_LAYOUT = "inductor optimises conv layouts only on GPU; no CUDA device here"


class RanEagerly(RuntimeError):
    """A compiled call that reached no inductor graph (dynamo ran it eagerly)."""


def _check_budget(memory_budget: float | None) -> float:
    budget = 1.0 if memory_budget is None else memory_budget
    if isinstance(budget, bool) or not isinstance(budget, int | float) \
            or not 0.0 <= budget <= 1.0:
        raise ValueError(f"memory_budget={memory_budget!r} must be None or a number in [0, 1]")
    return float(budget)


class InductorBackend:
    """torch.compile's default backend as a refimpl target (module docstring)."""

    name = "inductor"

    def __init__(self) -> None:
        self.version = f"torch {torch.__version__} inductor"
        self.skip_reasons: dict[str, str] = {}
        if not torch.cuda.is_available():
            self.optimize_layout = None  # absent: the layout properties skip, with the reason
            self.skip_reasons["optimize_layout"] = NO_GPU_LAYOUT

    def compile(self, fn: Callable[..., Any], *, memory_budget: float | None = None):
        import torch._functorch.config as functorch_config
        from torch._inductor.compile_fx import compile_fx

        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        budget = _check_budget(memory_budget)
        graphs = []

        def inductor(gm: fx.GraphModule, example_inputs: list[Any]):
            graphs.append(gm)  # config_patches reach the backward, compiled out of scope
            return compile_fx(gm, example_inputs, config_patches={"fallback_random": True})

        compiled = torch.compile(fresh_entry(fn), backend=inductor)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with functorch_config.patch(activation_memory_budget=budget), \
                    torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
                out = compiled(*args, **kwargs)
            if not graphs:
                raise RanEagerly(f"fn={getattr(fn, '__name__', fn)!r}: dynamo compiled no "
                                 "graph of it, so inductor never ran")
            return out

        return run

    def optimize_layout(self, gm: fx.GraphModule, example_inputs: Any) -> fx.GraphModule:
        """On GPU: inductor's layout decision, as an FX graph (module docstring)."""
        from torch._inductor.graph import GraphLowering

        training = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
        if not GraphLowering.decide_layout_opt(gm, is_inference=not training):
            return gm
        return _channels_last_convs(gm)


def _channels_last_convs(gm: fx.GraphModule) -> fx.GraphModule:
    """Every 4-d convolution computes on channels-last input and weight; each graph output
    that eager gives contiguous is returned contiguous."""
    graph = gm.graph
    convs = [n for n in graph.nodes if n.op == "call_function" and n.target in (
        torch.ops.aten.convolution.default, torch.nn.functional.conv2d, torch.conv2d)]
    for conv in convs:
        with graph.inserting_before(conv):
            for arg in conv.args[:2]:
                if isinstance(arg, fx.Node):
                    cl = graph.call_method("contiguous", (arg,),
                                           {"memory_format": torch.channels_last})
                    conv.replace_input_with(arg, cl)
    output = next(iter(graph.find_nodes(op="output")))
    def restore(value):
        eager = value.meta.get("example_value") if isinstance(value, fx.Node) else None
        if isinstance(eager, torch.Tensor) and eager.is_contiguous():
            return graph.call_method("contiguous", (value,))
        return value

    with graph.inserting_before(output):
        output.args = torch.utils._pytree.tree_map(restore, output.args)
    gm.recompile()
    return gm
