"""Harness speed: examples per second of each TARGET property, refimpl and torch in one run.

Only target properties count (those in properties/, recording the reach event; strategy
meta-tests live in tests/ and are not measured). Each component's properties run once against
refimpl (timed by pytest-benchmark) and once against torch in the same session, both under
the ci profile through the campaign runner (one worker process each, as `refimpl fuzz` runs
them, without shrinking, so that a property failing against torch is timed on its search only);
``extra_info`` holds examples/s per property and the refimpl/torch ratio. A component a
target lacks (torch has no layout pass) gives no rate for it.

    python -m pytest benchmarks/bench_harness.py --benchmark-enable --benchmark-only -s
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.fuzz.options import COMPONENTS, FuzzOptions
from refimpl.fuzz.runner import run_campaign


def _rates(target: str, component: str, out: Path) -> dict[str, float]:
    """examples/s of each target property of ``component`` against ``target``."""
    opts = FuzzOptions(target=target, components=(component,), profile="ci", max_examples=15,
                       out=out, shrink=False)  # a failing property's rate without shrinking
    from refimpl.fuzz.campaign import component_skips
    from refimpl.oracle import load_backend

    results = run_campaign(opts, component_skips(load_backend(target), (component,))).results
    return {r.nodeid.split("::")[-1]: r.examples / r.seconds for r in results
            if r.reach_recorded and r.examples and r.seconds}


@pytest.mark.parametrize("component", COMPONENTS)
def test_examples_per_second(benchmark, component: str, tmp_path: Path):
    ours = benchmark.pedantic(_rates, args=("refimpl", component, tmp_path / "refimpl"),
                              rounds=1, iterations=1)
    theirs = _rates("torch", component, tmp_path / "torch")
    for prop, rate in sorted(ours.items()):
        benchmark.extra_info[f"{prop} refimpl examples/s"] = round(rate, 2)
        if prop in theirs:
            benchmark.extra_info[f"{prop} torch examples/s"] = round(theirs[prop], 2)
            benchmark.extra_info[f"{prop} refimpl/torch"] = round(rate / theirs[prop], 2)
    lines = [f"  {p}: refimpl {r:.2f}/s" + (f", torch {theirs[p]:.2f}/s" if p in theirs else "")
             for p, r in sorted(ours.items())]
    print(f"\n{component} (target properties, examples/s):\n" + "\n".join(lines))
    assert ours, f"no {component} target property ran against refimpl"


# --- time to catch each deliberately broken backend: the plain runner beside HypoFuzz --------
ENGINES = {
    # the plain runner as tests/test_oracle_catches_bugs.py runs it (derandomised ci profile)
    "runner": ["--profile", "ci", "--fail-fast", "--no-shrink"],
    # HypoFuzz until its first failure, at most 3 minutes (it needs the extra installed)
    "hypofuzz": ["--engine", "hypofuzz", "--minutes", "3", "--fail-fast"],
}


def _broken():
    import sys

    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.broken_backends import BROKEN

    return BROKEN


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("backend", list(_broken()), ids=lambda b: b.name)
def test_time_to_catch(benchmark, engine: str, backend, tmp_path: Path):
    """Wall seconds from `refimpl fuzz` starting to its first failing target property."""
    import json
    import subprocess
    import sys
    import time

    if engine == "hypofuzz":
        pytest.importorskip("hypofuzz", reason="pip install 'refimpl[hypofuzz]'")
    component = _broken()[backend]
    root = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "refimpl", "fuzz", "--target",
           f"tests.broken_backends:{backend.__name__}", "--component", component,
           "--out", str(tmp_path / "out"), *ENGINES[engine]]

    def run():
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
        return done, time.monotonic() - start

    _, seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    failed = [p for p in report["properties"] if p["outcome"] == "failed" and "::" in p["nodeid"]]
    benchmark.extra_info.update(caught=bool(failed), seconds=round(seconds, 1),
                                examples=failed[0]["examples"] if failed else None,
                                property=failed[0]["nodeid"] if failed else None)
    print(f"\n{engine} {backend.name}: {'caught' if failed else 'NOT caught'} in "
          f"{seconds:.0f}s" + (f" by {failed[0]['nodeid']} after {failed[0]['examples']} "
                               "examples" if failed else ""))
