"""Properties of the backend under test's budgets: torch's region budget, and monotonicity.

Programs come from :func:`refimpl.strategies.programs.programs`; expectations are the
brute-force ones of :mod:`refimpl.expect.partition_expect` (independent of refimpl's
partitioner) or a relation between two measurements of the target itself.

* a ``torch.autograd.graph.region_activation_memory_budget(b)`` region around the whole
  program, compiled at global budget 1.0, saves (by the meter) within ``bound(b)``: the region
  budget replaces the global one (torch's partitioner; issue 21, item 5). Skipped, with the
  reason, where torch has no region budgets;
* the bytes the meter reads never rise as the budget falls: ``saved(b1) <= saved(b2)`` for
  ``b1 < b2`` (docs/design.md, "Monotone in the budget", says why the exact solver guarantees
  it and what it does not guarantee).

Reach (``refimpl.properties.reach``): the budget binds and the bound admits two or more
Pareto-optimal plans; for the monotone property, at either budget (a plan can change).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import event, given, reject
from hypothesis import strategies as st

from refimpl.expect.partition_brute import BruteForceRefused, trace_reference
from refimpl.expect.partition_expect import Expected, assert_saved_within, measured
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.programs import ProgramSpec, programs

#: budgets where the bound binds on the drawn programs (as test_partition_properties.BUDGETS)
BUDGETS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
REGION_API = getattr(torch.autograd.graph, "region_activation_memory_budget", None)


def expected_of(spec: ProgramSpec) -> Expected:
    """The brute-force expectation of one trace; too large for brute force: not an example."""
    run = trace_reference(spec.make(), spec.inputs(0), seed=0)
    try:
        return Expected.of(run)
    except BruteForceRefused:
        event("brute force refused: too many save candidates")
        reject()


def split_regions(fn, budget: float, layout: str):
    """``fn`` with one region budget over part of its forward: ``"inside"`` runs ``fn`` in
    ``region_activation_memory_budget(budget)`` and a cosine of its result outside it,
    ``"before"`` a cosine of the input outside and ``fn`` inside; ``"two"`` covers all of
    it with two regions of different budgets (``fn`` at ``budget``, the cosine at half)."""
    def split_fn(x, *weights):
        if layout == "before":
            x = x.cos()
        with REGION_API(budget):
            y = fn(x, *weights)
        if layout == "inside":
            return y.cos()
        if layout == "two":
            with REGION_API(budget / 2):
                return y.cos()
        return y

    return split_fn


def in_region(fn, budget: float):
    """``fn`` with its whole body inside ``region_activation_memory_budget(budget)``."""
    def region_fn(*args):
        with REGION_API(budget):
            return fn(*args)

    return region_fn


@pytest.mark.skipif(REGION_API is None, reason=f"torch {torch.__version__} has no "
                    "torch.autograd.graph.region_activation_memory_budget")
@given(spec=programs(), budget=st.sampled_from(BUDGETS[1:-1]))
def test_region_budget_replaces_the_global_budget(refimpl_backend, spec, budget):
    compile_fn = component(refimpl_backend, "compile")
    expected = expected_of(spec)
    reach(expected.reached(budget))
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    saved, _, _ = measured(compile_fn(in_region(spec.make(), budget), memory_budget=1.0),
                           spec)
    why = (f"program:\n{spec}\nregion budget={budget} (global 1.0), "
           f"backend={refimpl_backend.name}")
    assert_saved_within(saved, expected, budget, why)


@given(spec=programs(), budgets=st.lists(st.sampled_from(BUDGETS[1:-1]), min_size=2,
                                          max_size=2, unique=True).map(sorted))
def test_saved_bytes_never_rise_as_the_budget_falls(refimpl_backend, spec, budgets):
    """Two budgets strictly inside (0, 1), where bounds bind (0.0 and 1.0 are swept, with
    the same monotone check, by ``test_partition_honours_every_budget_of_one_function``)."""
    compile_fn = component(refimpl_backend, "compile")
    low, high = budgets
    expected = expected_of(spec)
    reach(expected.reached(low) or expected.reached(high))  # one of them binds
    fn = spec.make()
    torch._dynamo.reset()
    saved = {b: measured(compile_fn(fn, memory_budget=b), spec)[0] for b in budgets}
    assert saved[low] <= saved[high], (
        f"program:\n{spec}\nbackend={refimpl_backend.name}: saved bytes rose as the budget "
        f"fell: budget {low} saves {saved[low]}, budget {high} saves {saved[high]}")


@pytest.mark.skipif(REGION_API is None, reason=f"torch {torch.__version__} has no "
                    "torch.autograd.graph.region_activation_memory_budget")
@given(spec=programs(max_steps=4), budget=st.sampled_from(BUDGETS[1:-1]),
       layout=st.sampled_from(["inside", "before", "two"]))
def test_region_budget_over_part_of_a_graph_is_refused(refimpl_backend, spec, budget, layout):
    """torch's partitioner applies one budget per joint graph: a region budget that leaves
    some forward op of the graph outside it, or two regions of different budgets in one
    graph, is refused with an error that names ``region_activation_memory_budget`` (torch
    2.13: "must cover the entire forward of a graph"), never planned at one of the budgets
    or the global one. Reach: every example holds such a graph."""
    reach(True)
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    compiled = component(refimpl_backend, "compile")(split_regions(spec.make(), budget, layout),
                                                    memory_budget=1.0)
    why = (f"program:\n{spec}\nregion budget={budget}, layout={layout!r}, "
           f"backend={refimpl_backend.name}")
    try:
        compiled(*spec.inputs(0)).backward()
    except Exception as exc:  # each target raises its own type; the message names the API
        assert "region_activation_memory_budget" in str(exc), (
            f"{why}\nexpected an error naming region_activation_memory_budget, observed "
            f"{type(exc).__name__}: {exc}")
        return
    raise AssertionError(f"{why}\nexpected an error (one budget per graph), the call ran")
