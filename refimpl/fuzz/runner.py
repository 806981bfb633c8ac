"""Run the chosen components' properties in pytest workers and gather the results.

Algorithm
    For each round (one for ``--max-examples``; as many as fit for ``--minutes``, round ``r``
    running up to ``10 * 2**r`` examples per property so that every property runs early and
    later rounds go deeper), start one worker per component (:mod:`refimpl.fuzz.worker`), at
    most ``jobs`` at a time. The parent polls their event files to drive one progress bar per
    component, and between polls

    - kills a worker that shows no progress for ``2 * timeout + 10`` seconds (the watchdog;
      a worker still starting up gets at least 300 s);
    - on SIGINT/SIGTERM, or when ``--minutes`` runs out (mid-round too), stops every worker
      (SIGTERM to its process group; SIGKILL after a grace period) and starts nothing more.

    A component the target lacks runs in round 0 only (to report its properties skipped);
    when nothing else is left, the campaign ends there instead of idling out ``--minutes``.

    Finally it folds every round's results into one :class:`PropertyResult` per property:
    examples and reach add up; a property failed if it failed in any round (the first
    failure's example is kept); passed if it completed a round; else what it last was.

Invariant: every property a worker collected appears in the result, run or "not run".
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.suite import component_files, default_properties_dir
from refimpl.fuzz.worker import (
    STOP_GRACE_SECONDS,
    PropertyResult,
    Worker,
    collect_results,
    read_events,
    start_worker,
)

__all__ = ["CampaignResult", "PropertyResult", "caught_stop_signals", "fold_rounds",
           "round_examples", "run_campaign", "stall_limit"]

STARTUP_SECONDS = 300.0  # a worker's imports and collection, before its first event

_RANK = {"failed": 4, "passed": 3, "interrupted": 2, "skipped": 1, "not run": 0}

#: the signals that stop a campaign (Ctrl-C, and a CI system's or a scheduler's stop).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def caught_stop_signals() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM are appended to the yielded list instead of acting;
    the handlers in force before come back after it.

    A campaign holds them from its start until its report is written: the first one stops
    the workers, and one that arrives later waits until the report is whole, so that a
    failure found is never lost to a signal's exit status. Outside the main thread (where
    Python cannot set handlers, and signals are not delivered) the list stays empty."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum))
                for s in STOP_SIGNALS}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass(frozen=True)
class CampaignResult:
    """The results, and the signal that stopped the campaign early (None: it ran out)."""

    results: list[PropertyResult]
    stopped_by: int | None = None


class _Campaign:
    """The parent's loop: workers, rounds, the deadline, signals and the watchdog."""

    def __init__(self, opts: FuzzOptions, skips: dict[str, str], signals: list[int]) -> None:
        self.opts = opts
        self.skips = skips
        properties = opts.properties or default_properties_dir()
        self.suite = {c: component_files(properties, c) for c in opts.components}
        self.deadline = time.monotonic() + 60 * opts.minutes if opts.minutes else None
        self.signals = signals  # the stop signals received so far (caught_stop_signals)
        self.stopping = False

    @property
    def stopped_by(self) -> int | None:
        return self.signals[0] if self.signals else None

    def _should_stop(self) -> bool:
        timed_out = self.deadline is not None and time.monotonic() >= self.deadline
        return self.stopped_by is not None or timed_out

    def _start(self, comp: str, round_no: int) -> Worker:
        seed = None if self.opts.seed is None else self.opts.seed + round_no
        return start_worker(self.opts, comp, self.suite[comp], seed, round_no,
                            round_examples(self.opts, round_no), self.skips.get(comp))

    def _watch(self, worker: Worker, bar: tqdm) -> None:
        stream = read_events(worker.events)
        collected = next((e["nodeids"] for e in stream if e["event"] == "collected"), None)
        bar.total = len(collected) if collected is not None else None
        finished = [e for e in stream if e["event"] == "result"]
        if bar.disable:  # off a terminal (a CI log): one line per finished property
            for done, event in enumerate(finished[bar.n:], start=bar.n + 1):
                print(progress_line(worker.component, event, done, bar.total), flush=True)
        bar.n = len(finished)
        bar.refresh()
        now = time.monotonic()
        if self.stopping and worker.killed_by and now - self.stop_time > STOP_GRACE_SECONDS:
            worker.kill("stop")
        elif not self.stopping and now - worker.last_activity() > self._stall_limit(worker):
            worker.kill("watchdog")

    def _stall_limit(self, worker: Worker) -> float:
        return stall_limit(worker, self.opts.timeout)

    def _stop_all(self, running: dict[str, tuple[Worker, tqdm]]) -> None:
        if not self.stopping:
            self.stopping, self.stop_time = True, time.monotonic()
        for worker, _ in running.values():
            if not worker.killed_by:
                worker.stop("stop")

    def runnable(self, round_no: int) -> list[str]:
        """The components a round starts workers for: a component the target lacks runs in
        round 0 only (its properties are collected and reported skipped, never run)."""
        return [c for c in self.opts.components
                if self.suite[c] and (round_no == 0 or c not in self.skips)]

    def run_round(self, round_no: int) -> list[PropertyResult]:
        pending = self.runnable(round_no)
        running: dict[str, tuple[Worker, tqdm]] = {}
        results: list[PropertyResult] = []
        while pending or running:
            if self._should_stop():
                self._stop_all(running)
                pending = []
            while pending and len(running) < self.opts.jobs:
                comp = pending.pop(0)
                bar = tqdm(desc=f"{comp:<10}", unit="prop", position=len(running),
                           leave=True, file=sys.stderr, disable=None)  # None: off a terminal
                running[comp] = (self._start(comp, round_no), bar)
            time.sleep(0.2)
            for comp, (worker, bar) in list(running.items()):
                self._watch(worker, bar)
                if worker.proc.poll() is None:
                    continue
                bar.close()
                done = collect_results(worker)
                failed = sum(r.outcome == "failed" for r in done)
                print(f"{comp}: {len(done)} properties, {failed} failed", flush=True)
                results += done
                del running[comp]
        return results

    def run(self) -> list[PropertyResult]:
        rounds, round_no = [], 0
        while not self._should_stop() or round_no == 0:
            rounds.append(self.run_round(round_no))
            round_no += 1
            if self.deadline is None or self.stopping or not self.runnable(round_no):
                break  # bounded by examples, stopped, or nothing the target has to run
        return fold_rounds(rounds)


