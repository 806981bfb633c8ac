"""Hand-built joint-graph nodes for the partitioner's unit tests.

:class:`~refimpl.partition.graph.JointNode` has no defaults (refimpl's one builder states
every fact). A test graph states only what it is about; :func:`node` fills the rest with the
facts of a plain, savable, deterministic value that nothing annotates.
"""

from __future__ import annotations

from refimpl.partition.graph import JointNode

PLAIN = {"bytes": 0, "savable": True, "is_sym": False, "random": False, "mutable": False,
         "pointwise": False, "view": False, "fw_required": False, "runtime": 0.0,
         "users": [], "policy": "", "ac_graph_id": None, "mutated": False,
         "region_budget": None}


def node(name: str, role: str, inputs=(), **facts) -> JointNode:
    """A node named ``name`` of ``role`` reading ``inputs``: ``facts`` over :data:`PLAIN`,
    its op its name and its storage its own unless given."""
    given = {**PLAIN, "op": name, "storage": name, **facts}
    return JointNode(name=name, role=role, inputs=list(inputs), **given)
