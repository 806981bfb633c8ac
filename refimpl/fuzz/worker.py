"""One pytest worker process: start it, watch it, stop it, and read what it ran.

A worker runs one component's property files (``python -m pytest -p refimpl.fuzz.events``) in
its own process group, so that stopping it stops everything it started (nothing orphaned).
What it did is read back from its event file (:mod:`refimpl.fuzz.events`):

- every ``result`` event is one :class:`PropertyResult`;
- a property that started and has no result was running when the worker ended: "failed" if
  the worker crashed or the watchdog killed it (with the example it was running, from the
  worker's current-example file);
- one that a stop had to kill (it answered SIGTERM not within ``STOP_GRACE_SECONDS``: stuck
  with signals blocked, or in C code) keeps the example it was running too: "failed" as
  timed out if that example had run longer than ``--timeout`` when it was killed (what the
  watchdog would have found), else "interrupted" ("not run" if it was still setting up);
- every other collected property is "not run".

The watchdog: a worker whose event and current-example files have not changed for
``stall_limit`` seconds is stuck where the per-example SIGALRM cannot reach (inside C code
that never returns to the interpreter) and is killed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.outdir import HYPOTHESIS_HOME

# the reason given for a property that a stop kept from running
STOPPED_FIRST = "the campaign was stopped first"

STOP_GRACE_SECONDS = 10.0  # a stopped worker gets this long to write its results


@dataclass(frozen=True)
class PropertyResult:
    """One property's fate over the whole campaign."""

    component: str
    nodeid: str
    outcome: str  # passed | failed | skipped | interrupted | not run
    examples: int
    seconds: float = 0.0  # time spent running the property
    reason: str = ""  # why it was skipped or not run
    message: str = ""  # the assertion that failed: expected and observed
    example: str | None = None  # the shrunk failing call, as Hypothesis printed it
    reach_recorded: int = 0  # examples that recorded the "reach" event
    reached: int = 0  # examples whose "reach" event said "reached"
    timed_out: bool = False  # the failure is an example over --timeout


@dataclass
class Worker:
    """A running worker and the files it reports through."""

    component: str
    proc: subprocess.Popen
    events: Path
    current: Path
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    timeout: float = math.inf  # --timeout: seconds one example may run
    killed_by: str = ""  # "watchdog" | "stop" once the campaign ended it
    killed_at: float | None = None  # time.time() of the first SIGKILL sent to it

    def last_activity(self) -> float:
        """Monotonic time of the worker's last sign of progress."""
        stamps = [p.stat().st_mtime for p in (self.events, self.current) if p.exists()]
        idle = time.time() - max(stamps) if stamps else time.monotonic() - self.started
        return time.monotonic() - max(idle, 0.0)

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(self.proc.pid, signum)

    def stop(self, reason: str) -> None:
        """Ask the worker to stop (it ends its property, writes its result and exits)."""
        self.killed_by = self.killed_by or reason
        self.signal_group(signal.SIGTERM)

    def kill(self, reason: str) -> None:
        self.killed_by = self.killed_by or reason
        if self.killed_at is None:
            self.killed_at = time.time()
        self.signal_group(signal.SIGKILL)


