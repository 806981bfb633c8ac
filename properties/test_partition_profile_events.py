"""The ``profile`` estimator's device benchmark (torch's GPU benchmarker), on a fake clock.

On CUDA, refimpl times a node as torch's ``InductorBenchmarker.benchmark_gpu`` does: one
warm-up run, ``profile_repeats`` estimating runs, then ``k`` timed runs, ``k`` the most runs
of the estimate (the least estimating run) that fit in 25 ms, between 1 and 100 (100 when the
estimate is 0); each run between two device events; the node's time is the least run, in
seconds (events count milliseconds). This property runs that benchmark without a GPU: it
puts a fake event clock under the ``cpu`` device type (``refimpl.partition.runtime``'s
``EVENT_CLOCKS``, where refimpl keeps CUDA's), and a custom op whose every call advances the
fake clock by a drawn number of milliseconds (the warm-up, each estimating run, then every
timed run). Through the target's ``explain`` at budget 0 (the matmul's output is not saved,
so the backward recomputes it) it checks, against the definition above, the number of calls
the timing made and the plan's ``recompute_cost``: the recomputed op's seconds.

A target that does not promise to time on refimpl's event clocks
(``PartitionPromise.refimpl_event_clocks``: a backend of its own times on its own clock, where
the fake one cannot reach) or has no ``explain`` (torch's: its profile estimator needs a CUDA
device and reports no plan) is skipped, with the reason. Reach
(``refimpl.properties.reach``): the plan recomputes the timed op.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from refimpl.expect.partition_expect import promise_of
from refimpl.partition import runtime
from refimpl.properties.reach import reach
from refimpl.strategies.custom_matmul import as_matmul

#: milliseconds a run may take: exact binary fractions, so sums and products are exact; 0
#: (100 timed runs), under and over 25 ms (one timed run), and 25 ms exactly
MILLISECONDS = st.sampled_from([0.0, 0.125, 0.375, 1.5, 2.5, 6.0, 12.5, 25.0, 40.0])

#: the fake device clock: the current time (ms) and the durations of the next calls
NOW = [0.0]
DURATIONS: list[float] = []
CALLS = [0]
#: ``explain``'s estimating runs (``PartitionOptions.profile_repeats``' default)
REPEATS = 5


@torch.library.custom_op("refimpl_props::clocked_mm", mutates_args=())
def clocked_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w``; each call advances the fake clock by the next of :data:`DURATIONS`."""
    CALLS[0] += 1
    NOW[0] += DURATIONS.pop(0) if DURATIONS else 0.0
    return x @ w


as_matmul(clocked_mm)


class FakeEvent:
    """A device event on the fake clock: ``record`` reads it, ``elapsed_time`` in ms."""

    def __init__(self) -> None:
        self.at: float | None = None

    def record(self) -> None:
        self.at = NOW[0]

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None, "an event read before recorded"
        return end.at - self.at


FAKE_CLOCK = runtime.EventClock(select=lambda device: mock.MagicMock(),
                                synchronize=lambda: None, event=FakeEvent,
                                l2_bytes=lambda device: 4096)


def timed_runs(estimate_ms: float) -> int:
    """torch's benchmarker by definition: the most runs of ``estimate_ms`` each that fit in
    25 ms, at least 1 and at most 100 (100 for an estimate of 0), found by counting."""
    if estimate_ms == 0:
        return 100
    return max([k for k in range(1, 101) if k * estimate_ms <= 25.0], default=1)


@st.composite
def estimating_runs(draw) -> list[float]:
    """:data:`REPEATS` estimating runs (ms): the least drawn from :data:`MILLISECONDS`, the
    others that much plus a drawn slowdown, the least at a drawn position."""
    least = draw(MILLISECONDS)
    runs = [least + draw(st.sampled_from([0.0, 0.5, 4.0])) for _ in range(REPEATS - 1)]
    at = draw(st.integers(0, REPEATS - 1))
    return [*runs[:at], least, *runs[at:]]


@given(warm_up=MILLISECONDS, estimating=estimating_runs(), timed=MILLISECONDS)
# the one-run floor (an estimate over 25 ms) and the 25 ms edge, in every run
@example(warm_up=0.0, estimating=[40.0, 44.0, 40.0, 40.5, 40.0], timed=1.5)
@example(warm_up=2.5, estimating=[12.5, 12.5, 13.0, 16.5, 12.5], timed=12.5)
def test_partition_profile_device_benchmark_on_a_fake_clock(refimpl_backend, warm_up,
                                                            estimating, timed):
    if not promise_of(refimpl_backend).refimpl_event_clocks:
        pytest.skip(f"backend {refimpl_backend.name!r} promises no timing on refimpl's "
                    "event clocks (PartitionPromise.refimpl_event_clocks)")
    explain = getattr(refimpl_backend, "explain", None)
    if explain is None:
        pytest.skip(f"backend {refimpl_backend.name!r} reports no plan (no explain method)")
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    fn = lambda x, w: clocked_mm(x, w).cos().sum()
    estimate = min(estimating)
    runs = timed_runs(estimate)
    DURATIONS[:] = [warm_up, *estimating, *[timed] * runs]
    CALLS[0], NOW[0] = 0, 0.0
    torch._dynamo.reset()
    with mock.patch.dict(runtime.EVENT_CLOCKS, {"cpu": FAKE_CLOCK}), \
            torch._functorch.config.patch(activation_memory_budget_runtime_estimator="profile"):
        plan = explain(fn, x, w, memory_budget=0.0)
    recomputed = [name for name in plan.recomputed if "clocked_mm" in name]
    reach(bool(recomputed))
    seconds = min(estimate, timed) / 1000.0
    case = (f"warm-up {warm_up} ms, estimating runs {estimating} ms (explain's "
            f"profile_repeats), timed runs {timed} ms each")
    assert CALLS[0] == 1 + REPEATS + runs + 1, (
        f"{case}: expected 1 warm-up + {REPEATS} estimating + {runs} timed runs (estimate "
        f"{estimate} ms) and explain's forward run, the op was called {CALLS[0]} times")
    assert plan.recompute_cost == len(recomputed) * seconds, (
        f"{case}: the plan recomputes {recomputed}, each {seconds} s (the least run, ms / "
        f"1000); its recompute_cost is {plan.recompute_cost}")
