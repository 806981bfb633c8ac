"""Properties of the memory-budget partitioner on random differentiable programs.

Programs come from :func:`refimpl.strategies.programs.programs` (mm chains with random weight
shapes, pointwise ops, reductions, views, conv, attention, dropout and other random ops,
in-place ops). The properties:

* the saved bytes the meter reads never exceed the budget's bound
  ``min + budget x (max - min)`` (min, max: the meter at budgets 0 and 1), for every solver;
* outputs and gradients equal the reference: bit for bit the same graph run without
  recomputation (AOTAutograd's default partition, same decompositions and RNG stream), and
  eager within float tolerance where the program draws no random numbers;
* the plan's recompute cost never increases as the budget grows, and its bytes are the
  meter's;
* ``dp`` and ``ilp`` reach ``brute``'s optimum (on the knapsacks of fan-out programs with
  random weight widths, and on random knapsacks).

Each compile is preceded by ``torch._dynamo.reset()``: dynamo would otherwise fall back to
eager after its recompile limit, and the properties would check eager against eager.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import event, find, given, reject, settings
from hypothesis import strategies as st

import refimpl
from refimpl.partition import candidates, knapsack
from refimpl.partition.backend import DynamoBackend
from refimpl.partition.cost import flops_runtime
from refimpl.partition.partitioner import budget_bound, choose
from refimpl.partition.trace import joint_graph_from_fx, trace_joint
from refimpl.strategies.programs import KINDS, ProgramSpec, programs

BUDGETS = st.sampled_from([0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0])
SOLVERS = st.sampled_from(["dp", "ilp", "greedy", "brute"])
#: properties that compile several times per example run a third of the profile's examples.
EXPENSIVE = settings(max_examples=max(1, settings.default.max_examples // 3))


def reproducer(spec: ProgramSpec, **extra) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in extra.items())
    return f"program:\n{spec}\n{args}"


def fresh_compile(compile_fn, fn, budget):
    torch._dynamo.reset()
    return compile_fn(fn, memory_budget=budget)


def saved_bytes(fn, inputs) -> int:
    report = refimpl.measure_saved(fn, *inputs)
    report.outputs.backward()
    return report.bytes


def run(fn, spec: ProgramSpec, seed: int = 0):
    """(output, input gradients) of one forward+backward from fresh inputs and RNG state."""
    inputs = spec.inputs(seed)
    torch.manual_seed(seed)
    out = fn(*inputs)
    out.backward()
    return out.detach(), [x.grad for x in inputs]


def no_recompute_reference(fn):
    """The same decomposed graph, partitioned by AOTAutograd's default (saves everything)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._functorch.partitioners import default_partition
    from torch._inductor.compile_fx import select_decomp_table

    backend = aot_autograd(fw_compiler=boxed_nop, bw_compiler=boxed_nop,
                           decompositions=select_decomp_table(),
                           partition_fn=default_partition)
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend)


def bitwise_equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and torch.equal(a.view(-1).view(torch.int32),
                                              b.view(-1).view(torch.int32))


@EXPENSIVE
@given(spec=programs(), budget=BUDGETS, solver=SOLVERS)
def test_saved_bytes_within_budget(spec, budget, solver):
    fn, inputs = spec.make(), spec.inputs()
    meter = lambda b, s="dp": saved_bytes(
        fresh_compile(functools.partial(refimpl.compile, solver=s), fn, b), inputs)
    low, high = meter(0.0), meter(1.0)
    bound = budget_bound(low, max(low, high), budget)
    try:
        got = meter(budget, solver)
    except ValueError:  # brute refuses more than 20 candidates: not a valid example for it
        event("brute: too many candidates")
        reject()
    assert got <= bound, reproducer(spec, budget=budget, solver=solver, got=got,
                                    bound=bound, min=low, max=high)


@EXPENSIVE
@given(spec=programs(), budget=BUDGETS)
def test_outputs_and_gradients_equal_reference(spec, budget):
    fn = spec.make()
    compiled = fresh_compile(refimpl.compile, fn, budget)
    out, grads = run(compiled, spec)
    ref_out, ref_grads = run(no_recompute_reference(fn), spec)
    why = reproducer(spec, budget=budget)
    assert bitwise_equal(out, ref_out), why
    assert all(bitwise_equal(g, r) for g, r in zip(grads, ref_grads)), why
    if not spec.has_random:
        eager_out, eager_grads = run(fn, spec)
        torch.testing.assert_close(out, eager_out, msg=why)
        for g, r in zip(grads, eager_grads):
            torch.testing.assert_close(g, r, msg=why)


