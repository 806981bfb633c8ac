"""The Lagrangian / parametric min-cut against the exact solver (issue 13's measurement).

For the transformer joint graphs of 12, 48 and 192 blocks (``bench_partition``'s
``transformer_joint``; about 1.4k, 5.6k and 22k nodes) at budgets 0.1, 0.5 and 0.9, and
for a ResNet and issue 13's program: the plain graph is prepared as ``partition_fn`` does
(dead code, CSE, FLOP runtimes), ``bound = budget_bound(low.bytes, high.bytes, budget)``,
and in the same run ``exact.solve`` and ``lagrangian.parametric_plan`` are timed (median of
3). Recorded per row: both times, the minimum cuts the Lagrangian search solved, the exact
optimum's cost, the Lagrangian plan's cost and lower bound, and the gap
``(lagrangian cost - optimum) / optimum`` (0 where the optimum is a hull vertex).
``min_cut_seconds`` is one ``save_set`` min cut of the same graph, for scale.

Run: ``python -m pytest benchmarks/bench_partition_lagrangian.py --benchmark-enable -s``
(``-k "not 192"`` skips the 22k-node graph, whose trace alone takes minutes).
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass

import pytest

import refimpl
from benchmarks.bench_partition import BUDGETS, issue_joint, resnet_joint, transformer_joint
from refimpl.partition import exact, fx_edge, lagrangian, partitioner
from refimpl.partition.mincut import save_set
from refimpl.partition.options import PartitionOptions
from refimpl.partition.problem import Problem

ROUNDS = 3
TIME_LIMIT = 600.0


@dataclass(frozen=True)
class Row:
    """One graph at one budget: both solvers, timed in the same run."""

    name: str
    nodes: int
    budget: float
    bound: int
    exact_seconds: float
    lagrangian_seconds: float
    min_cut_seconds: float
    cuts: int
    optimum: float
    lagrangian_cost: float
    lower_bound: float

    @property
    def gap(self) -> float:
        return (self.lagrangian_cost - self.optimum) / self.optimum if self.optimum else 0.0

    def line(self) -> str:
        return (f"{self.name} ({self.nodes} nodes) budget {self.budget}: exact "
                f"{self.exact_seconds:.2f}s lagrangian {self.lagrangian_seconds:.2f}s "
                f"({self.cuts} cuts, one cut {self.min_cut_seconds:.2f}s) | optimum "
                f"{self.optimum:.4g} lagrangian {self.lagrangian_cost:.4g} lower bound "
                f"{self.lower_bound:.4g} gap {self.gap:.1%}")


def plain_graph(joint):
    gm, num_fwd = copy.deepcopy(joint[0]), joint[1]
    return fx_edge.prepare(gm, num_fwd, refimpl.PartitionOptions())


def median_seconds(run) -> tuple[float, object]:
    """(median wall seconds of ROUNDS calls of ``run``, the last result)."""
    times, result = [], None
    for _ in range(ROUNDS):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def measure(name: str, joint, budget: float) -> Row:
    graph = plain_graph(joint)
    bans = partitioner.bans_and_bounds(graph)
    bound = partitioner.budget_bound(bans.low.bytes, bans.high.bytes, budget)
    hard, unsavable = bans.hard, bans.unsavable
    exact_s, best = median_seconds(lambda: exact.solve(
        Problem(graph, bans, bound), PartitionOptions(solver_time_limit=TIME_LIMIT)))
    lagrangian_s, result = median_seconds(lambda: lagrangian.parametric_plan(
        graph, bound, hard, unsavable))
    start = time.perf_counter()
    save_set(graph, hard, unsavable)
    one_cut = time.perf_counter() - start
    assert result.cut.bytes <= bound and best.bytes <= bound
    assert result.lower_bound <= best.cost * (1 + 1e-9) + 1e-9
    assert best.cost <= result.cut.cost * (1 + 1e-9) + 1e-9
    return Row(name, len(graph.nodes), budget, bound, exact_s, lagrangian_s, one_cut,
               result.cuts_solved, best.cost, result.cut.cost, result.lower_bound)


def report(benchmark, rows: list[Row]) -> None:
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["rows"] = [dict(vars(r), gap=r.gap) for r in rows]
    for r in rows:
        print("\n" + r.line(), end="")
    print()


@pytest.mark.parametrize("blocks", [12, 48, 192])
def test_transformer(benchmark, blocks):
    joint = transformer_joint(blocks)
    report(benchmark, [measure(f"transformer-{blocks}", joint, b) for b in BUDGETS])


@pytest.mark.parametrize("name", ["resnet", "issue13"])
def test_other_graphs(benchmark, name):
    joint = {"resnet": resnet_joint, "issue13": issue_joint}[name]()
    report(benchmark, [measure(name, joint, b) for b in BUDGETS])
