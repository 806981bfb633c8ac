"""The backend under test's partitioner refuses options it cannot honour, never runs on them.

torch's partitioner, asked for a plan at a budget it cannot read (a number outside [0, 1],
NaN, a string, a complex number), raises while it compiles the graph (torch 2.13:
``BackendCompilerFailed``); so does a knapsack solver or runtime estimator name in
``torch._functorch.config`` that it does not know. A backend that accepts such a budget (a
string parsed as a number, a value clamped into range) or ignores an unknown name and plans
with a default has made up a plan the user never asked for (docs/design.md: bad input is an
error naming the argument, never a silent fallback). So:

* ``compile(fn, memory_budget=bad)``, called once, raises (at compile or at the first call);
* with ``activation_memory_budget_solver`` or ``activation_memory_budget_runtime_estimator``
  set to a name neither torch nor refimpl knows, the first call at a budget that makes the
  solver choose raises.

The program is ``(x @ w)`` through a nonlinear op, summed: its budget binds below 1.0, so
the solver (and the runtime estimator behind it) runs. Names torch knows and refimpl does not
(``"testing"``, ``"dynamic_memory_budget_dp"``, ...) are never drawn; bool budgets are not
drawn either: torch reads ``True`` as 1 (docs/findings.md, partition).

Reach (``refimpl.properties.reach``): every example draws a value both targets refuse, so
each example is the case the property is for.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.programs import NONLINEAR, ProgramSpec, Step

#: budgets neither target accepts: out of range (both sides, infinities), NaN, a number
#: written as a string, a complex number
BAD_BUDGETS = st.one_of(
    st.floats(min_value=1.0, exclude_min=True),
    st.floats(max_value=0.0, exclude_max=True),
    st.just(math.nan),
    st.floats(0.0, 1.0).map(repr),
    st.floats(0.0, 1.0).map(lambda b: complex(b, 0.0)),
)
#: every ``activation_memory_budget_solver`` / ``..._runtime_estimator`` value that torch
#: 2.13 or refimpl knows: never drawn as an unknown name
KNOWN_NAMES = ("dp", "ilp", "greedy", "dp_knapsack_sliding_hirschberg",
               "dynamic_memory_budget_dp", "exact", "brute", "flops", "profile", "testing")
UNKNOWN_NAMES = st.one_of(
    st.sampled_from(["DP", "Greedy", "ILP", "flop", "profiler", "", "none", "knapsack"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    st.integers(0, 3),
).filter(lambda name: name not in KNOWN_NAMES)
CONFIG_KEYS = ("activation_memory_budget_solver", "activation_memory_budget_runtime_estimator")


@st.composite
def one_matmul(draw) -> ProgramSpec:
    """``nonlinear(x @ W)``: one value the backward needs, saved or recomputed."""
    n, width, out = draw(st.integers(2, 6)), draw(st.integers(2, 8)), draw(st.integers(2, 8))
    steps = (Step("mm", "mm", (0,), out),
             Step("pointwise", draw(st.sampled_from(NONLINEAR)), (1,), out))
    return ProgramSpec(n, width, steps, outputs=(2,))


def refused(backend, spec: ProgramSpec, budget) -> bool:
    """Whether compiling ``spec`` at ``budget`` and running it once (forward and backward)
    raises; each target raises its own type (refimpl ValueError, torch
    ``BackendCompilerFailed``), so any exception is a refusal."""
    torch._dynamo.reset()  # programs share one code object: no cache, no recompile limit
    try:
        compiled = component(backend, "compile")(spec.make(), memory_budget=budget)
        compiled(*spec.inputs(0)).backward()
    except Exception:  # the refusal's type is the target's own
        return True
    return False


@given(spec=one_matmul(), budget=BAD_BUDGETS)
def test_partition_refuses_a_budget_it_cannot_read(refimpl_backend, spec, budget):
    reach(True)
    assert refused(refimpl_backend, spec, budget), (
        f"program:\n{spec}\nbackend={refimpl_backend.name}: memory_budget={budget!r} was "
        "accepted (expected an error: a budget is a number in [0, 1])")


@given(spec=one_matmul(), key=st.sampled_from(CONFIG_KEYS), name=UNKNOWN_NAMES,
       budget=st.sampled_from([0.25, 0.5, 0.75]))
def test_partition_refuses_an_unknown_solver_or_estimator(refimpl_backend, spec, key, name,
                                                           budget):
    reach(True)
    with torch._functorch.config.patch(**{key: name}):
        outcome = refused(refimpl_backend, spec, budget)
    assert outcome, (
        f"program:\n{spec}\nbackend={refimpl_backend.name}: torch._functorch.config.{key}="
        f"{name!r} was accepted at memory_budget={budget} (expected an error: no solver or "
        "estimator has that name)")
