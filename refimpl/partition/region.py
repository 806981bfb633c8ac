"""Region budgets: ``torch.autograd.graph.region_activation_memory_budget``.

torch 2.13.0 and 2.14.1 have the API (2.10 does not). Under ``torch.compile``, torch records
the budget of the region a forward op was traced in as a float in the op's FX meta
(``meta["custom"][MEMORY_BUDGET_ANNOTATION_KEY]``, the key
``torch.fx.traceback`` names); AOTAutograd copies it onto the joint graph's nodes. torch's
partitioner applies ONE budget per joint graph, so a region budget is a graph-wide override:

1. no node carries a region budget: the global budget (``PartitionOptions.memory_budget``);
2. the annotated nodes carry two or more budgets: an error (use a graph break between them);
3. some forward op the forward outputs need carries none (the region covers only part of the
   graph): an error, never the budget applied graph-wide nor ignored;
4. otherwise the region's budget replaces the global one.

Feature detection: :data:`ANNOTATION_KEY` is ``None`` on releases without the API, and then
no node carries a region budget (rule 1): nothing changes there.
Invariant: :func:`effective_budget` returns the global budget or the one region budget, and
raises :class:`RegionBudgetError` in every other case.
"""

from __future__ import annotations

from typing import Any

import torch.fx.traceback as fx_traceback

from refimpl.partition.errors import PartitionError
from refimpl.partition.graph import JointGraph

#: the node-meta key torch writes region budgets under; None where torch has no region budgets.
ANNOTATION_KEY: str | None = getattr(fx_traceback, "MEMORY_BUDGET_ANNOTATION_KEY", None)


class RegionBudgetError(PartitionError):
    """Region budgets that no single graph-wide budget expresses (module docstring, 2-3)."""


def region_budget_of(meta: dict[str, Any]) -> float | None:
    """The region budget an FX node's ``meta`` carries, or None (none, or no such API)."""
    custom = meta.get("custom")
    if ANNOTATION_KEY is None or not isinstance(custom, dict):
        return None
    budget = custom.get(ANNOTATION_KEY)
    return None if budget is None else float(budget)


def effective_budget(graph: JointGraph, global_budget: float) -> float:
    """The budget the partitioner applies to ``graph`` (module docstring, rules 1-4)."""
    budgets = sorted({n.region_budget for n in graph.nodes if n.region_budget is not None})
    if not budgets:
        return global_budget
    if len(budgets) > 1:
        raise RegionBudgetError(
            f"region_activation_memory_budget: one joint graph carries budgets {budgets}; "
            "torch applies one budget per graph: separate the regions with a graph break "
            "(torch._dynamo.graph_break())")
    uncovered = [n.name for n in graph.nodes if n.role == "forward" and n.fw_required
                 and n.op not in ("placeholder", "output") and n.region_budget is None]
    if uncovered:
        raise RegionBudgetError(
            f"region_activation_memory_budget({budgets[0]}) covers only part of the graph: "
            f"forward ops {uncovered} are outside it; wrap the whole compiled forward in the "
            "region, or put a graph break at its boundaries")
    return budgets[0]
