"""Harness speed: examples per second per property under the ci profile.

A slowdown in the harness (a strategy that got expensive, a property that compiles more than
it should) shows here. Each component's properties run once against refimpl and once against
torch in the same session; ``extra_info`` holds examples/s per property and the ratio.

    python -m pytest benchmarks/bench_harness.py --benchmark-enable --benchmark-only -s
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.fuzz.options import COMPONENTS, FuzzOptions
from refimpl.fuzz.runner import run_campaign


def _rates(target: str, component: str, out: Path) -> dict[str, float]:
    opts = FuzzOptions(target=target, components=(component,), profile="ci", max_examples=15,
                       out=out)
    return {r.nodeid.split("::")[-1]: r.examples / r.seconds
            for r in run_campaign(opts) if r.outcome == "passed" and r.examples and r.seconds}


@pytest.mark.parametrize("component", COMPONENTS)
def test_examples_per_second(benchmark, component: str, tmp_path: Path):
    ours = benchmark.pedantic(_rates, args=("refimpl", component, tmp_path / "refimpl"),
                              rounds=1, iterations=1)
    theirs = _rates("torch", component, tmp_path / "torch")
    for prop, rate in sorted(ours.items()):
        benchmark.extra_info[f"{prop} examples/s"] = round(rate, 2)
        if prop in theirs:
            benchmark.extra_info[f"{prop} refimpl/torch"] = round(rate / theirs[prop], 2)
    print(f"\n{component}: " + ", ".join(f"{p} {r:.1f}/s" for p, r in sorted(ours.items())))
    assert ours, f"no {component} property ran against refimpl"
