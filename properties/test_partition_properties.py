"""Properties of the backend under test's memory-budget partitioner (``compile``).

Programs come from :func:`refimpl.strategies.programs.programs` (motifs around expensive
ops: summaries of wide matmuls, fan-out, shared inputs, views of saved storages, random
ops). Every expectation is independent of refimpl's partitioner
(:mod:`refimpl.expect.partition_expect`): the brute-force Pareto frontier of the joint
graph's save-sets, the no-recompute bytes, the meter, eager execution and the no-recompute
reference run that draws the same random numbers. The reference side of an example is ONE
trace (:func:`~refimpl.expect.partition_brute.trace_reference`), whatever the budgets.

* the bytes the meter reads stay within ``min + budget x (max - min)`` (min: brute force;
  max: the no-recompute bytes) and never below min; outputs and gradients equal eager's
  (programs without random ops) or, with random ops, those of the reference run (eager, or
  the no-recompute reference with inductor's decompositions) whose forward drew the same
  numbers: the draws the forward made are the ones the backward uses;
* one function compiled at nine budgets, more than dynamo's recompile limit, honours each
  plan: budget 0.0 saves exactly the minimum, budget 1.0 no more than the no-recompute
  bytes, no more than saving what the forward outputs need while the backward computes the
  work only it reads (that work runs once in any plan, so keeping it spares no
  recomputation), and no less than the minimum, and each budget the bound built from
  those two; and
  the saved bytes never rise as the budget falls (monotone: a plan feasible under a smaller
  bound is feasible under a larger one, so an optimum that breaks ties towards fewer bytes
  never saves more at the smaller budget; docs/design.md, "The partitioner's problem").

* programs with user checkpoint regions (plain, selective, nested) save the bytes of some
  plan that honours the regions (:mod:`refimpl.expect.partition_regions`), and give
  eager's gradients.

Reach (``refimpl.properties.reach``): the budget binds and the bound admits two or more
Pareto-optimal plans (:meth:`~refimpl.expect.partition_expect.Expected.reached`); for the
regions property, the regions move the fewest or the most bytes a valid plan keeps.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import event, example, given, reject
from hypothesis import strategies as st

from refimpl.expect.partition_brute import BruteForceRefused, trace_reference
from refimpl.expect.partition_expect import (
    Expected,
    assert_as_eager,
    assert_recompute_within,
    assert_same_results,
    assert_saved_within,
    backward_flops,
    bound_bytes,
    close,
    measured,
    promise_of,
)
from refimpl.expect.partition_knapsack import TooManyItems, expected_bytes, knapsack_items
from refimpl.expect.partition_regions import honouring, trace_with_regions
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.programs import (
    KINDS,
    REGION_KINDS,
    WIDENED,
    ProgramSpec,
    Step,
    back_to_back_regions,
    pointwise_chains,
    programs,
)

#: budgets where the bound (max: the no-recompute bytes) binds; the sweep covers the rest.
BUDGETS = st.sampled_from([0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5])
SWEEP = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)  # 9: past the recompile limit (8)
RANDOM_PROGRAMS = programs(require_random=True)
#: torch's knapsack heuristics that ``torch._functorch.config.activation_memory_budget_solver``
#: selects in refimpl's target too (its default, "dp", selects refimpl's exact solver there)
TORCH_SOLVERS = ("greedy", "ilp")
#: programs with checkpoint regions, without random ops (the compiled random stream is not
#: eager's; :func:`test_partition_keeps_random_draws` covers random ops).
#: programs for the knapsack model (refimpl.expect.partition_knapsack: no tuple-valued ops)
KNAPSACK_PROGRAMS = programs(kinds=tuple(k for k in KINDS if k != "attention"))
#: budgets that leave the knapsack room for an item more often than not
KNAPSACK_BUDGETS = st.sampled_from([0.5, 0.7, 0.8, 0.9])
REGION_PROGRAMS = programs(kinds=REGION_KINDS, user_regions=1.0)


def reproducer(spec: ProgramSpec, **extra) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in extra.items())
    return f"program:\n{spec}\n{args}"


def expected_of(spec: ProgramSpec):
    """(the reference run, the brute-force expectation): one trace; a program too large
    for brute force is not a valid example."""
    run = trace_reference(spec.make(), spec.inputs(0), seed=0)
    try:
        return run, Expected.of(run)
    except BruteForceRefused:
        event("brute force refused: too many save candidates")
        reject()




def check_within_budget_and_exact(backend, spec: ProgramSpec, budget: float,
                                  reached: bool | None = None) -> None:
    """The plan at ``budget`` keeps bytes within the bound and gives the reference's results
    (module docstring); ``reached``: the caller's reach (default: the budget binds)."""
    compile_fn = component(backend, "compile")
    run, expected = expected_of(spec)
    reach(expected.reached(budget) if reached is None else reached)
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    saved, out, grads = measured(compile_fn(fn, memory_budget=budget), spec)
    why = reproducer(spec, budget=budget, backend=backend.name)
    assert_saved_within(saved, expected, budget, why)
    inputs = spec.inputs(0)
    torch.manual_seed(0)
    eager = fn(*inputs)
    eager.backward()
    references = {"eager": (eager.detach(), [x.grad for x in inputs])}
    if spec.has_random:  # the reference whose forward drew the target's numbers
        references["the no-recompute reference"] = (run.output, run.grads)
        drew = [name for name, (ref_out, _) in references.items() if close(out, ref_out)]
        assert drew, (f"{why}\noutput: expected one of {[o for o, _ in references.values()]}"
                      f" (eager, the no-recompute reference), observed {out}")
        # Both outputs can be close (a sum of cosines of different draws, 8e-7 apart, found
        # at 1,000 examples): the nearest is the one whose draws the target's forward made.
        nearest = min(drew, key=lambda n: (out - references[n][0]).abs().max().item())
        references = {nearest: references[nearest]}
    (name, (ref_out, ref_grads)), = references.items()
    assert_same_results(out, grads, ref_out, ref_grads, why, name)


