"""Trace: the joint forward+backward aten graph, and its plain-data form.

AOTAutograd traces a function into one *joint* FX graph whose placeholders are the forward
inputs (``primals_*``) and the incoming gradients (``tangents_*``), and whose outputs are the
forward outputs followed by the input gradients. refimpl plugs into AOTAutograd for tracing
and running (:func:`trace_joint` here, the dynamo backend in ``backend.py``); everything the
partitioner decides is decided on :class:`JointGraph`, plain data built by
:func:`joint_graph_from_fx`.

Roles (the invariant every later stage relies on):
    primal    a forward input; never recomputed, saving it costs no activation memory.
    backward  a node that depends on a tangent: it runs in the backward graph, always.
    forward   every other live node: computed in the forward, then either saved for the
              backward or recomputed there. ``fw_required`` marks the ones the forward
              outputs need (recomputing those is extra work; the rest are backward-only
              work that merely may run early).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from refimpl.partition import cost


@dataclass
class JointNode:
    """One node of the joint graph, as plain data."""

    name: str
    op: str  # "placeholder", "output", or the aten op's name
    inputs: list[str]
    role: str  # "primal" | "tangent" | "forward" | "backward" | "output"
    bytes: int = 0  # activation bytes kept alive if this value is saved (0 for input aliases)
    savable: bool = True  # False for tuples and other values that cannot be saved as such
    is_sym: bool = False  # a SymInt/SymFloat (dynamic shapes), saved as a symbol
    random: bool = False  # nondeterministic_seeded: recomputing it would draw fresh values
    mutable: bool = False  # writes to an argument
    pointwise: bool = False
    view: bool = False
    storage: str = ""  # name of the node whose storage this value lives in (views: the base)
    fw_required: bool = False  # the forward outputs need it
    runtime: float = 0.0  # estimator units (FLOPs or seconds)
    users: list[str] = field(default_factory=list)


@dataclass
class JointGraph:
    """The joint graph in topological order, with the number of forward outputs."""

    nodes: list[JointNode]
    num_fwd_outputs: int
    bw_outputs: list[str] = field(default_factory=list)  # names returned as gradients

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.order = {n.name: i for i, n in enumerate(self.nodes)}

    def read_by_backward(self) -> list[str]:
        """Forward-side names the backward uses directly (inputs of backward nodes, and
        forward-side values returned as gradients)."""
        names = [i for n in self.nodes if n.role == "backward" for i in n.inputs]
        names += self.bw_outputs
        return [n for n in dict.fromkeys(names) if self.by_name[n].role in ("primal", "forward")]

    def forward_side(self) -> list[JointNode]:
        """Primals and forward nodes: the nodes a plan may save or recompute."""
        return [n for n in self.nodes if n.role in ("primal", "forward")]


class TraceError(ValueError):
    """A function that cannot be traced into a joint graph (the message says why)."""


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


def joint_graph_from_fx(gm: fx.GraphModule, num_fwd_outputs: int,
                        runtime_of: Callable[[fx.Node], float]) -> JointGraph:
    """Plain-data view of an AOTAutograd joint graph (roles, bytes, op facts, runtime)."""
    roles = _roles(gm)
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
            runtime=runtime_of(node) if roles[node] == "forward" else 0.0))
    bw_outputs = [o.name for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]
    return JointGraph(nodes, num_fwd_outputs, bw_outputs)


def trace_joint(fn: Callable[..., Any], *args: Any) -> tuple[fx.GraphModule, int]:
    """The joint graph AOTAutograd builds for ``fn(*args)``, and its number of forward
    outputs. ``fn`` runs once (forward only). Raises :class:`TraceError` if no input requires
    grad, so that there is no backward to partition."""
    from functorch.compile import aot_function, make_boxed_func

    leaves = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
    if not any(a.requires_grad for a in leaves):
        raise TraceError("args: no tensor argument requires grad, so fn has no backward "
                         "to partition (pass at least one tensor with requires_grad=True)")
    captured: list[tuple[fx.GraphModule, int]] = []

    def capture(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        from refimpl.partition.api import partition_fn

        captured.append((joint, num_fwd_outputs))  # partition_fn copies, never mutates
        return partition_fn(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)

    nop = make_boxed_func
    compiled = aot_function(fn, fw_compiler=lambda g, _: nop(g), partition_fn=capture)
    try:
        compiled(*args)
    except Exception as exc:  # the tracer's own message is the useful part
        raise TraceError(f"fn could not be traced into a joint graph: {exc}") from exc
    if not captured:
        raise TraceError("fn produced no joint graph (are its outputs tensors that "
                         "require grad?)")
    return captured[0]
