"""The partitioner under the ``profile`` runtime estimator (each node timed, not FLOP-counted).

Timings differ run to run, so no property can know the plan an exact solver makes from them.
One fact holds for every positive timing: a plan that recomputes a value with FLOPs (a
matmul) while the bound has room to save that value is never the least-recompute plan,
since saving it too keeps the plan within the bound and recomputes strictly less (every
recomputed op the saved value needed drops out; a matmul takes time > 0). So, for a target
that promises the least recompute within the bound (``partition_promise.least_recompute``):
if the bytes it saves leave room for the largest FLOP-bearing value of the program, its
backward recomputes no FLOPs (torch's FlopCounterMode: no more than the no-recompute
backward's).

This catches a solver that turns the timings into a plan wrongly (issue 29: refimpl's exact
solver with ``c > 0`` read as ``c > 1`` took every sub-second timing for free and, at budget
0.5 on a three-matmul chain, saved nothing and recomputed both matmuls).

Reach: the bound leaves room for the largest FLOP-bearing value above the fewest bytes any
plan saves, so recomputing everything is a plan the property refuses.

Under torch's knapsack heuristics (``activation_memory_budget_solver`` ``"ilp"`` or
``"greedy"``) the timings choose which items the plan keeps, but not what an item is: for a
target that promises the knapsack model (``partition_promise.modelled_knapsack``), a plan
keeps the bytes of the cut for SOME subset of the items of
:mod:`refimpl.expect.partition_knapsack` (with ``profile``, every op the forward outputs
need and the backward reads), or the budget-1.0 plan's. An op only the backward reads (the
tie mask of an ``amax`` and its count) runs once in any plan, so no knapsack keeps it: a
solver that takes it for an item saves bytes no choice of items explains. Reach: the plan
keeps bytes strictly between the fewest and the budget-1.0 plan's.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_brute import SaveProblem
from refimpl.expect.partition_expect import backward_flops, bound_bytes, measured
from refimpl.expect.partition_knapsack import (
    KNAPSACK_SOLVERS,
    bytes_of_every_choice,
    knapsack_items,
)
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import (
    expected_of,
    reproducer,
    require_promise,
)
from refimpl.strategies.programs import NONLINEAR, ProgramSpec, Step

BUDGETS = st.sampled_from([0.5, 0.75, 0.9])


@st.composite
def matmul_chains(draw) -> ProgramSpec:
    """``x -> mm -> nonlinear -> mm -> nonlinear ...``: two to four matmuls of similar
    widths (2-8 columns), each read through a nonlinear op, the issue's three-matmul chain
    among them; a quarter of them a ``conv1d`` instead (an op whose timed call takes ints,
    lists and ``None`` besides tensors); the last value is the output."""
    n, width = draw(st.integers(1, 6)), draw(st.integers(2, 8))
    steps: list[Step] = []
    widths = [width]
    for _ in range(draw(st.integers(2, 4))):
        if draw(st.integers(0, 3)) == 3:  # a conv1d: timed with its int and None arguments
            out = widths[-1]
            steps.append(Step("conv", "conv1d", (len(steps),), out))
        else:
            out = draw(st.integers(2, 8))
            steps.append(Step("mm", "mm", (len(steps),), out))
        steps.append(Step("pointwise", draw(st.sampled_from(NONLINEAR)), (len(steps),), out))
        widths += [out, out]
    return ProgramSpec(n, width, tuple(steps), outputs=(len(steps),))


def largest_flop_value(problem: SaveProblem) -> int:
    """Bytes of the largest storage an op with FLOPs makes (0 where no op has FLOPs)."""
    return max((problem.nodes[n.storage].bytes for n in problem.nodes
                if n.flops > 0 and not n.primal), default=0)


@given(spec=matmul_chains(), budget=BUDGETS)
def test_partition_profile_plan_saves_a_matmul_it_has_room_for(refimpl_backend, spec, budget):
    require_promise(refimpl_backend, "least_recompute")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    largest = largest_flop_value(run.problem)
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(activation_memory_budget_runtime_estimator="profile"):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        compiled = compile_fn(fn, memory_budget=budget)
        saved = measured(compiled, spec)[0]
        observed = backward_flops(compiled, spec)
    bound = bound_bytes(expected.min_bytes, high, budget)
    reach(largest > 0 and bound - expected.min_bytes >= largest)
    if bound - saved >= largest:
        assert observed <= run.backward_flops, (
            f"{reproducer(spec, budget=budget, backend=refimpl_backend.name)}\n"
            f"runtime_estimator='profile': saved {saved} bytes of a bound of {bound}, room "
            f"for the largest FLOP-bearing value ({largest} bytes), yet the backward "
            f"recomputes FLOPs: expected at most {run.backward_flops} (the no-recompute "
            f"backward's), observed {observed}")


@st.composite
def amax_chains(draw) -> ProgramSpec:
    """``x -> mm -> v * v.amax(1) (or v.sum(1)) -> nonlinear``, once or twice: the amax's
    backward reads a tie mask and its count, two ops only the backward needs; the last
    value is the output. At most eight knapsack items (four ops a block), so trying every
    choice of them stays within ``MAX_CHOICE_ITEMS``."""
    n, width = draw(st.integers(1, 4)), draw(st.integers(2, 6))
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 2))):
        out = draw(st.integers(2, 6))
        steps.append(Step("mm", "mm", (len(steps),), out))
        steps.append(Step("reduction", draw(st.sampled_from(["amax", "amax", "sum"])),
                          (len(steps),), out))
        steps.append(Step("pointwise", draw(st.sampled_from(NONLINEAR)), (len(steps),), out))
    return ProgramSpec(n, width, tuple(steps), outputs=(len(steps),))


@given(spec=amax_chains(), budget=BUDGETS, solver=st.sampled_from(KNAPSACK_SOLVERS))
def test_partition_profile_knapsack_keeps_only_items(refimpl_backend, spec, budget, solver):
    require_promise(refimpl_backend, "modelled_knapsack")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    problem = run.backward_problem
    choices = bytes_of_every_choice(problem, knapsack_items(problem, "profile"))
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(activation_memory_budget_runtime_estimator="profile",
                                       activation_memory_budget_solver=solver):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        saved = measured(compile_fn(fn, memory_budget=budget), spec)[0]
    reach(expected.min_bytes < saved < high)
    why = reproducer(spec, budget=budget, solver=solver, runtime_estimator="profile",
                     backend=refimpl_backend.name)
    assert saved in choices | {high}, (
        f"{why}\nsaved bytes: expected the cut of some choice of knapsack items, one of "
        f"{sorted(choices)}, or the budget-1.0 plan's {high}; observed {saved}")