def round_examples(opts: FuzzOptions, round_no: int) -> int:
    """Examples per property in round ``round_no``: ``--max-examples``, or under --minutes
    ``10 * 2**round_no`` (capped by nothing else: --minutes bounds the time)."""
    if opts.max_examples is not None:
        return opts.max_examples
    return 10 * 2 ** min(round_no, 10)


def stall_limit(worker: Worker, timeout: float) -> float:
    """The watchdog's limit: no progress for this long (``2 * timeout + 10`` s) means stuck;
    starting up (imports, collection) may take longer than an example: it gets at least
    STARTUP_SECONDS."""
    limit = 2 * timeout + 10
    return limit if worker.events.exists() else max(limit, STARTUP_SECONDS)


def progress_line(component: str, event: dict, done: int, total: int | None) -> str:
    """``cse 3/7: test_x passed, 10 examples (1.2 s)``: a finished property, for a log."""
    name = event["nodeid"].split("::", 1)[-1]
    of = f"/{total}" if total is not None else ""
    return (f"{component} {done}{of}: {name} {event['outcome']}, {event['examples']} "
            f"examples ({event['seconds']:.1f} s)")


def fold_rounds(rounds: list[list[PropertyResult]]) -> list[PropertyResult]:
    merged: dict[str, PropertyResult] = {}
    for result in (r for round_ in rounds for r in round_):
        old = merged.get(result.nodeid)
        if old is None:
            merged[result.nodeid] = result
            continue
        keep = old if _RANK[old.outcome] >= _RANK[result.outcome] else result
        if old.outcome == "failed":
            keep = old  # the first failure's example and message
        merged[result.nodeid] = replace(
            keep, examples=old.examples + result.examples, seconds=old.seconds + result.seconds,
            reach_recorded=old.reach_recorded + result.reach_recorded,
            reached=old.reached + result.reached)
    return list(merged.values())


def missing_components(opts: FuzzOptions, properties: Path) -> list[PropertyResult]:
    """A skipped row for each chosen component with no property files."""
    return [PropertyResult(c, f"{c} (component)", "skipped", 0,
                           reason=f"no property files test_{c}*.py in {properties}")
            for c in opts.components if not component_files(properties, c)]


def run_campaign(opts: FuzzOptions, skips: dict[str, str] | None = None) -> CampaignResult:
    """Run the campaign ``opts`` describes into the (already clean) ``opts.out``.

    ``skips``: component -> the reason every property of it is skipped (the target lacks it).
    SIGINT and SIGTERM stop the workers and end the campaign with what ran; the caller keeps
    them caught (:func:`caught_stop_signals`) until it has reported what ran.
    """
    properties = opts.properties or default_properties_dir()
    for sub in ("events", "logs", "examples", "reproducers"):
        (opts.out / sub).mkdir(parents=True, exist_ok=True)
    with caught_stop_signals() as signals:
        campaign = _Campaign(opts, skips or {}, signals)
        results = missing_components(opts, properties) + campaign.run()
        return CampaignResult(results, campaign.stopped_by)
