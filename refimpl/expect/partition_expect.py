"""Expectations for the partition properties, derived without refimpl's partitioner.

Sources: the brute-force Pareto frontier of :mod:`refimpl.expect.partition_brute` (the
fewest bytes any valid plan saves; the FLOPs the best plan within a bound recomputes), the
no-recompute bytes (every storage the backward reads, kept: no sane plan at any budget saves
more), the meter (:func:`refimpl.measure_saved`) for what a compiled function really keeps,
and eager execution or the no-recompute reference run for outputs and gradients.

The bound is written out here, as torch defines it, not imported:
``floor(min + budget x (max - min))`` with a relative slack of 1e-9 of the span against
float rounding. Each ``assert_*`` helper's message carries the expected and the observed
value, and the reproducer the caller passes in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from refimpl.expect.partition_brute import Outcome, ReferenceRun, SaveProblem, flop_counter
from refimpl.expect.same import mismatch
from refimpl.memory import SavedReport, measure_saved

SLACK = 1e-9
#: the tolerance of :func:`close` and of dynamo's rule (:mod:`refimpl.expect.same`) where a
#: float64 reference judges a result that is not close to eager's
TOL = 1e-5


@dataclass(frozen=True)
class PartitionPromise:
    """What a ``compile`` target promises beyond the bound (data on its adapter, attribute
    ``partition_promise``; default :data:`BOUND_ONLY`).

    least_recompute  under torch's default solver config, a plan within the bound recomputes
                     no more FLOPs (torch's formulas) than the best valid plan of the
                     brute-force model within that bound, the bound's ``max`` being the
                     target's own budget-1.0 bytes, and when it recomputes as many, keeps
                     no more bytes than that plan: an exact solver's promise. torch's
                     knapsack heuristics make no such promise.
    modelled_knapsack  under ``activation_memory_budget_solver`` ``"greedy"`` or ``"ilp"``,
                     the plan keeps the bytes of the knapsack formulation written out in
                     :mod:`refimpl.expect.partition_knapsack` (refimpl's; torch's own
                     differs: its items include zero-FLOP nodes and its sizes are
                     quantised, docs/differences.md).
    exact_solvers    other ``activation_memory_budget_solver`` values under which
                     ``least_recompute`` holds too, on joint graphs of at most 16
                     forward values (refimpl's: ``"brute"``, its enumeration of every
                     save-set).
    refimpl_event_clocks  its ``"profile"`` estimator times a device's runs on the clock
                     registered for that device type in refimpl's
                     ``refimpl.partition.runtime.EVENT_CLOCKS`` (refimpl's own; a property
                     registers a fake clock there to run the device benchmark on a CPU).
    """

    least_recompute: bool = False
    modelled_knapsack: bool = False
    exact_solvers: tuple[str, ...] = ()
    refimpl_event_clocks: bool = False


BOUND_ONLY = PartitionPromise()


def promise_of(backend) -> PartitionPromise:
    return getattr(backend, "partition_promise", None) or BOUND_ONLY


def least_recompute_solvers(backend) -> tuple[str | None, ...]:
    """The solvers whose plans the backend promises recompute the least: its default
    (``None``) when it promises that, then its exact solvers; empty when it promises none."""
    promise = promise_of(backend)
    return ((None,) if promise.least_recompute else ()) + promise.exact_solvers


#: the skip of a property that needs an exact solver, for a backend that promises none
NO_EXACT_SOLVER = ("backend {name!r} promises no exact solver (partition_promise."
                   "least_recompute is False, exact_solvers empty)")


def bound_bytes(min_bytes: int, max_bytes: int, budget: float) -> int:
    """``floor(min + budget x (max - min) + 1e-9 x (max - min))``; ``max < min`` is an
    error, never hidden behind ``max(min, max)``."""
    if max_bytes < min_bytes:
        raise AssertionError(f"max bytes {max_bytes} < min bytes {min_bytes}: a budget-1.0 "
                             "plan saves less than the fewest bytes any valid plan saves")
    span = max_bytes - min_bytes
    return math.floor(min_bytes + budget * span + SLACK * span)


@dataclass(frozen=True)
class Expected:
    """What the brute force says about one program."""

    plans: tuple[Outcome, ...]  # per bytes figure, the fewest FLOPs; by bytes ascending
    no_recompute_bytes: int
    #: bytes of saving what the forward outputs need and computing the backward-only work
    #: in the backward (:meth:`SaveProblem.save_forward_work`): no budget-1.0 plan that
    #: bans only forward work from recompute keeps more
    forward_work_bytes: int

    @classmethod
    def of(cls, run: ReferenceRun) -> Expected:
        return cls.of_problem(run.problem)

    @classmethod
    def of_problem(cls, problem: SaveProblem) -> Expected:
        return cls(tuple(problem.plans()), problem.save_everything().bytes,
                   problem.save_forward_work().bytes)

    @property
    def frontier(self) -> list[Outcome]:
        """The Pareto-optimal plans, by bytes ascending."""
        frontier: list[Outcome] = []
        for point in self.plans:
            if not frontier or point.flops < frontier[-1].flops:
                frontier.append(point)
        return frontier

    @property
    def min_bytes(self) -> int:
        return self.frontier[0].bytes

    def bound(self, budget: float, max_bytes: int | None = None) -> int:
        """The bound at ``budget``; ``max`` defaults to the no-recompute bytes."""
        return bound_bytes(self.min_bytes, self.no_recompute_bytes if max_bytes is None
                           else max_bytes, budget)

    def optimum(self, bound: int) -> int:
        """The fewest FLOPs any valid plan within ``bound`` bytes recomputes."""
        fits = [o.flops for o in self.plans if o.bytes <= bound]
        if not fits:
            raise AssertionError(f"bound {bound} is below the minimum {self.min_bytes}")
        return min(fits)

    def best_within(self, bound: int) -> Outcome:
        """The plan docs/design.md's objective prefers within ``bound`` bytes: the fewest
        recompute FLOPs, then, among plans with those FLOPs, the fewest bytes (two save-sets
        that tie in both are the same plan to whoever measures it)."""
        optimum = self.optimum(bound)
        return min((o for o in self.plans if o.bytes <= bound and o.flops == optimum),
                   key=lambda o: o.bytes)

    def reached(self, budget: float) -> bool:
        """The budget binds (the best plan within the bound recomputes more than the best
        plan overall) and the choice is non-trivial (valid plans of two or more different
        sizes fit the bound, so which to take is a real decision)."""
        bound = self.bound(budget)
        binds = self.optimum(bound) > self.frontier[-1].flops
        return binds and sum(o.bytes <= bound for o in self.plans) >= 2


def assert_saved_within(observed: int, expected: Expected, budget: float, why: str,
                        max_bytes: int | None = None) -> None:
    """``min <= observed <= bound(budget)``."""
    bound = expected.bound(budget, max_bytes)
    assert observed <= bound, (
        f"{why}\nsaved bytes at budget {budget}: expected <= {bound} (min "
        f"{expected.min_bytes}, max {max_bytes or expected.no_recompute_bytes}), "
        f"observed {observed}")
    assert observed >= expected.min_bytes, (
        f"{why}\nsaved bytes at budget {budget}: expected >= {expected.min_bytes} (the "
        f"fewest any valid plan saves; fewer means a random op was recomputed or the "
        f"backward reads something it never saved), observed {observed}")


def close(a, b, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)


def assert_same_results(output, grads, ref_output, ref_grads, why: str,
                        reference: str, fp64: tuple | None = None) -> None:
    """Output and every input gradient close to the reference's. With ``fp64`` (the same
    run in float64: ``(output, grads)``) a tensor that is not close is judged by dynamo's
    rule (:func:`refimpl.expect.same.mismatch`, ``tol`` :data:`TOL`): its RMSE to the
    float64 truth at most 2-3 times the reference's own. Float32 rounding differs between
    any two orders of the same sums, and a saturated ``tanh`` turns that into large
    relative differences of near-zero gradients: the float64 run tells rounding from a
    wrong answer."""
    pairs = [("output", output, ref_output)] + [
        (f"gradient of input {i}", g, r) for i, (g, r) in enumerate(zip(grads, ref_grads))]
    truths = [None] * len(pairs) if fp64 is None else [fp64[0], *fp64[1]]
    for (what, observed, expected), truth in zip(pairs, truths):
        if close(observed, expected, rtol=TOL):
            continue
        rule = "not close" if truth is None or observed is None or expected is None else \
            mismatch(expected, observed, truth, tol=TOL)
        assert rule is None, (f"{why}\n{what}: expected {reference}'s\n{expected}\n"
                              f"observed\n{observed}\n({rule})")


def assert_as_eager(fn, spec, output, grads, why: str) -> None:
    """``output`` and ``grads`` (a compiled ``fn``'s, on ``spec.inputs(0)``) close to those
    of ``fn`` run eagerly on fresh ``spec.inputs(0)`` (:func:`assert_same_results`)."""
    inputs = spec.inputs(0)
    eager = fn(*inputs)
    eager.backward()
    assert_same_results(output, grads, eager.detach(), [x.grad for x in inputs], why,
                        "eager")


def assert_recompute_within(recomputed: int, expected: Expected, max_bytes: int,
                            budget: float, saved: int, why: str) -> None:
    """The plan (``recomputed`` FLOPs beyond the no-recompute reference's backward,
    ``saved`` bytes) is at least as good, in docs/design.md's order (fewer FLOPs, then
    fewer bytes), as the best plan of the brute force within the bound that ``budget``
    gives, with ``max_bytes`` (the target's budget-1.0 bytes) as ``max``: an exact
    solver's promise (``PartitionPromise.least_recompute``). So no more FLOPs than that
    plan, and at its FLOPs no more bytes (a solver that finds the least recompute but not
    the least memory among such plans keeps more bytes than it). At least as good, not
    equal: the target's plan space is the model's or wider (a view of a tuple element)."""
    bound = bound_bytes(expected.min_bytes, max_bytes, budget)
    best = expected.best_within(bound)
    assert recomputed <= best.flops, (
        f"{why}\nrecomputed FLOPs: expected <= {best.flops} (the best plan within {bound} "
        f"bytes: min {expected.min_bytes}, the budget-1.0 plan's {max_bytes}; the "
        f"fewest-bytes plan recomputes {expected.frontier[0].flops}), observed "
        f"{recomputed} (saving {saved} bytes)")
    assert recomputed < best.flops or saved <= best.bytes, (
        f"{why}\nsaved bytes at the least recompute ({best.flops} FLOPs): expected <= "
        f"{best.bytes} (the fewest bytes of a plan within {bound} bytes that recomputes "
        f"{best.flops} FLOPs), observed {saved}: a plan of as many FLOPs and more bytes")


def backward_flops(compiled, spec) -> int:
    """FLOPs (torch's FlopCounterMode, CPU attention counted:
    :func:`~refimpl.expect.partition_brute.flop_counter`) of one backward of ``compiled`` on
    ``spec``'s inputs, seeded as :func:`measured`. Call it after a first run: a backward
    compiled lazily would be counted while it compiles."""
    inputs = spec.inputs(0)
    torch.manual_seed(0)
    out = compiled(*inputs)
    with flop_counter() as counter:
        out.backward()
    return counter.get_total_flops()


def measured(compiled, spec) -> tuple[int, torch.Tensor, list]:
    """(saved bytes by the meter, output, input gradients) of one run of ``compiled`` on
    ``spec``'s inputs, seeded (``manual_seed(0)``) so random draws repeat across runs."""
    report, inputs = measured_report(compiled, spec)
    return report.bytes, report.outputs.detach(), [x.grad for x in inputs]


def measured_report(compiled, spec) -> tuple[SavedReport, list[torch.Tensor]]:
    """The meter's whole report (bytes, distinct new storages, saved tensors) of one seeded
    forward and backward of ``compiled`` on ``spec``'s inputs, and those inputs."""
    inputs = spec.inputs(0)
    torch.manual_seed(0)
    report = measure_saved(compiled, *inputs)
    report.outputs.backward()
    return report, inputs