def start_worker(opts: FuzzOptions, component: str, files: list[Path], seed: int | None,
                 round_no: int, max_examples: int | None, skip: str | None,
                 select: tuple[str, ...] = (), collect_only: bool = False) -> Worker:
    """Start the pytest worker for ``component``'s ``files`` in a new process group.

    ``select``: node ids (relative to the suite folder's parent, as the events name them) to
    run instead of every property of ``files``; ``collect_only``: collect, run nothing.

    Every worker stops a property's search at its first failure (``report_multiple_bugs``
    off: the campaign reports one failure per property, and Hypothesis would otherwise go on
    searching for up to 10 s of wall time, so the examples counted would depend on the
    machine's speed). With a ``seed``, the rest of what the rows depend on is fixed too
    (:func:`repeatable_env`)."""
    settings = {"database": opts.database or str(opts.out / "hypothesis-db"),
                "report_multiple_bugs": False}
    if max_examples is not None:
        settings["max_examples"] = max_examples
    if not opts.shrink:
        settings["phases"] = ["explicit", "reuse", "generate", "target"]
    events = opts.out / "events" / f"{component}-{round_no}.jsonl"
    current = opts.out / "events" / f"{component}-current.json"
    for path in (events, current):
        path.unlink(missing_ok=True)
    env = dict(os.environ, HYPOTHESIS_PROFILE=opts.profile, REFIMPL_FUZZ_EVENTS=str(events),
               REFIMPL_FUZZ_SETTINGS=json.dumps(settings), REFIMPL_TARGET=opts.target,
               REFIMPL_FUZZ_TIMEOUT=str(opts.timeout), REFIMPL_FUZZ_CURRENT=str(current),
               REFIMPL_FUZZ_SAVED=str((opts.out / "examples").resolve()),
               REFIMPL_FUZZ_PARENT=str(os.getpid()),
               # Hypothesis's own files (its constants cache) go into --out, not the cwd.
               HYPOTHESIS_STORAGE_DIRECTORY=str((opts.out / HYPOTHESIS_HOME).resolve()),
               PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(),
                                                        os.environ.get("PYTHONPATH")])))
    env.pop("REFIMPL_FUZZ_SKIP", None)
    env.pop(REPEATABLE, None)
    if seed is not None:
        env.update(repeatable_env(seed))
    if skip:
        env["REFIMPL_FUZZ_SKIP"] = skip
    rootdir = files[0].parent.parent
    chosen = [str(rootdir / nodeid) for nodeid in select] if select else map(str, files)
    cmd = [sys.executable, "-m", "pytest", *chosen, "-q", "-p", "refimpl.fuzz.events",
           "-p", "no:cacheprovider", "-p", "no:benchmark", "--refimpl-target", opts.target,
           "-o", "addopts=", "--rootdir", str(rootdir), "--continue-on-collection-errors"]
    if collect_only:
        cmd.append("--collect-only")
    if seed is not None:
        cmd.append(f"--hypothesis-seed={seed}")
    if opts.fail_fast:
        cmd.append("--exitfirst")
    log_path = opts.out / "logs" / f"{component}.log"
    with log_path.open("a") as log:  # one log per component, fresh each run (outdir cleans)
        log.write(f"=== round {round_no}: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return Worker(component, proc, events, current, log_path, timeout=opts.timeout)


#: set in a seeded worker: Hypothesis's shrinking is not cut by wall time (events.py).
REPEATABLE = "REFIMPL_FUZZ_REPEATABLE"


def repeatable_env(seed: int) -> dict[str, str]:
    """What a worker seeded with ``seed`` needs besides Hypothesis's seed so that two runs
    give the same rows (outcome, examples, reach, the shrunk example): Python's string
    hashing fixed (set and dict-of-set orders in properties and backends; derived from the
    seed), and shrinking bounded by its step count only, not by Hypothesis's five minutes of
    wall time (:data:`REPEATABLE`)."""
    return {"PYTHONHASHSEED": str(seed % 2**32), REPEATABLE: "1"}


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    return events


def _result(component: str, e: dict) -> PropertyResult:
    return PropertyResult(component, e["nodeid"], e["outcome"], e["examples"], e["seconds"],
                          e["reason"], e["message"], e["example"], e["reach_recorded"],
                          e["reached"], e["timed_out"])


def _why_ended(worker: Worker) -> str:
    code = worker.proc.returncode
    how = f"killed by signal {-code}" if code < 0 else f"exited {code}"
    if worker.killed_by == "watchdog":
        return ("timed out: the worker was stuck in one example where --timeout could not "
                "interrupt it, and the watchdog killed it")
    return f"the worker crashed ({how}) while running this property; see {worker.log_path}"


def _current(worker: Worker, nodeid: str) -> dict | None:
    """The worker's current-example file (call, start, examples before it), if it is about
    ``nodeid``: the property had reached its examples."""
    try:
        current = json.loads(worker.current.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return current if current.get("nodeid") == nodeid else None


def _current_call(worker: Worker, nodeid: str) -> str | None:
    current = _current(worker, nodeid)
    return current["call"] if current else None


def _killed_at_stop(worker: Worker, nodeid: str, started_at: float) -> PropertyResult:
    """The property a stop had to kill: it answered SIGTERM not within the grace period.

    Its example (from the current-example file; none if it was still setting up) ran
    ``worker.killed_at - start`` seconds: past ``--timeout`` that is a hang, "failed" as timed
    out with the example (as the watchdog reports it); otherwise "interrupted", with the
    example it was running and the examples before it counted."""
    current = _current(worker, nodeid)
    what = "its example" if current else "its setup (its fixtures)"
    began = current.get("at", started_at) if current else started_at
    ran = max(worker.killed_at - began, 0.0)
    seconds = max(worker.killed_at - started_at, ran)  # the property's time, all examples
    example = current["call"] if current else None
    examples = current.get("examples", 0) + 1 if current else 0
    killed = (f"the campaign's stop (SIGTERM) did not end it within {STOP_GRACE_SECONDS:g} s, "
              "so it was killed")
    if ran > worker.timeout:
        message = (f"timed out: {what} had run {ran:.0f} s, longer than --timeout "
                   f"{worker.timeout:g}s, which could not interrupt it, and {killed}")
        return PropertyResult(worker.component, nodeid, "failed", examples, seconds,
                              message=message, example=example, timed_out=True)
    reason = f"the campaign stopped while {what} ran ({ran:.0f} s so far); {killed}"
    return PropertyResult(worker.component, nodeid, "interrupted" if current else "not run",
                          examples, seconds, reason=reason, example=example)


def collect_results(worker: Worker) -> list[PropertyResult]:
    """What ``worker`` (ended) ran, with every collected property it did not run."""
    comp, stream = worker.component, read_events(worker.events)
    done = {e["nodeid"]: _result(comp, e) for e in stream if e["event"] == "result"}
    collected = next((e["nodeids"] for e in stream if e["event"] == "collected"), None)
    started = [e for e in stream if e["event"] == "start"]
    running = started[-1]["nodeid"] if started else None  # when the worker ended
    crashed = worker.proc.returncode not in (0, 1, 5) and worker.killed_by != "stop"
    stuck = worker.killed_by == "stop" and worker.killed_at is not None
    if collected is None and done:  # pytest stopped after collection errors
        collected = []
    if collected is None:
        if worker.proc.returncode in (0, 5) or worker.killed_by == "stop":
            return [PropertyResult(comp, f"{comp} (worker)", "not run", 0,
                                   reason="the campaign stopped before the worker collected")]
        return [PropertyResult(comp, f"{comp} (worker)", "failed", 0,
                               message=f"{_why_ended(worker)} (before collecting properties)")]
    results = [r for nodeid, r in done.items() if nodeid not in collected]  # collect errors
    for nodeid in collected:
        if nodeid in done:
            results.append(done[nodeid])
        elif crashed and running == nodeid:
            results.append(PropertyResult(
                comp, nodeid, "failed", 0, message=_why_ended(worker),
                example=_current_call(worker, nodeid),
                timed_out=worker.killed_by == "watchdog"))
        elif stuck and running == nodeid:
            began = started[-1].get("at", worker.killed_at)  # the property's start
            results.append(_killed_at_stop(worker, nodeid, began))
        else:
            why = (STOPPED_FIRST if worker.killed_by == "stop" else
                   "--fail-fast: the component stopped at its first failure"
                   if worker.proc.returncode == 1 else "the worker ended before reaching it")
            results.append(PropertyResult(comp, nodeid, "not run", 0, reason=why))
    return results
