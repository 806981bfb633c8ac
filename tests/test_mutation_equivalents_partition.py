"""Partition mutants of seed 731252159 that no program can tell apart from the original,
each shown equal on its whole (finite) domain, not asserted.

``refimpl/partition/graph.py:76``, ``n.role == "backward"`` -> ``n.role <= "backward"``: a
joint node's role is one of the five names ``fx_edge`` assigns (``JointNode.role``), and of
those only ``"backward"`` sorts at or before ``"backward"``, so both conditions pick the same
nodes of every graph.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import operator
import sys

import pytest
import torch
from torch.fx.experimental import symbolic_shapes

from refimpl.partition import cost, fx_edge
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


def _role_literals() -> set[object]:
    """Every value ``fx_edge._roles`` can store: the string constants assigned (directly or
    through a conditional expression) to ``roles[...]`` in its source."""
    tree = ast.parse(inspect.getsource(fx_edge._roles))
    values: set[object] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            for part in ast.walk(node.value):
                if isinstance(part, ast.Constant):
                    values.add(part.value)
                elif not isinstance(part, ast.IfExp | ast.Call | ast.Name | ast.Load):
                    raise AssertionError(f"a role computed by {ast.dump(part)}")
    return values


def test_exhaustive_31_role_is_forward_is_role_eq_forward():
    """``refimpl/partition/exhaustive.py:31``, ``n.role == "forward"`` -> ``n.role is
    "forward"``: every role is one of ``_roles``'s string literals, and CPython interns
    string constants that look like identifiers, so each role IS the interned literal and
    identity and equality agree on every node of every graph."""
    assert _role_literals() == set(ROLES)
    for role in ROLES:
        assert role is sys.intern(role), role
    graph = joint_graph(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True))
    for node in graph.nodes:
        assert operator.is_(node.role, "forward") == (node.role == "forward"), node


def test_cost_27_the_fallback_import_never_runs_here():
    """``refimpl/partition/cost.py:27``, ``except ImportError`` -> ``except
    CosmicRayTestingException``: on torch >= 2.12 the guarded import succeeds, so the
    handler's type is never evaluated (on 2.10 and 2.11 the mutant is not equivalent: the
    import fails there and the mutated handler would not catch it)."""
    if not hasattr(symbolic_shapes, "optimization_hint"):
        pytest.skip(f"torch {torch.__version__}: the fallback import runs here, the mutant "
                    "is not equivalent on this release")
    module = importlib.reload(cost)
    assert module.optimization_hint is symbolic_shapes.optimization_hint
