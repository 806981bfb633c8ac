"""Entry points: ``compile``, ``explain``, ``explain_many``, ``memory_efficient_fusion``.

``compile`` and ``explain`` go through dynamo with the ``refimpl`` backend
(:mod:`refimpl.partition.backend`); the FX work is in :mod:`refimpl.partition.fx_edge`.

Never without refimpl's plan: dynamo keeps its compiled graphs per code object and, past its
recompile limit (8), silently runs a frame eagerly. So each :func:`compile` hands dynamo a
fresh code object (:func:`fresh_entry`: a new one per call of ``compile``, so a budget sweep
never accumulates entries on one), calls run with dynamo's
``fail_on_recompile_limit_hit`` on (a frame past the limit raises instead of running
eagerly), and a compiled call that reached no graph of the backend raises.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch._decomp import core_aten_decompositions

from refimpl.partition.backend import DynamoBackend
from refimpl.partition.fx_edge import partition_fn
from refimpl.partition.graph import JointGraph, TraceError
from refimpl.partition.options import DEFAULT_SOLVER, PartitionOptions
from refimpl.partition.partitioner import choose_many
from refimpl.partition.plan import Plan
from refimpl.partition.region import effective_budget

__all__ = ["compile", "explain", "explain_many", "joint_graph", "memory_efficient_fusion",
           "partition_fn"]


class RanWithoutPlan(RuntimeError):
    """A compiled call ran without refimpl's partitioner (dynamo compiled no graph)."""


def _options(memory_budget: float | None, runtime_estimator: str, solver: str,
             **extra: Any) -> PartitionOptions:
    budget = 1.0 if memory_budget is None else memory_budget
    return PartitionOptions(memory_budget=budget, runtime_estimator=runtime_estimator,
                            solver=solver, **extra)


def _check_outputs(fn: Callable[..., Any], out: Any) -> Any:
    leaves = torch.utils._pytree.tree_leaves(out)
    if not any(isinstance(x, torch.Tensor) for x in leaves):
        raise TypeError(f"fn={getattr(fn, '__name__', fn)!r} returned "
                        f"{type(out).__name__} with no tensor in it; the partitioner "
                        "needs tensor outputs")
    return out


#: numbers the code objects of :func:`fresh_entry`, one per compile in this process
_ENTRY_NUMBERS = itertools.count()