@given(spec=programs(**WIDENED), budget=BUDGETS)
def test_partition_within_budget_and_exact(refimpl_backend, spec, budget):
    check_within_budget_and_exact(refimpl_backend, spec, budget)


@given(spec=programs(), budget=BUDGETS, solver=st.sampled_from(TORCH_SOLVERS))
def test_partition_with_torchs_knapsack_solvers(refimpl_backend, spec, budget, solver):
    """The same check with torch's ``activation_memory_budget_solver`` set to one of its
    knapsack heuristics, which a backend that follows torch's partitioner config reads
    (torch's own does): a heuristic may recompute more than the optimum, it never keeps
    more bytes than the bound, and the results stay eager's."""
    with torch._functorch.config.patch(activation_memory_budget_solver=solver):
        check_within_budget_and_exact(refimpl_backend, spec, budget)


@given(spec=RANDOM_PROGRAMS, budget=BUDGETS)
def test_partition_keeps_random_draws(refimpl_backend, spec, budget):
    """The same check on programs that always hold a random op: a backend that recomputes
    one with fresh randomness gives gradients of numbers its forward never drew."""
    check_within_budget_and_exact(refimpl_backend, spec, budget)


@given(spec=programs())
def test_partition_honours_every_budget_of_one_function(refimpl_backend, spec):
    """ONE function object compiled at each budget of :data:`SWEEP` in turn (no dynamo
    reset): a backend that falls back to eager past dynamo's recompile limit saves eager's
    bytes at budget 0.0 instead of the minimum. The saved bytes never rise as the budget
    falls. Budget 1.0 keeps no more than :attr:`Expected.forward_work_bytes`."""
    compile_fn = component(refimpl_backend, "compile")
    _, expected = expected_of(spec)
    reach(any(expected.reached(b) for b in SWEEP[1:-1]))
    fn = spec.make()
    torch._dynamo.reset()  # once per example: the sweep itself must pass the limit
    saved = {b: measured(compile_fn(fn, memory_budget=b), spec)[0] for b in SWEEP}
    why = reproducer(spec, backend=refimpl_backend.name, saved=saved)
    assert saved[0.0] == expected.min_bytes, (
        f"{why}\nbudget 0.0: expected the minimum {expected.min_bytes}, observed "
        f"{saved[0.0]}")
    assert_saved_within(saved[1.0], expected, 1.0, why)
    assert saved[1.0] <= expected.forward_work_bytes, (
        f"{why}\nbudget 1.0: expected <= {expected.forward_work_bytes} (save what the "
        f"forward outputs need, compute the backward-only work in the backward), observed "
        f"{saved[1.0]}: a value only the backward reads was saved")
    high = saved[1.0]
    for budget in SWEEP:
        bound = bound_bytes(expected.min_bytes, high, budget)
        assert saved[budget] <= bound, (
            f"{why}\nbudget {budget}: expected <= {bound} (min {expected.min_bytes}, the "
            f"budget-1.0 plan's {high}), observed {saved[budget]}")
    for low, high_budget in itertools.pairwise(SWEEP):
        assert saved[low] <= saved[high_budget], (
            f"{why}\nsaved bytes rise as the budget falls: {saved[low]} at budget {low}, "
            f"{saved[high_budget]} at budget {high_budget}")


