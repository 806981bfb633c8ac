"""Partition mutants of seed 731252159 that no program can tell apart from the original,
each shown equal on its whole (finite) domain, not asserted.

``refimpl/partition/graph.py:76``, ``n.role == "backward"`` -> ``n.role <= "backward"``: a
joint node's role is one of the five names ``fx_edge`` assigns (``JointNode.role``), and of
those only ``"backward"`` sorts at or before ``"backward"``, so both conditions pick the same
nodes of every graph.
"""

from __future__ import annotations

import operator

import torch

from refimpl.partition.api import joint_graph

#: every role ``refimpl.partition.fx_edge`` assigns (graph.JointNode.role's comment)
ROLES = ("primal", "tangent", "forward", "backward", "output")


def _program(x, w):
    return (torch.mm(x, w).cos() * 2).sum()


def test_the_roles_are_the_five_that_fx_edge_assigns():
    """The domain is complete: a traced joint graph holds each of the five roles, no other."""
    graph = joint_graph(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True))
    assert {n.role for n in graph.nodes} == set(ROLES)


def test_graph_76_role_le_backward_is_role_eq_backward():
    """On every role, ``<=`` against "backward" selects exactly what ``==`` selects."""
    for role in ROLES:
        assert (role <= "backward") == (role == "backward"), role
    selected = [r for r in ROLES if operator.le(r, "backward")]
    assert selected == ["backward"]
