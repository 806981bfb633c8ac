"""Partitioner benchmark: refimpl's default (exact) solver against torch's partitioner.

Speed: joint graphs of 12, 48 and 192 transformer blocks (``refimpl.models.transformer``,
dim 64; about 1.4k, 5.6k and 22k nodes) are traced once; each partitioner partitions fresh
copies at budgets 0.1, 0.5 and 0.9, in the same run. ``time_ratio`` = refimpl's median
``partition_fn`` time (CSE stage, plain graph, solver, extraction) / torch's
``min_cut_rematerialization_partition`` (target <= 1.0). ``stages`` splits refimpl's time.

Quality: recompute FLOPs at equal memory. For each budget, torch's plan is scored by
refimpl's model (bytes of what its forward hands the backward, each storage once; FLOPs of
the forward nodes the backward must recompute), and refimpl's optimum and the knapsack
heuristic (``solver="dp"``) are solved at the bound equal to torch's bytes. Graphs: the
transformer, a ResNet (``refimpl.models.resnet18``) and issue 13's program.

Run: ``python -m pytest benchmarks/bench_partition.py --benchmark-enable -s``
(``-k "not 192"`` skips the 22k-node graph, whose trace alone takes minutes).
"""

from __future__ import annotations

import copy
import functools
import statistics
import time

import pytest
import torch
import torch._functorch.config as fconfig

import refimpl
from refimpl.partition import exact, fx_edge, partitioner
from refimpl.partition.cost import flops_runtime
from refimpl.partition.fx_edge import joint_graph_from_fx
from refimpl.partition.partitioner import choose
from refimpl.partition.problem import Problem

ROUNDS = 3
BUDGETS = [0.1, 0.5, 0.9]


def _capture(fn, inputs):
    """(joint GraphModule, number of forward outputs) as ``refimpl.compile`` traces."""
    from refimpl.pareto import capture_joint

    return capture_joint(fn, inputs)


@functools.cache
def transformer_joint(blocks: int):
    from refimpl.models import transformer

    torch.manual_seed(0)
    return _capture(transformer(blocks, dim=64, heads=4), [torch.randn(2, 32, 64,
                                                                       requires_grad=True)])


@functools.cache
def resnet_joint():
    from refimpl.models import resnet18

    torch.manual_seed(0)
    return _capture(resnet18(num_classes=10), [torch.randn(2, 3, 32, 32, requires_grad=True)])


@functools.cache
def issue_joint():
    def f(x, w1, w2):
        s1 = (x @ w1).sum(1)
        return s1.cos().sum() + (x @ w2).cos().sum()

    torch.manual_seed(0)
    return _capture(f, [torch.randn(64, n, requires_grad=True) for n in (64, 256, 64)])


def refimpl_partition(joint, budget):
    gm, num_fwd = joint
    options = refimpl.PartitionOptions(memory_budget=budget)
    return fx_edge.partition_fn(gm, None, num_fwd_outputs=num_fwd, options=options)


def torch_partition(joint, budget):
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    gm, num_fwd = joint
    with fconfig.patch(activation_memory_budget=budget):
        return min_cut_rematerialization_partition(gm, None, compiler="inductor",
                                                   num_fwd_outputs=num_fwd)


def timed(partition, joint, budget) -> float:
    fresh = (copy.deepcopy(joint[0]), joint[1])
    start = time.perf_counter()
    partition(fresh, budget)
    return time.perf_counter() - start


def stages(joint, budget) -> dict[str, float]:
    """Seconds per stage of refimpl's partition_fn (one run)."""
    gm, num_fwd = copy.deepcopy(joint[0]), joint[1]
    options = refimpl.PartitionOptions(memory_budget=budget)
    clock = {}
    start = time.perf_counter()
    graph = fx_edge.prepare(gm, num_fwd, options)
    clock["cse_and_plain_graph"] = time.perf_counter() - start
    start = time.perf_counter()
    bans = partitioner.bans_and_bounds(graph)
    clock["bans_min_max_cuts"] = time.perf_counter() - start
    start = time.perf_counter()
    bound = partitioner.budget_bound(bans.low.bytes, bans.high.bytes, budget)
    exact.solve(Problem(graph, bans, bound), options)
    clock["exact_solver"] = time.perf_counter() - start
    plan = choose(graph, options)
    start = time.perf_counter()
    fx_edge.extract(gm, graph, plan, num_fwd, None)
    clock["extraction"] = time.perf_counter() - start
    return clock