def require_promise(backend, field: str) -> None:
    """Skip, saying why, unless ``backend``'s ``partition_promise`` sets ``field``."""
    if not getattr(promise_of(backend), field):
        pytest.skip(f"backend {backend.name!r} does not promise it "
                    f"(partition_promise.{field} is False)")


#: three convolutions and an attention reading the input, each through a cosine (found at the
#: dev profile): at budget 0.4 the best plan keeps two convolutions' outputs (40 bytes) and
#: recomputes one convolution (30 FLOPs) and the attention (100 FLOPs) = 130, against 90 for
#: keeping the attention's two outputs and recomputing the three convolutions; a cost model
#: that prices CPU attention at 0 (as torch's FLOP table does) makes the 130-FLOP plan.
CONVS_AND_ATTENTION = ProgramSpec(5, 1, (
    Step("conv", "conv1d", (0,), 1), Step("pointwise", "cos", (1,), 1),
    Step("conv", "conv1d", (0,), 1), Step("pointwise", "cos", (3,), 1),
    Step("conv", "conv1d", (0,), 1), Step("pointwise", "cos", (5,), 1),
    Step("attention", "sdpa", (0,), 1), Step("pointwise", "cos", (7,), 1)), (2, 4, 6, 8))


@given(spec=programs(), budget=BUDGETS)
@example(spec=CONVS_AND_ATTENTION, budget=0.4)
def test_partition_recomputes_the_least_within_the_bound(refimpl_backend, spec, budget):
    """For a target that promises it (``partition_promise.least_recompute``: an exact
    solver), the plan at ``budget`` recomputes no more FLOPs than the best plan the brute
    force finds within the bound, whose ``max`` is the target's own budget-1.0 bytes. What a
    plan recomputes is its backward's FLOPs (torch's FlopCounterMode) beyond those of the
    no-recompute reference. (Not equality: refimpl's plan space is the brute-force model's
    or wider, so an exact solver may do better; docs/oracle-strength.md.)"""
    require_promise(refimpl_backend, "least_recompute")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    fn = spec.make()
    torch._dynamo.reset()
    high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
    compiled = compile_fn(fn, memory_budget=budget)
    saved = measured(compiled, spec)[0]  # the first call compiles: not counted
    recomputed = backward_flops(compiled, spec) - run.backward_flops
    optimum = expected.optimum(bound_bytes(expected.min_bytes, high, budget))
    reach(optimum > expected.frontier[-1].flops)  # the budget binds: recompute is a choice
    assert_recompute_within(recomputed, expected, high, budget, saved,
                            reproducer(spec, budget=budget, backend=refimpl_backend.name))


