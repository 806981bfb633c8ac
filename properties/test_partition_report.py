"""The backend under test's plan report says what its compiled function does.

A target that reports its plan (an ``explain(fn, *args, memory_budget=None)`` method:
refimpl's ``refimpl.explain``; torch has no such report, so the property is skipped there)
returns a plan whose fields a user reads, and ``summary()`` lines they read in a terminal.
Each is held to a measurement of the same program compiled by the target's ``compile`` at
the same budget, or to the brute force (:mod:`refimpl.expect.partition_brute`), never to
the report's own code:

* ``memory_budget``: the budget asked for (1.0 when none is given: torch's default
  ``activation_memory_budget``; ``compile`` is then called without one too, and its plan
  must be the budget-1.0 one), ``runtime_estimator``: the config's;
* ``saved_bytes``: the bytes the meter reads of the compiled function; ``max_bytes``: those
  of the budget-1.0 compile; ``min_bytes``: the fewest bytes of any valid plan (brute
  force); ``bound_bytes``: ``floor(min + budget x (max - min))``;
* ``recompute_cost`` (the ``"flops"`` estimator): the FLOPs the compiled backward runs
  beyond the no-recompute reference's (torch's FlopCounterMode);
* ``explain_many(fn, *args, memory_budgets=[budget, 1.0])``, where the target has it (one
  trace, a plan per budget): the first plan's fields and summary as ``explain``'s above, the
  second's bytes those of the budget-1.0 compile;
* ``saved`` and ``saved_inputs``: as many activation names as the compiled function holds
  distinct new storages for its backward, and as many input names as the tensors it saves
  beyond those (the meter's counts: these programs save each value once, and no two saved
  activations share a storage); no name in both;
* ``summary()``: five lines, written out here from those measured figures (bytes in MiB to
  two decimals, ``2**20`` bytes a MiB; the recompute cost as ``%g``);
* the plan is a value a user may keep: it hashes (a set of plans, a dict keyed by plan) and
  refuses assignment to a field (``AttributeError``, which dataclasses'
  ``FrozenInstanceError`` is), its fields unchanged after the attempt.

The programs are two matmul chains (``cos(x @ W1)``, ``sin(that @ W2)``) with a batch and
widths drawn so that the byte figures land from about 0.01 MiB to 1 MiB: a summary that
scales or rounds them wrongly prints other digits.

Reach (``refimpl.properties.reach``): the fewest bytes differ from the budget-1.0 bytes, so
the report's four byte figures are not all one number.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import (
    backward_flops,
    bound_bytes,
    measured,
    measured_report,
)
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.properties.test_partition_properties import expected_of, reproducer
from refimpl.strategies.programs import NONLINEAR, ProgramSpec, Step

#: batch sizes and widths: byte figures from ~0.01 MiB to 1 MiB, none of them round
SIZES = (48, 96, 200, 256, 333, 512)
#: ``None``: no budget given (the report says 1.0)
BUDGETS = (None, 0.0, 0.3, 0.6, 1.0)
MIB = 2**20


@st.composite
def sized_chains(draw) -> ProgramSpec:
    """``f(x @ W1)`` and ``g(f(x @ W1) @ W2)``, both outputs, at drawn sizes."""
    n, width = draw(st.sampled_from(SIZES)), draw(st.sampled_from((8, 16, 32)))
    first, second = draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES))
    steps = (Step("mm", "mm", (0,), first),
             Step("pointwise", draw(st.sampled_from(NONLINEAR)), (1,), first),
             Step("mm", "mm", (2,), second),
             Step("pointwise", draw(st.sampled_from(NONLINEAR)), (3,), second))
    return ProgramSpec(n, width, steps, outputs=(2, 4))


def mib(nbytes: int) -> str:
    return f"{nbytes / MIB:.2f} MiB"


def expected_summary(plan, budget: float, saved: int, bound: int, low: int, high: int,
                     recomputed: int) -> list[str]:
    """The five lines of a plan's summary, from measured figures (module docstring); the
    names listed are the plan's own (no measurement names nodes)."""
    names = lambda values: ", ".join(values) or "-"
    return [
        f"memory_budget={budget} solver={plan.solver} runtime_estimator=flops",
        f"saved {mib(saved)} (bound {mib(bound)}; min {mib(low)}, max {mib(high)})",
        f"saved: {names(plan.saved)}",
        f"saved inputs: {names(plan.saved_inputs)}",
        f"recomputed ({float(recomputed):g}): {names(plan.recomputed)}",
    ]