@pytest.mark.parametrize("blocks", [12, 48, 192])
@pytest.mark.parametrize("budget", BUDGETS)
def test_partition_time(benchmark, blocks, budget):
    joint = transformer_joint(blocks)
    theirs = statistics.median(timed(torch_partition, joint, budget) for _ in range(ROUNDS))
    ours = statistics.median(timed(refimpl_partition, joint, budget) for _ in range(ROUNDS))
    benchmark.pedantic(lambda g: refimpl_partition(g, budget), rounds=1,
                       setup=lambda: (((copy.deepcopy(joint[0]), joint[1]),), {}))
    split = stages(joint, budget)
    benchmark.extra_info.update({"nodes": len(joint[0].graph.nodes), "budget": budget,
                                 "torch_seconds": theirs, "refimpl_seconds": ours,
                                 "time_ratio": ours / theirs, "stages": split})
    print(f"\n{blocks} blocks ({len(joint[0].graph.nodes)} nodes) budget {budget}: refimpl "
          f"{ours:.2f}s torch {theirs:.2f}s ratio {ours / theirs:.2f}; stages "
          + ", ".join(f"{k} {v:.2f}s" for k, v in split.items()))


def torch_cut(joint, graph, budget) -> tuple[int, float]:
    """torch's plan at ``budget``: (bytes, recompute FLOPs), scored on refimpl's plain
    graph of the same joint (``refimpl.pareto.torch_plan_cost``)."""
    from refimpl.pareto import torch_plan_cost

    return torch_plan_cost(joint[0], joint[1], graph, budget)


def at_bytes(graph, solver: str, target: int):
    """refimpl's plan with ``solver`` at the budget whose bound is ``target`` bytes."""
    bans = partitioner.bans_and_bounds(graph)
    span = max(bans.high.bytes - bans.low.bytes, 1)
    budget = min(1.0, max(0.0, (target - bans.low.bytes) / span))
    return choose(graph, refimpl.PartitionOptions(memory_budget=budget, solver=solver))


@pytest.mark.parametrize("name", ["transformer", "resnet", "issue13"])
def test_quality_at_equal_memory(benchmark, name):
    joint = {"transformer": lambda: transformer_joint(12), "resnet": resnet_joint,
             "issue13": issue_joint}[name]()
    graph = joint_graph_from_fx(copy.deepcopy(joint[0]), joint[1], flops_runtime)
    rows = []
    for budget in BUDGETS:
        torch_bytes, torch_flops = torch_cut(joint, graph, budget)
        best, knap = (at_bytes(graph, s, torch_bytes) for s in ("exact", "dp"))
        rows.append({"budget": budget, "torch_bytes": torch_bytes,
                     "torch_flops": torch_flops, "optimum_bytes": best.saved_bytes,
                     "optimum_flops": best.recompute_cost, "knapsack_bytes": knap.saved_bytes,
                     "knapsack_flops": knap.recompute_cost})
        assert best.saved_bytes <= torch_bytes and best.recompute_cost <= torch_flops
        assert best.recompute_cost <= knap.recompute_cost
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["rows"] = rows
    for r in rows:
        print(f"\n{name} budget {r['budget']}: torch {r['torch_bytes']} B "
              f"{r['torch_flops']:.3g} FLOP | optimum {r['optimum_bytes']} B "
              f"{r['optimum_flops']:.3g} | knapsack {r['knapsack_bytes']} B "
              f"{r['knapsack_flops']:.3g}")
