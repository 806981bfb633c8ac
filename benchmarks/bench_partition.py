"""Partitioner benchmark: refimpl's partition_fn against torch's min-cut partitioner.

Joint graphs of 12 and 48 transformer blocks (``refimpl.models.transformer``, dim 64; about
2k and 8k nodes) are traced once; each partitioner then partitions fresh copies at the same
memory budget, in the same run. Reported in ``extra_info``:

* ``time_ratio``: refimpl's median partition time / torch's (target: <= 1);
* ``recompute_flops`` and ``saved_bytes`` for both (target: refimpl never recomputes more
  when torch's plan also fits refimpl's bound, ``torch_within_refimpl_bound``), and
  ``refimpl_at_torch_bytes``: refimpl's plan at the budget whose bound is torch's bytes
  (quality at equal memory).

Run: ``python -m pytest benchmarks/bench_partition.py --benchmark-enable -s``.
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
from refimpl.models import transformer
from refimpl.partition.cost import flops_runtime
from refimpl.partition.partitioner import backward_reads, choose, saved_bytes
from refimpl.partition.trace import joint_graph_from_fx, trace_joint

ROUNDS = 3


@functools.cache
def joint_graph(blocks: int):
    torch.manual_seed(0)
    model = transformer(blocks, dim=64, heads=4)
    x = torch.randn(2, 32, 64, requires_grad=True)
    params = list(model.parameters())

    def fn(x, *params_):
        return torch.func.functional_call(
            model, dict(zip((n for n, _ in model.named_parameters()), params_)), (x,)).sum()

    return trace_joint(fn, x, *params)


@functools.cache
def plain_graph(blocks: int):
    gm, num_fwd = joint_graph(blocks)
    return joint_graph_from_fx(copy.deepcopy(gm), num_fwd, flops_runtime)


def quality(graph, fw, bw) -> dict:
    """Saved activation bytes (storages once; inputs and their views free) and the FLOPs of
    the forward nodes the backward must recompute given what the forward saved, both by
    refimpl's plain-data model, so the two partitioners are scored alike."""
    outputs = next(iter(fw.graph.find_nodes(op="output"))).args[0][graph.num_fwd_outputs:]
    names = {n.name for n in outputs if isinstance(n, torch.fx.Node) and n.name in graph.by_name}
    reads, recomputed = backward_reads(graph, names)
    cost = sum(graph.by_name[n].runtime for n in recomputed if graph.by_name[n].fw_required)
    return {"recompute_flops": cost, "saved_bytes": saved_bytes(graph, reads)}


def refimpl_partition(joint, budget):
    gm, num_fwd = joint
    options = refimpl.PartitionOptions(memory_budget=budget)
    return refimpl.partition_fn(gm, None, num_fwd_outputs=num_fwd, options=options)


def torch_partition(joint, budget):
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    gm, num_fwd = joint
    with fconfig.patch(activation_memory_budget=budget):
        return min_cut_rematerialization_partition(gm, None, compiler="inductor",
                                                   num_fwd_outputs=num_fwd)


def timed(partition, joint, budget) -> tuple[float, tuple]:
    fresh = (copy.deepcopy(joint[0]), joint[1])
    start = time.perf_counter()
    result = partition(fresh, budget)
    return time.perf_counter() - start, result


@pytest.mark.parametrize("blocks", [12, 48])
@pytest.mark.parametrize("budget", [0.5])
def test_partition_time_and_quality(benchmark, blocks, budget):
    joint = joint_graph(blocks)
    torch_runs = [timed(torch_partition, joint, budget) for _ in range(ROUNDS)]
    our_runs = [timed(refimpl_partition, joint, budget) for _ in range(ROUNDS)]
    benchmark.pedantic(lambda g: refimpl_partition(g, budget), rounds=ROUNDS,
                       setup=lambda: (((copy.deepcopy(joint[0]), joint[1]),), {}))
    theirs_s = statistics.median(t for t, _ in torch_runs)
    ours_s = statistics.median(t for t, _ in our_runs)
    torch_result, ours = torch_runs[0][1], our_runs[0][1]
    graph = plain_graph(blocks)
    theirs, mine = quality(graph, *torch_result), quality(graph, *ours)
    plan = choose(graph, refimpl.PartitionOptions(memory_budget=budget))
    bound = plan.bound_bytes
    comparable = theirs["saved_bytes"] <= bound  # torch's plan fits refimpl's bound too
    # equal memory: refimpl at the budget whose bound is exactly torch's saved bytes
    span = max(plan.max_bytes - plan.min_bytes, 1)
    matched = min(1.0, max(0.0, (theirs["saved_bytes"] - plan.min_bytes) / span))
    at_torch_bytes = choose(graph, refimpl.PartitionOptions(memory_budget=matched))
    benchmark.extra_info.update({
        "nodes": len(joint[0].graph.nodes), "budget": budget,
        "torch_seconds": theirs_s, "refimpl_seconds": ours_s, "time_ratio": ours_s / theirs_s,
        "refimpl": mine, "torch": theirs, "refimpl_bound_bytes": bound,
        "torch_within_refimpl_bound": comparable,
        "refimpl_at_torch_bytes": {"recompute_flops": at_torch_bytes.recompute_cost,
                                   "saved_bytes": at_torch_bytes.saved_bytes}})
    print(f"\n{blocks} blocks, {len(joint[0].graph.nodes)} nodes, budget {budget}: "
          f"refimpl {ours_s:.3f}s torch {theirs_s:.3f}s ratio {ours_s / theirs_s:.2f}; "
          f"refimpl {mine} "
          f"torch {theirs}; refimpl bound {bound}, torch within it: {comparable}; "
          f"refimpl at torch's bytes: {at_torch_bytes.saved_bytes} B, "
          f"{at_torch_bytes.recompute_cost:.0f} FLOPs")
    assert mine["saved_bytes"] <= bound
    assert at_torch_bytes.saved_bytes <= theirs["saved_bytes"]
    assert at_torch_bytes.recompute_cost <= theirs["recompute_flops"]  # never worse
