"""Built-in target ``fx-cse-pass``: ``torch.fx.passes.dialect.common.cse_pass.CSEPass``.

torch's other CSE: a dialect-agnostic ``PassBase`` over a ``GraphModule``, merging nodes with
the same target and the same (flattened) arguments, except placeholders, ``get_attr``, the
output and the ops in its ``banned_ops``. It is checked behind the CSE component's
properties (soundness, idempotence, identical outputs, random draws and writes kept).

The adapter (``fx_graph_cse``: ``fx.Graph`` in, ``fx.Graph`` out):

1. the graph's owning ``GraphModule`` is the pass's input (its ``get_attr`` targets resolve
   there); a graph without one is wrapped in ``GraphModule(torch.nn.Module(), graph)``;
2. the pass is ``CSEPass(banned_ops=get_CSE_banned_ops())``: torch's own list of random and
   in-place packets for this pass, the configuration its docstring asks for ("specify the
   random ops in ban list"). ``CSEPass()`` with no list bans nothing;
3. the result's graph is returned. When the pass changes nothing it returns its input
   module unchanged; the adapter then returns a copy of the graph, so the caller never gets
   the very graph it passed in (the contract of ``fx_graph_cse``: the input is unchanged).

Only the CSE component is provided; every other component is reported as skipped.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import fx
from torch.fx.passes.dialect.common.cse_pass import CSEPass, get_CSE_banned_ops


class FxCsePassBackend:
    """``CSEPass(banned_ops=get_CSE_banned_ops())`` as a Backend (module docstring)."""

    name = "fx-cse-pass"
    version = f"torch {torch.__version__} (torch.fx.passes.dialect.common.cse_pass.CSEPass)"
    skip_reasons: ClassVar[dict[str, str]] = {m: "fx-cse-pass is a CSE pass only" for m in (
        "flop_counter", "compile", "checkpoint", "optimize_layout", "model_flops")}

    def fx_graph_cse(self, graph: fx.Graph) -> fx.Graph:
        module = graph.owning_module
        if module is None:
            module = fx.GraphModule(torch.nn.Module(), graph)
        result = CSEPass(banned_ops=get_CSE_banned_ops())(module)
        if result.graph_module is module:  # unchanged: never hand back the input graph
            copy = fx.Graph(tracer_cls=graph._tracer_cls)
            copy.output(copy.graph_copy(graph, {}))
            copy._codegen = graph._codegen
            return copy
        return result.graph_module.graph
