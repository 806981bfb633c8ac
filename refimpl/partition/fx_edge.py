"""The partitioner's FX edge: everything that touches ``torch.fx``, in one module.

* :func:`joint_graph_from_fx`: an AOTAutograd joint ``GraphModule`` -> plain
  :class:`~refimpl.partition.graph.JointGraph` (roles, bytes, op facts, runtime, and the
  checkpoint annotations torch records in node meta: ``recompute``, ``ac_graph_id``, and
  torch's region budgets (2.13 on), :mod:`refimpl.partition.region`);
* :func:`partition_fn`: what AOTAutograd calls with the joint graph: the joint-graph CSE stage
  (``PartitionOptions.cse``), the plain graph, :func:`~refimpl.partition.partitioner.choose`,
  then forward and backward modules extracted by AOTAutograd's own
  ``_extract_fwd_bwd_modules`` (it copies the joint graph and keeps what each side needs).

This module imports neither the API nor the dynamo backend; both import it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import fx
from torch.utils._ordered_set import OrderedSet

from refimpl.cse import fx_graph_cse
from refimpl.partition import cost, runtime
from refimpl.partition.candidates import CHEAP_OPS
from refimpl.partition.graph import JointGraph, JointNode
from refimpl.partition.options import PartitionOptions
from refimpl.partition.partitioner import choose
from refimpl.partition.plan import Plan
from refimpl.partition.region import effective_budget, region_budget_of

__all__ = ["joint_graph_from_fx", "partition_fn"]


def _is_tangent(node: fx.Node) -> bool:
    return node.op == "placeholder" and ("tangents" in node.target or "bwd_seed" in node.target)


def _draws_random(node: fx.Node) -> bool:
    """Tagged ``nondeterministic_seeded``, unless a ``dropout_p`` argument is 0 (attention
    kernels carry the tag for their optional dropout; without it they are deterministic)."""
    target = node.target
    if torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    for i, arg in enumerate(target._schema.arguments):
        if arg.name == "dropout_p":
            value = node.args[i] if i < len(node.args) else node.kwargs.get(
                "dropout_p", arg.default_value)
            return value != 0
    return True


def _op_facts(node: fx.Node, facts: dict[fx.Node, dict]) -> dict[str, Any]:
    """Schema and tag facts about a call_function node (``facts``: earlier nodes')."""
    target = node.target
    if target is operator.getitem:  # an element of a view op's tuple (unbind) is a view
        source = node.args[0]
        return {"op": "getitem", "view": facts.get(source, {}).get("view", False)}
    if not isinstance(target, torch._ops.OpOverload):
        return {"op": getattr(target, "__name__", str(target))}
    schema = target._schema
    returns_alias = any(r.alias_info is not None and not r.alias_info.is_write
                        for r in schema.returns)
    return {
        "op": str(target.overloadpacket.__name__) + "." + target._overloadname,
        "random": _draws_random(node),
        "mutable": schema.is_mutable,
        "pointwise": torch.Tag.pointwise in target.tags,
        "view": returns_alias,
    }


def _roles(gm: fx.GraphModule) -> dict[fx.Node, str]:
    """primal / tangent / backward (descends from a tangent) / forward / output."""
    roles: dict[fx.Node, str] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            roles[node] = "tangent" if _is_tangent(node) else "primal"
        elif node.op == "output":
            roles[node] = "output"
        elif any(roles[i] in ("tangent", "backward") for i in node.all_input_nodes):
            roles[node] = "backward"
        else:
            roles[node] = "forward"
    return roles


def _forward_ancestors(outputs: list[fx.Node]) -> set[fx.Node]:
    """Every node the forward outputs depend on (themselves included)."""
    seen: set[fx.Node] = set()
    stack = [o for o in outputs if isinstance(o, fx.Node)]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def _input_aliases(gm: fx.GraphModule, facts: dict[fx.Node, dict]) -> set[fx.Node]:
    """Primals and the views (chains of views) of primals: saving them costs no memory."""
    aliases: set[fx.Node] = set()
    for node in gm.graph.nodes:
        is_primal = node.op == "placeholder" and not _is_tangent(node)
        base = node.args[0] if node.args and facts.get(node, {}).get("view") else None
        if is_primal or (isinstance(base, fx.Node) and base in aliases):
            aliases.add(node)
    return aliases


def _policy(node: fx.Node) -> str:
    """torch's checkpoint policy in ``node.meta["recompute"]``, lower case, or ``""``."""
    policy = node.meta.get("recompute")
    name = getattr(policy, "name", None)
    return name.lower() if isinstance(name, str) else ""


def _mutated_primals(gm: fx.GraphModule, roles: dict[fx.Node, str],
                     mutated_inputs: tuple[int, ...]) -> set[fx.Node]:
    """The primal placeholders at positions ``mutated_inputs`` (AOTAutograd's input order)."""
    primals = [n for n in gm.graph.nodes if roles.get(n) == "primal"]
    for index in mutated_inputs:
        if not 0 <= index < len(primals):
            raise ValueError(f"mutated_inputs: index {index} is not a primal position "
                             f"(the joint graph has {len(primals)} primals)")
    return {primals[i] for i in mutated_inputs}


def _priced(info: dict) -> bool:
    """Whether recomputing the op costs anything: not for cheap ops (pointwise, views,
    ``candidates.CHEAP_OPS``), which torch's min-cut recomputes for free (fused into the
    backward) and its knapsack never prices. The FLOP table gives them 0 anyway; this keeps
    the ``profile`` estimator pricing the same ops, so a cosine's measured microseconds
    cannot outweigh a matmul's in the plan (torch's plan, on any machine)."""
    base = str(info.get("op", "")).split(".")[0]
    return not (info.get("pointwise") or info.get("view") or base in CHEAP_OPS)


def joint_graph_from_fx(gm: fx.GraphModule, num_fwd_outputs: int,
                        runtime_of: Callable[[fx.Node], float],
                        mutated_inputs: tuple[int, ...] = ()) -> JointGraph:
    """Plain-data view of an AOTAutograd joint graph (roles, bytes, op facts, runtime,
    checkpoint annotations; ``mutated_inputs``: positions of the primals the forward
    writes to in place)."""
    roles = _roles(gm)
    mutated = _mutated_primals(gm, roles, mutated_inputs)
    output = next(iter(gm.graph.find_nodes(op="output")))
    outs = list(torch.utils._pytree.tree_leaves(output.args))
    fw_required = _forward_ancestors(outs[:num_fwd_outputs])
    facts: dict[fx.Node, dict] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            facts[n] = _op_facts(n, facts)
    aliases = _input_aliases(gm, facts)
    nodes: list[JointNode] = []
    storage: dict[fx.Node, str] = {}
    for node in gm.graph.nodes:
        info = facts.get(node, {"op": node.op})
        val = node.meta.get("val")
        base = node.args[0] if info.get("view") and node.args else None
        storage[node] = storage[base] if isinstance(base, fx.Node) else node.name
        nodes.append(JointNode(
            name=node.name, op=info["op"], role=roles[node],
            inputs=[i.name for i in node.all_input_nodes],
            users=[u.name for u in node.users],
            bytes=0 if node in aliases else cost.value_bytes(val),
            savable=cost.is_savable(val), is_sym=cost.is_sym(val),
            random=info.get("random", False), mutable=info.get("mutable", False),
            pointwise=info.get("pointwise", False), view=info.get("view", False),
            storage=storage[node], fw_required=node in fw_required,
            runtime=runtime_of(node) if roles[node] == "forward" and _priced(info) else 0.0,
            policy=_policy(node), ac_graph_id=node.meta.get("ac_graph_id"),
            mutated=node in mutated, region_budget=region_budget_of(node.meta)))
    bw_outputs = [o.name for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]
    return JointGraph(nodes, num_fwd_outputs, bw_outputs)


def prepare(joint_module: fx.GraphModule, num_fwd_outputs: int, options: PartitionOptions,
            mutated_inputs: tuple[int, ...] = ()) -> JointGraph:
    """The stages before the solver, in place on ``joint_module``: dead code out, the
    joint-graph CSE (``options.cse``, refimpl's :func:`refimpl.cse.fx_graph_cse`), then the
    plain graph with the estimator's runtimes."""
    joint_module.graph.eliminate_dead_code()
    if options.cse:
        joint_module.graph = fx_graph_cse(joint_module.graph)  # the setter recompiles
    else:
        joint_module.recompile()
    estimate = runtime.runtime_estimator(options.runtime_estimator, options.profile_repeats)
    return joint_graph_from_fx(joint_module, num_fwd_outputs, estimate, mutated_inputs)


def partition_fn(joint_module: fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int,
                 static_lifetime_input_indices: list[int] | None = None,
                 options: PartitionOptions | None = None,
                 on_plan: Callable[[Plan], None] | None = None,
                 on_graph: Callable[[JointGraph], None] | None = None,
                 mutated_inputs: tuple[int, ...] = (),
                 **_unused: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd partition function: refimpl's plan, as (forward, backward) modules.

    ``options`` defaults to ``PartitionOptions()`` (budget 1.0; a region budget on the
    graph replaces it, :func:`~refimpl.partition.region.effective_budget`); ``on_plan`` receives the
    :class:`Plan`, ``on_graph`` the plain :class:`JointGraph` it was made on;
    ``mutated_inputs`` the primal positions the forward writes to in place
    (:func:`refimpl.partition.mutation.mutated_inputs`). Use
    ``functools.partial(partition_fn, options=...)`` to plug it in."""
    options = options or PartitionOptions()
    if not isinstance(options, PartitionOptions):
        raise TypeError(f"options must be a PartitionOptions, got {type(options).__name__}")
    graph = prepare(joint_module, num_fwd_outputs, options, mutated_inputs)
    if on_graph is not None:
        on_graph(graph)
    options = replace(options, memory_budget=effective_budget(graph, options.memory_budget))
    plan = choose(graph, options)
    if on_plan is not None:
        on_plan(plan)
    return extract(joint_module, graph, plan, num_fwd_outputs, static_lifetime_input_indices)


def extract(joint_module: fx.GraphModule, graph: JointGraph, plan: Plan, num_fwd_outputs: int,
            static_lifetime_input_indices: list[int] | None) -> tuple[fx.GraphModule, ...]:
    """Forward and backward modules that hand over exactly the plan's saved values."""
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._functorch.partitioners import _extract_fwd_bwd_modules

    nodes = {n.name: n for n in joint_module.graph.nodes}
    chosen = sorted((nodes[name] for name in plan.saved_inputs + plan.saved),
                    key=lambda n: graph.order[n.name])
    sym = [n for n in chosen if graph.by_name[n.name].is_sym]
    tensors = [n for n in chosen if not graph.by_name[n.name].is_sym]
    primals = [n for n in joint_module.graph.nodes
               if n.op == "placeholder" and graph.by_name[n.name].role == "primal"]
    static = OrderedSet(primals[i] for i in static_lifetime_input_indices or ())
    return _extract_fwd_bwd_modules(joint_module, tensors, saved_sym_nodes=sym,
                                    num_fwd_outputs=num_fwd_outputs,
                                    static_lifetime_input_nodes=static)
