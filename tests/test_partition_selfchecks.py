"""Self-checks of refimpl's partitioner on random programs (moved out of properties/: they
check refimpl itself, whatever the target).

* every solver's compiled run stays within its plan's bound, and the plan's bytes are the
  meter's (the byte model: storages once, views sharing them); ``brute`` refuses large
  graphs with an error naming ``solver=``, which dynamo wraps (BackendCompilerFailed): the
  example is then rejected, never counted;
* the recompute cost of the plans of one graph never increases as the budget grows;
* budget 0.0 saves the fewest bytes any valid plan saves (the brute force of
  :mod:`refimpl.expect.partition_brute`, which shares no code with the partitioner).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import event, given, reject
from hypothesis import strategies as st

import refimpl
from refimpl.expect.partition_brute import BruteForceRefused, trace_reference
from refimpl.partition.api import explain_many
from refimpl.partition.backend import DynamoBackend
from refimpl.partition.errors import TooLargeForBrute
from refimpl.strategies.programs import ProgramSpec, Step, programs

BUDGETS = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])
SOLVERS = st.sampled_from(["exact", "dp", "ilp", "greedy", "brute"])


def compiled_plan_and_bytes(spec: ProgramSpec, budget: float, solver: str):
    plans = []
    torch._dynamo.reset()
    compiled = torch.compile(spec.make(), backend=DynamoBackend(
        refimpl.PartitionOptions(memory_budget=budget, solver=solver), on_plan=plans.append))
    inputs = spec.inputs(0)
    torch.manual_seed(0)
    report = refimpl.measure_saved(compiled, *inputs)
    report.outputs.backward()
    return plans, report.bytes


def brute_refused(exc: BaseException) -> bool:
    """The brute solver's refusal, however dynamo wrapped it (``BackendCompilerFailed``
    keeps the backend's exception as ``inner_exception``, raised ``from None``)."""
    while exc is not None:
        if isinstance(exc, TooLargeForBrute):
            return True
        exc = exc.__cause__ or getattr(exc, "inner_exception", None)
    return False


@given(spec=programs(), budget=BUDGETS, solver=SOLVERS)
def test_plan_within_bound_and_bytes_equal_the_meter(spec, budget, solver):
    try:
        plans, got = compiled_plan_and_bytes(spec, budget, solver)
    except torch._dynamo.exc.BackendCompilerFailed as exc:
        if not brute_refused(exc):
            raise
        event("brute: too many candidates")
        reject()
    why = f"program:\n{spec}\nbudget={budget} solver={solver}"
    assert [p.saved_bytes for p in plans] == [got], why
    assert got <= plans[0].bound_bytes, why


def test_brute_refusal_arrives_wrapped_and_is_recognised():
    """A program with many candidates: dynamo wraps brute's refusal, and it is found."""
    steps = tuple(Step("mm", "mm", (0,), 4) for _ in range(30))
    cos = tuple(Step("pointwise", "cos", (i + 1,), 4)
                for i in range(30))
    spec = ProgramSpec(2, 4, steps + cos, tuple(range(31, 61)))
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        compiled_plan_and_bytes(spec, 0.5, "brute")
    assert brute_refused(info.value)


@given(spec=programs(), solver=st.sampled_from(["exact", "dp", "ilp"]))
def test_recompute_cost_never_increases_with_budget(spec, solver):
    budgets = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    plans = explain_many(spec.make(), *spec.inputs(), memory_budgets=budgets, solver=solver)
    costs = [p.recompute_cost for p in plans]
    assert costs == sorted(costs, reverse=True), f"program:\n{spec}\ncosts={costs}"


@given(spec=programs())
def test_budget_zero_saves_the_brute_force_minimum(spec):
    try:
        frontier = trace_reference(spec.make(), spec.inputs()).problem.frontier()
    except BruteForceRefused:
        reject()
    plan = explain_many(spec.make(), *spec.inputs(), memory_budgets=[0.0])[0]
    assert plan.saved_bytes == frontier[0].bytes, (
        f"program:\n{spec}\nbudget 0.0: expected {frontier[0].bytes}, observed "
        f"{plan.saved_bytes}")
