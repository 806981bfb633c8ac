"""The partitioner's stages and its errors: the joint-graph CSE stage, a plan on every
compile (issue 10 item 5), and bad input (each error names the option; never a fallback)."""

from __future__ import annotations

import pytest
import torch

import refimpl
from refimpl.partition import exact
from refimpl.partition.api import RanWithoutPlan, explain_many, joint_graph
from refimpl.partition.errors import (
    InfeasibleBudget,
    NoFiniteCut,
    PartitionError,
    SolverTimeLimit,
)
from refimpl.partition.graph import JointGraph
from refimpl.partition.options import PartitionOptions
from refimpl.partition.partitioner import bans_and_bounds, choose
from refimpl.partition.problem import Problem
from tests.joint_nodes import node


def twice(x, w):
    """The same matmul written twice: two nodes in the traced graph, one after CSE."""
    return (x @ w).cos().sum() + (x @ w).sin().sum()


def test_cse_stage_merges_before_partitioning():
    torch.manual_seed(0)
    args = [torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]
    merged, apart = (joint_graph(twice, *args, cse=flag) for flag in (True, False))
    ops = lambda g: sum(n.op == "mm.default" and n.role == "forward" for n in g.nodes)
    assert (ops(merged), ops(apart)) == (1, 2)
    (on,), (off,) = (explain_many(twice, *args, memory_budgets=[0.0], cse=flag)
                     for flag in (True, False))
    mm = 2 * 8 * 8 * 8
    assert (on.recompute_cost, off.recompute_cost) == (mm, 2 * mm)  # one matmul, not two
    assert refimpl.PartitionOptions(cse=False).cse is False
    with pytest.raises(ValueError, match="cse='yes' must be True or False"):
        refimpl.PartitionOptions(cse="yes")


def sweep_target(x, w):
    return (x @ w).cos().sum()


def test_compile_gives_the_plan_past_dynamos_recompile_limit():
    """Issue 10 item 5: the 9th and later compiles of one function used to run eagerly."""
    torch.manual_seed(0)
    args = [torch.randn(16, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)]
    eager = refimpl.saved_activation_bytes(sweep_target, *args)
    assert eager > 0
    for i in range(12):  # dynamo's recompile limit is 8
        compiled = refimpl.compile(sweep_target, memory_budget=0.0)
        assert refimpl.saved_activation_bytes(compiled, *args) == 0, f"compile {i + 1}"


def test_a_call_dynamo_does_not_compile_raises():
    skipped = torch._dynamo.disable(sweep_target)
    args = [torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)]
    with pytest.raises(RanWithoutPlan, match="ran eagerly without refimpl's plan"):
        refimpl.compile(skipped, memory_budget=0.0)(*args)


def test_solver_past_its_time_limit_names_the_option():
    from refimpl.models import transformer

    torch.manual_seed(0)
    model = transformer(2, dim=32, heads=2)
    graph = joint_graph(model, torch.randn(2, 8, 32, requires_grad=True))
    options = refimpl.PartitionOptions(memory_budget=0.5, solver_time_limit=1e-9)
    with pytest.raises(SolverTimeLimit, match=r"solver_time_limit=1e-09s"):
        choose(graph, options)
    with pytest.raises(ValueError, match="solver_time_limit=0 must be a positive finite"):
        refimpl.PartitionOptions(solver_time_limit=0)


def test_bound_below_every_plan_is_infeasible_not_clamped():
    torch.manual_seed(0)
    args = [torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]
    graph = joint_graph(lambda x, w: (x @ w).relu().sum() * torch.rand(()), *args)
    bans = bans_and_bounds(graph)
    assert bans.low.bytes > 0  # the random draw must be saved
    with pytest.raises(InfeasibleBudget, match="raise memory_budget"):
        exact.solve(Problem(graph, bans, bans.low.bytes - 1),
                    PartitionOptions(solver_time_limit=10.0))


def test_value_neither_savable_nor_recomputable_is_an_error():
    nodes = [node("x", "primal", op="placeholder", users=["r"]),
             node("r", "forward", ["x"], op="rand_tuple", bytes=4, savable=False,
                  random=True, users=["g"], fw_required=True),
             node("t", "tangent", op="placeholder", users=["g"]),
             node("g", "backward", ["r", "t"], op="mul.Tensor")]
    graph = JointGraph(nodes, num_fwd_outputs=1, bw_outputs=["g"])
    with pytest.raises(NoFiniteCut, match="neither saved nor recomputed") as info:
        bans_and_bounds(graph)
    assert isinstance(info.value, PartitionError)
