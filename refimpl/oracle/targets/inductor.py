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

Layout: inductor optimises layouts (channels-last convolutions) only on GPU, and not as an FX
pass: it decides per graph (``GraphLowering.decide_layout_opt``) and lowers the convolutions
channels-last itself. So the target provides the layout component as a compiler
(:meth:`InductorBackend.layout_compiler`): the layout properties run what inductor produces,
forward and backward, and read whether it converted from that decision, recorded as inductor
takes it. Inductor's caches (its FX graph cache and AOTAutograd's) are off in that compiler, so
every graph is lowered and decided afresh. Without a CUDA device the component is absent,
with its reason in ``skip_reasons``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
import torch._functorch.config as functorch_config
from torch import fx

from refimpl.partition.api import fresh_entry

NO_GPU_LAYOUT = ("the inductor target's layout component is checked on GPU, where inductor "
                 "decides by its heuristics; no CUDA device here")

NOT_AN_FX_PASS = ("inductor lowers convolutions channels-last itself, not as an FX pass: its "
                  "layout component is layout_compiler")


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
            self.layout_compiler = None  # absent: the layout properties skip, with the reason
            self.skip_reasons["layout_compiler"] = NO_GPU_LAYOUT
        self.skip_reasons["optimize_layout"] = self.skip_reasons.get(
            "layout_compiler", NOT_AN_FX_PASS)

    def compile(self, fn: Callable[..., Any], *, memory_budget: float | None = None):
        # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
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

    def layout_compiler(self) -> InductorLayoutCompiler:
        """A fresh dynamo backend that compiles with inductor and records its layout decisions
        (module docstring)."""
        return InductorLayoutCompiler()


class InductorLayoutCompiler:
    """``torch.compile``'s inductor as a dynamo backend, with ``fallback_random`` as in
    :meth:`InductorBackend.compile` and its caches off; ``decisions`` gets inductor's layout
    decision for each graph it lowers while a graph compiles (the forward: the backward is
    lowered later, as the forward decided), and ``node_counts`` the node count of that graph
    (AOTAutograd's: parameters lifted to inputs, ops decomposed), the count inductor's
    nodes-per-conv limit reads."""

    #: On CPU, where mkldnn is available, inductor converts every graph with a convolution
    #: (no heuristic to check) and each graph costs a C++ compile: checked on GPU only.
    layout_devices = ("cuda",)

    def __init__(self) -> None:
        self.decisions: list[bool] = []
        self.node_counts: list[int] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]):
        # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.graph import GraphLowering

        decide = GraphLowering.decide_layout_opt

        def recorded(graph: fx.GraphModule, *, is_inference: bool) -> bool:
            decision = decide(graph, is_inference=is_inference)
            self.decisions.append(bool(decision))
            self.node_counts.append(len(graph.graph.nodes))
            return decision

        patches = {"fallback_random": True, "fx_graph_cache": False}
        with mock.patch.object(GraphLowering, "decide_layout_opt", staticmethod(recorded)), \
                functorch_config.patch(enable_autograd_cache=False):
            return compile_fx(gm, example_inputs, config_patches=patches)