@given(spec=programs())
def test_partition_at_budget_one_recomputes_no_flops(refimpl_backend, spec):
    """At budget 1.0 the plan recomputes nothing that costs FLOPs: its backward's FLOPs
    (torch's FlopCounterMode) equal those of the no-recompute reference's backward. torch's
    partitioner bans every op that is not fusible (matmuls, convolutions, attention: every
    op the FLOP table counts) from recompute there, and so does refimpl (docs/design.md).
    Reach: the fewest-bytes plan recomputes FLOPs, so a partitioner without the ban could
    save bytes by recomputing (the drawn programs hold no user checkpoint region, which
    would ask for a recompute)."""
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    reach(expected.frontier[0].flops > expected.frontier[-1].flops)
    fn = spec.make()
    torch._dynamo.reset()
    compiled = compile_fn(fn, memory_budget=1.0)
    saved = measured(compiled, spec)[0]  # the first call compiles: not counted
    observed = backward_flops(compiled, spec)
    assert observed == run.backward_flops, (
        f"{reproducer(spec, budget=1.0, backend=refimpl_backend.name)}\nbackward FLOPs at "
        f"budget 1.0: expected {run.backward_flops} (the no-recompute reference's), observed "
        f"{observed} (saving {saved} bytes, min {expected.min_bytes})")


@given(spec=pointwise_chains())
def test_partition_at_budget_one_recomputes_a_pointwise_chain(refimpl_backend, spec):
    """At budget 1.0 the plan recomputes pointwise work rather than keep it: on a matmul
    read through a chain of nonlinear pointwise, factory and indexing links
    (:func:`~refimpl.strategies.programs.pointwise_chains`), it keeps no more bytes than
    the fewest a plan keeps that recomputes no FLOPs and keeps what the backward
    materialises (the brute force, :meth:`SaveProblem.runtime_optimised`: the matmul's
    output and an indexing link's int64 index, which its backward scatter reads from
    memory; the rest of the chain recomputed). torch's partitioner bans only ops that are
    not fusible (matmuls, ...) and values a non-fusible backward op reads from recompute at
    budget 1.0, and recomputes pointwise ops, factories, ``gather`` and ``index`` when that
    keeps fewer bytes; so does refimpl (docs/design.md). A partitioner that treats pointwise
    or indexing ops as expensive keeps a link of the chain. Reach: keeping what the
    backward reads costs more than that fewest-bytes plan (a link is worth recomputing)."""
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    cheapest = run.problem.runtime_optimised()
    reach(expected.no_recompute_bytes > cheapest.bytes)
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    saved = measured(compile_fn(spec.make(), memory_budget=1.0), spec)[0]
    assert saved <= cheapest.bytes, (
        f"{reproducer(spec, budget=1.0, backend=refimpl_backend.name)}\nsaved bytes at "
        f"budget 1.0: expected <= {cheapest.bytes} (keep the matmul's output and any index, "
        f"recompute the chain: {cheapest.flops} FLOPs), observed {saved} (keeping "
        f"everything the backward reads: {expected.no_recompute_bytes})")


@given(spec=KNAPSACK_PROGRAMS, budget=KNAPSACK_BUDGETS, solver=st.sampled_from(TORCH_SOLVERS),
       fit=st.booleans())
def test_partition_knapsack_solvers_keep_the_modelled_bytes(refimpl_backend, spec, budget,
                                                            solver, fit):
    """For a target that promises it (``partition_promise.modelled_knapsack``), with torch's
    ``activation_memory_budget_solver`` set to a knapsack heuristic, the plan keeps the
    bytes of :mod:`refimpl.expect.partition_knapsack`: the fewest bytes of a valid plan that
    recomputes none of the items the heuristic keeps within ``bound - min`` (the bound's
    ``max``: the target's own budget-1.0 bytes). With ``fit`` the budget is the one whose
    capacity is exactly the smallest item's bytes (an item that fills the knapsack to the
    byte must be taken). Reach: the model keeps more than ``min``."""
    require_promise(refimpl_backend, "modelled_knapsack")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    fn = spec.make()
    torch._dynamo.reset()
    with torch._functorch.config.patch(activation_memory_budget_solver=solver):
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        budget = exact_fit_budget(run.backward_problem, expected.min_bytes, high) if fit \
            else budget
        saved = measured(compile_fn(fn, memory_budget=budget), spec)[0]
    bound = bound_bytes(expected.min_bytes, high, budget)
    try:
        wanted = expected_bytes(run.backward_problem, solver, bound - expected.min_bytes)
    except TooManyItems:
        event("knapsack model refused: too many items")
        reject()
    reach(wanted != {expected.min_bytes})
    assert saved in wanted, (
        f"{reproducer(spec, budget=budget, solver=solver, backend=refimpl_backend.name)}\n"
        f"saved bytes: expected one of {sorted(wanted)} (min {expected.min_bytes}, bound "
        f"{bound}), observed {saved}")


