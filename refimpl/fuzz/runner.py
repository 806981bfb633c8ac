"""Run the chosen components' properties in pytest worker processes and gather the results.

Algorithm
    For each round (one round for ``--max-examples``; as many as fit for ``--minutes``), start
    one ``python -m pytest`` worker per component, at most ``jobs`` at a time, each streaming
    events (:mod:`refimpl.fuzz.events`) to its own file. The parent polls those files to drive
    one progress bar per component, then folds every round's results into one
    :class:`PropertyResult` per property: examples add up, and a property failed if it failed
    in any round (the first failure's shrunk example is kept).

Each worker is a fresh process, so torch's and dynamo's caches never leak between components.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.suite import component_files, default_properties_dir


@dataclass(frozen=True)
class PropertyResult:
    """One property's fate over the whole campaign."""

    component: str
    nodeid: str
    outcome: str  # passed | failed | skipped
    examples: int
    seconds: float = 0.0  # time spent running the property
    reason: str = ""  # why it was skipped
    message: str = ""  # the assertion that failed: expected and observed
    example: str | None = None  # the shrunk failing call, as Hypothesis printed it


def _worker(opts: FuzzOptions, component: str, files: list[Path], seed: int | None,
            events: Path) -> subprocess.Popen:
    settings = {"database": opts.database or str(opts.out / "hypothesis-db")}
    if opts.max_examples is not None:
        settings["max_examples"] = opts.max_examples
    if not opts.shrink:
        settings["phases"] = ["explicit", "reuse", "generate", "target"]
    env = dict(os.environ, HYPOTHESIS_PROFILE=opts.profile, REFIMPL_FUZZ_EVENTS=str(events),
               REFIMPL_FUZZ_SETTINGS=json.dumps(settings), REFIMPL_TARGET=opts.target)
    cmd = [sys.executable, "-m", "pytest", *map(str, files), "-q", "-p", "refimpl.fuzz.events",
           "-p", "no:cacheprovider", "--refimpl-target", opts.target, "-o", "addopts=",
           "--rootdir", str(files[0].parent.parent)]
    if seed is not None:
        cmd.append(f"--hypothesis-seed={seed}")
    if opts.fail_fast:
        cmd.append("--exitfirst")
    log = (opts.out / f"{component}.log").open("a")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_round(opts: FuzzOptions, suite: dict[str, list[Path]], seed: int | None,
               round_no: int) -> list[PropertyResult]:
    pending = [c for c in opts.components if suite[c]]
    running: dict[str, tuple[subprocess.Popen, Path, tqdm]] = {}
    results: list[PropertyResult] = []
    while pending or running:
        while pending and len(running) < opts.jobs:
            comp = pending.pop(0)
            events = opts.out / f"events-{comp}-{round_no}.jsonl"
            events.unlink(missing_ok=True)
            bar = tqdm(desc=f"{comp:<10}", unit="prop", position=len(running), leave=True,
                       file=sys.stderr, disable=None)  # disable=None: no bar off a terminal
            running[comp] = (_worker(opts, comp, suite[comp], seed, events), events, bar)
        time.sleep(0.2)
        for comp, (proc, events, bar) in list(running.items()):
            stream = _read_events(events)
            done = [e for e in stream if e["event"] == "result"]
            bar.total = next((e["count"] for e in stream if e["event"] == "collected"), None)
            bar.n = len(done)
            bar.refresh()
            if proc.poll() is not None:
                bar.close()
                failed = sum(e["outcome"] == "failed" for e in done)
                print(f"{comp}: {len(done)} properties, {failed} failed", flush=True)
                results += [PropertyResult(comp, e["nodeid"], e["outcome"], e["examples"],
                                           e["seconds"], e["reason"], e["message"], e["example"])
                            for e in done]
                if proc.returncode not in (0, 1, 5):  # 5: no property collected
                    results.append(PropertyResult(
                        comp, f"{comp} (worker)", "failed", 0,
                        message=f"pytest worker exited {proc.returncode}; see {comp}.log"))
                del running[comp]
    return results


def _fold(rounds: list[list[PropertyResult]]) -> list[PropertyResult]:
    merged: dict[str, PropertyResult] = {}
    for result in (r for round_ in rounds for r in round_):
        old = merged.get(result.nodeid)
        if old is None:
            merged[result.nodeid] = result
        elif old.outcome == "failed":
            merged[result.nodeid] = replace(old, examples=old.examples + result.examples,
                                            seconds=old.seconds + result.seconds)
        else:
            merged[result.nodeid] = replace(result, examples=old.examples + result.examples,
                                            seconds=old.seconds + result.seconds)
    return list(merged.values())


def run_campaign(opts: FuzzOptions) -> list[PropertyResult]:
    """Run the campaign that ``opts`` describes; one result per property."""
    properties = opts.properties or default_properties_dir()
    suite = {c: component_files(properties, c) for c in opts.components}
    opts.out.mkdir(parents=True, exist_ok=True)
    missing = [PropertyResult(c, f"{c} (component)", "skipped", 0,
                              reason=f"no property files test_{c}*.py in {properties}")
               for c in opts.components if not suite[c]]
    deadline = time.monotonic() + 60 * opts.minutes if opts.minutes else None
    rounds, round_no = [], 0
    while True:
        seed = None if opts.seed is None else opts.seed + round_no
        rounds.append(_run_round(opts, suite, seed, round_no))
        round_no += 1
        if deadline is None or time.monotonic() >= deadline:
            break
    return missing + _fold(rounds)