@given(spec=sized_chains(), asked=st.sampled_from(BUDGETS))
def test_partition_plan_report_reads_the_compiled_plan(refimpl_backend, spec, asked):
    explain = getattr(refimpl_backend, "explain", None)
    if explain is None:
        pytest.skip(f"backend {refimpl_backend.name!r} reports no plan (no explain method)")
    compile_fn = component(refimpl_backend, "compile")
    run, expected = expected_of(spec)
    budget = 1.0 if asked is None else asked
    fn = spec.make()
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    with torch._functorch.config.patch(activation_memory_budget_runtime_estimator="flops"):
        plan = explain(fn, *spec.inputs(0), memory_budget=asked)
        high = measured(compile_fn(fn, memory_budget=1.0), spec)[0]
        compiled = compile_fn(fn, memory_budget=asked)  # None: the default, 1.0
        report = measured_report(compiled, spec)[0]  # the first call compiles
        recomputed = backward_flops(compiled, spec) - run.backward_flops
    saved = report.bytes
    low = expected.min_bytes
    bound = bound_bytes(low, high, budget)
    reach(low < high)
    why = reproducer(spec, memory_budget=asked, backend=refimpl_backend.name)
    fields = {"memory_budget": budget, "runtime_estimator": "flops", "saved_bytes": saved,
              "min_bytes": low, "max_bytes": high, "bound_bytes": bound,
              "recompute_cost": recomputed}
    observed = {name: getattr(plan, name) for name in fields}
    assert observed == fields, (f"{why}\nplan fields: expected {fields} (measured on the "
                                f"compiled function), observed {observed}")
    check_a_value(plan, why)
    check_names(plan, report, why)
    wanted = expected_summary(plan, budget, saved, bound, low, high, recomputed)
    lines = plan.summary().split("\n")
    assert lines == wanted, f"{why}\nsummary: expected\n{wanted}\nobserved\n{lines}"
    explain_many = getattr(refimpl_backend, "explain_many", None)
    if explain_many is not None:  # one trace, the same plans as the measured compiles
        with torch._functorch.config.patch(
                activation_memory_budget_runtime_estimator="flops"):
            many = explain_many(fn, *spec.inputs(0), memory_budgets=[budget, 1.0])
        at_one = {"memory_budget": 1.0, "saved_bytes": high, "min_bytes": low,
                  "max_bytes": high, "bound_bytes": high}
        observed_many = [{name: getattr(p, name) for name in wanted_fields}
                         for p, wanted_fields in zip(many, (fields, at_one))]
        assert observed_many == [fields, at_one], (
            f"{why}\nexplain_many(memory_budgets=[{budget}, 1.0]): expected {[fields, at_one]}"
            f" (measured on the compiled function), observed {observed_many}")
        assert many[0].summary().split("\n") == wanted, f"{why}\nexplain_many's summary"


def check_names(plan, report, why: str) -> None:
    """The plan names what the compiled function holds (module docstring): its activations
    by the meter's distinct new storages, its inputs by the saved tensors beyond those."""
    counts = {"saved": len(plan.saved), "saved_inputs": len(plan.saved_inputs)}
    held = {"saved": report.storages, "saved_inputs": report.saved_tensors - report.storages}
    assert counts == held and not set(plan.saved) & set(plan.saved_inputs), (
        f"{why}\nplan names: expected {held} (the meter's counts), observed {counts}: "
        f"saved={plan.saved}, saved_inputs={plan.saved_inputs}")


def check_a_value(plan, why: str) -> None:
    """The plan hashes and refuses assignment to its fields (module docstring)."""
    assert len({plan, plan}) == 1 and hash(plan) == hash(plan), f"{why}\nplan hash"
    before = plan.saved_bytes
    try:
        plan.saved_bytes = before + 1
    except AttributeError:
        pass
    else:
        raise AssertionError(f"{why}\nplan.saved_bytes = ... was accepted: a plan is a value")
    assert plan.saved_bytes == before, f"{why}\nplan.saved_bytes changed by a refused write"
