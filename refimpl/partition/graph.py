"""The joint graph as plain data: :class:`JointNode`, :class:`JointGraph`.

AOTAutograd traces a function into one *joint* graph whose placeholders are the forward
inputs (``primals_*``) and the incoming gradients (``tangents_*``) and whose outputs are the
forward outputs followed by the input gradients. Every decision of the partitioner is made on
this plain form (built from FX by :mod:`refimpl.partition.fx_edge`), so that an algorithm can
be read and checked without FX.

Roles (the invariant every later stage relies on):
    primal    a forward input; never recomputed, saving it costs no activation memory.
    backward  a node that depends on a tangent: it runs in the backward graph, always.
    forward   every other live node: computed in the forward, then either saved for the
              backward or recomputed there. ``fw_required`` marks the ones the forward
              outputs need (recomputing those is extra work; the rest are backward-only
              work that merely may run early, free in any plan).
User annotations (``torch.utils.checkpoint`` regions, selective-checkpoint policies) arrive
as ``policy`` (torch's ``CheckpointPolicy`` name, lower case, or ``""``) and ``ac_graph_id``;
a ``region_activation_memory_budget`` region (torch 2.13 on) as ``region_budget``
(:mod:`refimpl.partition.region`).
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.partition.errors import TraceError

__all__ = ["JointGraph", "JointNode", "TraceError"]


@dataclass(kw_only=True)
class JointNode:
    """One node of the joint graph, as plain data. Every field is given by name and none has
    a default: a node states all its facts (:func:`refimpl.partition.fx_edge.joint_graph_from_fx`
    is the one builder), so no fact can be left to a default by mistake."""

    name: str
    op: str  # "placeholder", "output", or the aten op's name
    inputs: list[str]
    role: str  # "primal" | "tangent" | "forward" | "backward" | "output"
    bytes: int  # activation bytes kept alive if this value is saved (0 for input aliases)
    savable: bool  # False for tuples and other values that cannot be saved as such
    is_sym: bool  # a SymInt/SymFloat (dynamic shapes), saved as a symbol
    random: bool  # nondeterministic_seeded: recomputing it would draw fresh values
    mutable: bool  # writes to an argument
    pointwise: bool
    view: bool
    storage: str  # name of the node whose storage this value lives in (views: the base)
    fw_required: bool  # the forward outputs need it
    runtime: float  # estimator units (FLOPs or seconds)
    users: list[str]
    policy: str  # "must_save", "prefer_save", "must_recompute", "prefer_recompute" or ""
    ac_graph_id: int | None  # which checkpoint region it belongs to
    mutated: bool  # a primal the forward writes to in place (refimpl.partition.mutation)
    region_budget: float | None  # torch (2.13 on): region_activation_memory_budget

    @property
    def must_recompute(self) -> bool:
        """Marked recompute by a checkpoint region or policy (torch's ``must_recompute``)."""
        return self.policy in ("must_recompute", "prefer_recompute")


@dataclass
class JointGraph:
    """The joint graph in topological order, with the number of forward outputs."""

    nodes: list[JointNode]
    num_fwd_outputs: int
    bw_outputs: list[str]  # names returned as gradients

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
