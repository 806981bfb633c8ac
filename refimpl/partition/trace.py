"""Former home of the FX glue, kept so that existing imports work: the names live in
:mod:`refimpl.partition.fx_edge` (FX) and :mod:`refimpl.partition.graph` (plain data)."""

from refimpl.partition.fx_edge import joint_graph_from_fx, trace_joint
from refimpl.partition.graph import JointGraph, JointNode, TraceError

__all__ = ["JointGraph", "JointNode", "TraceError", "joint_graph_from_fx", "trace_joint"]