@EXPENSIVE
@given(spec=programs(), budget=BUDGETS)
def test_plan_bytes_equal_the_meter(spec, budget):
    """The plan's byte model (storages, views sharing them) is what the meter reads."""
    fn, inputs = spec.make(), spec.inputs()
    plans = []
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=DynamoBackend(
        refimpl.PartitionOptions(memory_budget=budget), on_plan=plans.append))
    got = saved_bytes(compiled, inputs)
    assert [p.saved_bytes for p in plans] == [got], reproducer(spec, budget=budget)


@given(spec=programs(), solver=st.sampled_from(["dp", "ilp"]))
def test_recompute_cost_never_increases_with_budget(spec, solver):
    gm, num_fwd = trace_joint(spec.make(), *spec.inputs())
    graph = joint_graph_from_fx(gm, num_fwd, flops_runtime)
    costs = [choose(graph, refimpl.PartitionOptions(memory_budget=b, solver=solver))
             .recompute_cost for b in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)]
    assert costs == sorted(costs, reverse=True), reproducer(spec, costs=costs)


def fan_out_program(widths: list[int]):
    """The seed's uneven chain: ``sum(mm(x, w_i).cos().sum())`` with ``w_i`` of width
    ``8 * widths[i]``. Every ``mm`` output is read by ``cos``'s backward, so each is one
    knapsack item: a real program with ``len(widths)`` items of random sizes."""
    x = torch.randn(8, 8, requires_grad=True)
    ws = [torch.randn(8, 8 * w, requires_grad=True) for w in widths]

    def f(x, *ws):
        return sum(torch.mm(x, w).cos().sum() for w in ws)

    return f, [x, *ws]


@given(widths=st.lists(st.integers(1, 6), min_size=2, max_size=6), budget=BUDGETS)
def test_exact_solvers_reach_brute_optimum_on_programs(widths, budget):
    fn, inputs = fan_out_program(widths)
    gm, num_fwd = trace_joint(fn, *inputs)
    graph = joint_graph_from_fx(gm, num_fwd, flops_runtime)
    items = candidates.items(graph, candidates.hard_bans(graph))
    assert len(items) == len(widths), [i.name for i in items]
    memories, runtimes = [i.bytes for i in items], [i.runtime for i in items]
    capacity = int(budget * sum(memories))
    best = sum(runtimes[i] for i in knapsack.brute(memories, runtimes, capacity))
    for solver in ("dp", "ilp"):
        chosen = knapsack.solve(solver, memories, runtimes, capacity)
        assert sum(memories[i] for i in chosen) <= capacity
        assert sum(runtimes[i] for i in chosen) == pytest.approx(best, rel=1e-9), solver


items_lists = st.integers(0, 10).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 50), min_size=n, max_size=n),
    st.lists(st.integers(0, 100).map(float), min_size=n, max_size=n),
    st.integers(0, 200)))


@given(problem=items_lists)
def test_exact_solvers_reach_brute_optimum_on_random_knapsacks(problem):
    memories, runtimes, capacity = problem
    brute = knapsack.brute(memories, runtimes, capacity)
    best = (sum(runtimes[i] for i in brute), sum(memories[i] for i in brute))
    for solver in ("dp", "ilp"):
        chosen = knapsack.solve(solver, memories, runtimes, capacity)
        got = (sum(runtimes[i] for i in chosen), sum(memories[i] for i in chosen))
        assert got == best, (solver, problem)
    greedy = knapsack.greedy(memories, runtimes, capacity)
    assert sum(memories[i] for i in greedy) <= capacity
    assert sum(runtimes[i] for i in greedy) <= best[0]


# ---- meta-tests of the strategy ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_strategy_generates_every_kind(kind):
    spec = find(programs(), lambda s: any(step.kind == kind for step in s.steps),
                settings=settings(max_examples=500, database=None))
    assert any(step.kind == kind for step in spec.steps)


def test_strategy_rejects_unknown_kinds():
    with pytest.raises(ValueError, match=r"kinds=.*each must be one of"):
        find(programs(kinds=("mm", "fft")), lambda s: True)


def live_weights(spec: ProgramSpec) -> list[bool]:
    """For each weight, whether the program's outputs depend on it."""
    live = set(spec.outputs)
    for i in range(len(spec.steps), 0, -1):
        if i in live:
            live.update(spec.steps[i - 1].reads)
    return [i + 1 in live for i, s in enumerate(spec.steps) if s.kind in ("mm", "conv")]


@given(spec=programs())
def test_strategy_programs_are_valid_and_differentiable(spec):
    out, grads = run(spec.make(), spec)
    assert out.shape == () and torch.isfinite(out)
    assert len(grads) == 1 + len(spec.weight_shapes())
    for grad, shape, live in zip(grads[1:], spec.weight_shapes(), live_weights(spec)):
        assert (grad is not None) == live
        assert grad is None or grad.shape == torch.Size(shape)
