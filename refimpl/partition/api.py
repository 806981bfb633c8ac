"""Entry points: ``partition_fn``, ``compile``, ``explain``, ``memory_efficient_fusion``.

``partition_fn`` is what AOTAutograd calls with the joint graph; it is the FX edge of the
partitioner: joint GraphModule -> plain :class:`JointGraph` -> :func:`choose` -> forward and
backward GraphModules (extracted by AOTAutograd's own ``_extract_fwd_bwd_modules``, which
copies the joint graph and keeps what each side needs given the saved values).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import fx, nn

from refimpl.partition.cost import runtime_estimator as make_estimator
from refimpl.partition.options import PartitionOptions
from refimpl.partition.partitioner import choose
from refimpl.partition.plan import Plan
from refimpl.partition.trace import TraceError, joint_graph_from_fx


def partition_fn(joint_module: fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int,
                 static_lifetime_input_indices: list[int] | None = None,
                 options: PartitionOptions | None = None,
                 on_plan: Callable[[Plan], None] | None = None,
                 **_unused: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd partition function: refimpl's plan, as (forward, backward) modules.

    ``options`` defaults to ``PartitionOptions()`` (budget 1.0); ``on_plan`` receives the
    :class:`Plan`. Use ``functools.partial(partition_fn, options=...)`` to plug it in."""
    from torch._functorch.partitioners import _extract_fwd_bwd_modules
    from torch.utils._ordered_set import OrderedSet

    options = options or PartitionOptions()
    joint_module.graph.eliminate_dead_code()
    joint_module.recompile()
    estimate = make_estimator(options.runtime_estimator, options.profile_repeats)
    graph = joint_graph_from_fx(joint_module, num_fwd_outputs, estimate)
    plan = choose(graph, options)
    if on_plan is not None:
        on_plan(plan)
    nodes = {n.name: n for n in joint_module.graph.nodes}
    chosen = [nodes[name] for name in plan.saved_inputs + plan.saved]
    chosen.sort(key=lambda n: graph.order[n.name])
    sym = [n for n in chosen if graph.by_name[n.name].is_sym]
    tensors = [n for n in chosen if not graph.by_name[n.name].is_sym]
    primals = [n for n in joint_module.graph.nodes
               if n.op == "placeholder" and graph.by_name[n.name].role == "primal"]
    static = OrderedSet(primals[i] for i in static_lifetime_input_indices or ())
    return _extract_fwd_bwd_modules(joint_module, tensors, saved_sym_nodes=sym,
                                    num_fwd_outputs=num_fwd_outputs,
                                    static_lifetime_input_nodes=static)


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


def compile(fn: Callable[..., Any], *, memory_budget: float | None = None,
            runtime_estimator: str = "flops", solver: str = "dp") -> Callable[..., Any]:
    """``fn`` compiled through dynamo and AOTAutograd with refimpl's partitioner: a
    training-capable callable (outputs and gradients as eager). ``memory_budget`` in
    [0, 1] (None: 1.0); ``runtime_estimator`` "flops" or "profile"; ``solver`` "dp",
    "ilp", "greedy" or "brute". Each call is a new ``torch.compile``: compiling one function
    more often than dynamo's recompile limit (8) needs ``torch._dynamo.reset()`` in between,
    or dynamo falls back to eager."""
    from refimpl.partition.backend import DynamoBackend

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    compiled = torch.compile(fn, backend=DynamoBackend(
        _options(memory_budget, runtime_estimator, solver)))

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return _check_outputs(fn, compiled(*args, **kwargs))

    return run


def explain(fn: Callable[..., Any], *args: Any, memory_budget: float | None = None,
            runtime_estimator: str = "flops", solver: str = "dp", **kwargs: Any) -> Plan:
    """The :class:`Plan` refimpl makes for ``fn(*args, **kwargs)``: what is saved, what is
    recomputed, bytes, recompute cost. Runs the forward once; resets dynamo's caches
    (``torch._dynamo.reset()``) so that the graph is partitioned afresh."""
    from refimpl.partition.backend import DynamoBackend

    options = _options(memory_budget, runtime_estimator, solver, optimize_layout=False)
    plans: list[Plan] = []
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=DynamoBackend(options, on_plan=plans.append),
                             fullgraph=True)
    with torch.enable_grad():
        _check_outputs(fn, compiled(*args, **kwargs))
    if not plans:
        raise TraceError(f"fn={getattr(fn, '__name__', fn)!r} is not differentiable here: "
                         "no input or parameter it uses requires grad, so there is no "
                         "backward to plan")
    return plans[0]


def memory_efficient_fusion(fn: Callable[..., Any] | nn.Module,
                            options: PartitionOptions | None = None) -> Callable[..., Any]:
    """As ``functorch.compile.memory_efficient_fusion``, with refimpl's partitioner (budget
    1.0 unless ``options`` says otherwise) and AOTAutograd's default decompositions; the two
    graphs run eagerly."""
    from functorch.compile import aot_function, aot_module, make_boxed_func
    from torch._decomp import core_aten_decompositions

    if not callable(fn):
        raise TypeError(f"fn must be a callable or an nn.Module, got {type(fn).__name__}")
    config = {"fw_compiler": lambda g, _: make_boxed_func(g),
              "bw_compiler": lambda g, _: make_boxed_func(g),
              "partition_fn": functools.partial(partition_fn, options=options),
              "decompositions": core_aten_decompositions()}
    if isinstance(fn, nn.Module):
        return aot_module(fn, **config)
    return aot_function(fn, **config)