def exact_fit_budget(problem, min_bytes: int, max_bytes: int) -> float:
    """The budget whose knapsack capacity ``bound - min`` is exactly the bytes of the
    smallest knapsack item (:func:`~refimpl.expect.partition_knapsack.knapsack_items`);
    an example without such a budget in (0, 1) is not valid."""
    sizes = [problem.nodes[i].bytes for i in knapsack_items(problem)]
    span = max_bytes - min_bytes
    if not sizes or not 0 < min(sizes) < span:
        reject()
    return min(sizes) / span


def check_user_regions(backend, spec: ProgramSpec, budget: float) -> None:
    """The target honours the user's checkpoint regions (module docstring of
    :mod:`refimpl.expect.partition_regions`) at ``budget`` and at 1.0 (where a backend
    that drops the regions keeps the expensive values inside them): what it saves is the
    bytes of some plan that honours the regions, and its output and gradients equal eager's
    (the programs hold no random op)."""
    compile_fn = component(backend, "compile")
    problem = trace_with_regions(spec.make(), spec.inputs(0))
    try:
        honoured = Expected.of_problem(honouring(problem))
        plain = Expected.of_problem(problem)
    except BruteForceRefused:
        event("brute force refused: too many save candidates")
        reject()
    # the regions mattered: they move the fewest or the most bytes a valid plan keeps
    reach((honoured.min_bytes, honoured.no_recompute_bytes)
          != (plain.min_bytes, plain.no_recompute_bytes))
    fn = spec.make()
    sizes = sorted({o.bytes for o in honoured.plans})
    for b in sorted({budget, 1.0}):
        torch._dynamo.reset()
        saved, out, grads = measured(compile_fn(fn, memory_budget=b), spec)
        why = reproducer(spec, budget=b, backend=backend.name)
        assert saved in sizes, (
            f"{why}\nsaved bytes: expected the bytes of a plan that honours the checkpoint "
            f"regions, one of {sizes} (without the regions the plans keep "
            f"{sorted({o.bytes for o in plain.plans})}), observed {saved}")
        assert_as_eager(fn, spec, out, grads, why)


@given(spec=REGION_PROGRAMS, budget=st.sampled_from([0.0, 0.25, 0.5]))
def test_partition_honours_user_checkpoint_regions(refimpl_backend, spec, budget):
    """Programs with ``torch.utils.checkpoint`` regions (plain, a selective policy that
    saves matmuls, nested): a backend that drops the regions saves values the user asked
    to recompute, or recomputes a must-save matmul; either way it keeps bytes no plan that
    honours the regions keeps."""
    check_user_regions(refimpl_backend, spec, budget)


@given(spec=back_to_back_regions(), budget=st.sampled_from([0.0, 0.5]))
def test_partition_saves_the_value_between_two_regions(refimpl_backend, spec, budget):
    """Two checkpoint regions back to back, the second reading the first's last value (in
    a third of the programs a view of the first region's pointwise value): a plan that
    honours the regions saves that value (eager checkpointing saves a region's input), so
    a backend that recomputes it from the first region keeps bytes no honouring plan keeps
    (the same check as above, on a program that always has such a boundary)."""
    check_user_regions(refimpl_backend, spec, budget)
