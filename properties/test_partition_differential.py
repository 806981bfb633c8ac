"""Differential property: refimpl's partitioner against another backend's ``compile``.

The other backend is the one under test (``--refimpl-target``), or torch's built-in
(``aot_eager_decomp_partition``, via ``refimpl.oracle.load_backend("torch")``) when the one
under test is refimpl itself, so the expected value never comes from the code under test.
For a random program and budget, the other's compiled function is measured (saved bytes by
the meter, recomputed FLOPs as its backward's FLOPs minus eager's, counted by
``refimpl.FlopCounterMode``); refimpl's side is ONE compile at the same budget, which also
hands over refimpl's plan (its bound). Whenever the other stays within refimpl's bound,
refimpl recomputes no more FLOPs than the other: refimpl's solver is exact for the problem
the other solves heuristically.

Programs draw no random numbers here. On a program that does, a plan that recomputes the
draw (torch's, below budget 1.0: docs/findings.md, "Partitioner") saves less and recomputes
"nothing" while giving wrong gradients, so there is no quality to compare; whether a target
keeps its draws is judged by ``test_partition_keeps_random_draws``.

Reach: the other fits refimpl's bound and the budget binds (refimpl's plan recomputes).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

import refimpl
from refimpl.oracle import component, load_backend
from refimpl.partition.backend import DynamoBackend
from refimpl.properties.reach import reach
from refimpl.strategies.programs import KINDS, RANDOM_KINDS, ProgramSpec, programs

BUDGETS = st.sampled_from([0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5])
DETERMINISTIC = tuple(kind for kind in KINDS if kind not in RANDOM_KINDS)


def other_backend(refimpl_backend):
    return refimpl_backend if refimpl_backend.name != "refimpl" else load_backend("torch")


def measure(fn, spec: ProgramSpec) -> tuple[int, int]:
    """(saved bytes, backward FLOPs) of one seeded run."""
    inputs = spec.inputs(0)
    torch.manual_seed(0)
    report = refimpl.measure_saved(fn, *inputs)
    with refimpl.FlopCounterMode(display=False) as mode:
        report.outputs.backward()
    return report.bytes, mode.get_total_flops()


def refimpl_side(fn, spec: ProgramSpec, budget: float):
    """(refimpl's plan, its saved bytes, its backward FLOPs): one compile."""
    plans = []
    backend = DynamoBackend(refimpl.PartitionOptions(memory_budget=budget),
                            on_plan=plans.append)
    torch._dynamo.reset()
    saved, flops = measure(torch.compile(fn, backend=backend), spec)
    return plans[0], saved, flops


@given(spec=programs(kinds=DETERMINISTIC), budget=BUDGETS)
def test_refimpl_recomputes_no_more_than_other(refimpl_backend, spec, budget):
    other = other_backend(refimpl_backend)
    theirs_compile = component(other, "compile")
    fn = spec.make()
    _, eager_flops = measure(fn, spec)
    plan, _, ours_flops = refimpl_side(fn, spec, budget)
    theirs_bytes, theirs_flops = measure(theirs_compile(fn, memory_budget=budget), spec)
    fits = theirs_bytes <= plan.bound_bytes
    reach(fits and plan.recompute_cost > 0)
    if fits:
        ours, theirs = ours_flops - eager_flops, theirs_flops - eager_flops
        assert ours <= theirs, (
            f"program:\n{spec}\nbudget={budget}, other={other.name}: the other saves "
            f"{theirs_bytes} <= refimpl's bound {plan.bound_bytes}; recomputed FLOPs: "
            f"expected refimpl's <= the other's {theirs}, observed {ours}")