def fresh_entry(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` behind a function whose code object is new, so that dynamo's per-code cache
    (and its recompile limit) starts empty for this compile; ``fn`` is inlined into it.

    The code's name is new too (a process-wide count): dynamo also keeps what it learnt of a
    frame (automatic dynamic sizes and floats) by file, line and name, so a name used again
    would carry one compile's findings into the next."""
    def entry(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    code = entry.__code__.replace(co_name=f"refimpl_compiled_{next(_ENTRY_NUMBERS)}")
    return types.FunctionType(code, entry.__globals__, code.co_name, None,
                              entry.__closure__)


def _run_with_plan(compiled: Callable[..., Any], backend: DynamoBackend, fn: Callable[..., Any],
                   args: tuple, kwargs: dict) -> Any:
    """One compiled call that raises rather than running without refimpl's plan."""
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        out = compiled(*args, **kwargs)
    if backend.compiled == 0:
        raise RanWithoutPlan(f"fn={getattr(fn, '__name__', fn)!r}: dynamo compiled no graph "
                             "of it, so it ran eagerly without refimpl's plan")
    return _check_outputs(fn, out)


def compile(fn: Callable[..., Any], *, memory_budget: float | None = None,
            runtime_estimator: str = "flops", solver: str = DEFAULT_SOLVER,
            **options: Any) -> Callable[..., Any]:
    """``fn`` compiled through dynamo and AOTAutograd with refimpl's partitioner: a
    training-capable callable (outputs and gradients as eager). ``memory_budget`` in
    [0, 1] (None: 1.0); ``runtime_estimator`` "flops" or "profile"; ``solver`` "exact"
    (default), "brute", or torch's knapsack heuristics "dp", "ilp", "greedy"; ``options``:
    the other :class:`PartitionOptions` fields by keyword (``profile_repeats``,
    ``solver_time_limit``, ``cse``, ``optimize_layout``), checked here. Every call runs
    refimpl's plan or raises (module docstring), however often ``fn`` is compiled."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    backend = DynamoBackend(_options(memory_budget, runtime_estimator, solver, **options))
    compiled = torch.compile(fresh_entry(fn), backend=backend)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return _run_with_plan(compiled, backend, fn, args, kwargs)

    return run


def _check_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Refuse, in one line, a ``fn`` that is not callable or that these arguments do not fit
    (else dynamo would report either as a many-line tracing error)."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable or an nn.Module, got {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let the call say
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"fn={getattr(fn, '__name__', fn)!r} does not take these arguments: "
                        f"{exc}") from None


def _joint_graph(fn: Callable[..., Any], args: tuple, kwargs: dict,
                 options: PartitionOptions) -> tuple[JointGraph, list[Plan]]:
    """The plain joint graph of ``fn(*args, **kwargs)`` as ``compile`` partitions it (one
    forward run), and the plan made for it at ``options``."""
    _check_call(fn, args, kwargs)
    graphs: list[JointGraph] = []
    plans: list[Plan] = []
    backend = DynamoBackend(options, on_plan=plans.append, on_graph=graphs.append)
    compiled = torch.compile(fresh_entry(fn), backend=backend, fullgraph=True)
    with torch.enable_grad():
        _run_with_plan(compiled, backend, fn, args, kwargs)
    if not graphs:
        raise TraceError(f"fn={getattr(fn, '__name__', fn)!r} is not differentiable here: "
                         "no input or parameter it uses requires grad, so there is no "
                         "backward to plan")
    return graphs[0], plans


def explain(fn: Callable[..., Any], *args: Any, memory_budget: float | None = None,
            runtime_estimator: str = "flops", solver: str = DEFAULT_SOLVER,
            **kwargs: Any) -> Plan:
    """The :class:`Plan` refimpl makes for ``fn(*args, **kwargs)``: what is saved, what is
    recomputed, bytes, recompute cost. Runs the forward once."""
    options = _options(memory_budget, runtime_estimator, solver, optimize_layout=False)
    return _joint_graph(fn, args, kwargs, options)[1][0]


def joint_graph(fn: Callable[..., Any], *args: Any, runtime_estimator: str = "flops",
                cse: bool = True, **kwargs: Any) -> JointGraph:
    """The plain :class:`JointGraph` that ``compile`` partitions for ``fn(*args, **kwargs)``
    (one forward run); :func:`refimpl.partition.partitioner.choose_many` plans on it."""
    options = _options(1.0, runtime_estimator, DEFAULT_SOLVER, optimize_layout=False, cse=cse)
    return _joint_graph(fn, args, kwargs, options)[0]


def explain_many(fn: Callable[..., Any], *args: Any, memory_budgets: Sequence[float],
                 runtime_estimator: str = "flops", solver: str = DEFAULT_SOLVER,
                 cse: bool = True, **kwargs: Any) -> list[Plan]:
    """One :class:`Plan` per budget of ``memory_budgets``, from ONE trace of
    ``fn(*args, **kwargs)`` (the graph ``compile`` partitions; one forward run): the
    reference side of a property costs one trace however many budgets it checks."""
    if isinstance(memory_budgets, str) or not isinstance(memory_budgets, Sequence):
        raise TypeError(f"memory_budgets must be a sequence of numbers in [0, 1], got "
                        f"{type(memory_budgets).__name__}")
    options = _options(1.0, runtime_estimator, solver, optimize_layout=False, cse=cse)
    # each budget checked (and made a float) before the trace
    budgets = [_options(b, runtime_estimator, solver).memory_budget for b in memory_budgets]
    graph, _ = _joint_graph(fn, args, kwargs, options)
    # a region budget on the graph replaces each of them, as it replaces compile's budget
    return choose_many(graph, [effective_budget(graph, b) for b in budgets], options)


def memory_efficient_fusion(fn: Callable[..., Any] | nn.Module,
                            options: PartitionOptions | None = None) -> Callable[..., Any]:
    """As ``functorch.compile.memory_efficient_fusion``, with refimpl's partitioner (budget
    1.0 unless ``options`` says otherwise) and AOTAutograd's default decompositions; the two
    graphs run eagerly."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from functorch.compile import aot_function, aot_module, make_boxed_func

    if not callable(fn):
        raise TypeError(f"fn must be a callable or an nn.Module, got {type(fn).__name__}")
    if options is not None and not isinstance(options, PartitionOptions):
        raise TypeError(f"options must be a refimpl.PartitionOptions or None, got "
                        f"{type(options).__name__}")
    config = {"fw_compiler": lambda g, _: make_boxed_func(g),
              "bw_compiler": lambda g, _: make_boxed_func(g),
              "partition_fn": functools.partial(partition_fn, options=options),
              "decompositions": core_aten_decompositions()}
    if isinstance(fn, nn.Module):
        return aot_module(fn, **config)
    return aot_function(fn, **config)
