"""Budgeted steps run side by side, each writing its result the moment it ends; resumable.

A :class:`Step` is a child command with a wall-time budget and a phase. The phases run in
order; the steps of one phase run side by side, each in a process group of its own, its
output in ``WORK/<name>.log`` (a group, not a session: whatever ends this process's session
ends the steps too). A step still running at its budget is sent SIGINT (pytest then
writes its JUnit XML, ``refimpl fuzz`` its report), and SIGKILL ``grace`` seconds later; it
is recorded as timed out, with what it wrote.

Invariant: ``OUT/<name>.json`` exists only for a step that ended (by itself or at its budget),
and is complete (written to a temporary file, then renamed). A run cut short (SIGINT or
SIGTERM to this process, or the machine taken back) stops its steps and writes nothing for
them, so :func:`done` -- the steps with a result in a folder -- is what ``--resume`` skips,
and the steps left run in the next session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: seconds between looks at the running steps.
POLL_S = 0.2


@dataclass(frozen=True)
class Step:
    """One check: its result file's name, what it is, its command, budget and phase, and
    where its counts are read from (``reads``: a kind and a path, for the caller's reader)."""

    name: str
    title: str
    command: tuple[str, ...]
    budget_s: float
    phase: int
    reads: tuple[str, str] = ("none", "")
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class _Running:
    step: Step
    process: subprocess.Popen
    started: float
    log: Path
    stopped_at: float | None = None  # when SIGINT was sent at the budget


class Interrupted(Exception):
    """This process was asked to stop (SIGINT/SIGTERM): the steps in progress are lost."""


def done(folder: Path) -> dict[str, dict]:
    """{step name: result} for each complete result file in ``folder``."""
    results = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            result = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # not a result (an unfinished write is never renamed into place)
        if isinstance(result, dict) and result.get("step") == path.stem:
            results[path.stem] = result
    return results


def write_result(out: Path, result: dict) -> Path:
    """``OUT/<step>.json``, atomically: a reader sees the whole result or none."""
    path = out / f"{result['step']}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
    return path


def run_steps(steps: list[Step], out: Path, work: Path,
              describe: Callable[[Step, int, bool], dict], grace_s: float = 15.0,
              on_result: Callable[[dict], None] = lambda result: None) -> dict[str, dict]:
    """Run every step of ``steps`` that has no result in ``out`` yet, phase by phase.

    ``describe(step, status, timed_out)`` reads the step's counts once it ended; its dict,
    with the step's name, command, budget, seconds and exit status, is the step's result.
    ``on_result`` is called after each result is written (to refresh a report). Returns
    every result in ``out``, the earlier ones included."""
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    finished = done(out)
    for phase in sorted({step.phase for step in steps}):
        todo = [s for s in steps if s.phase == phase and s.name not in finished]
        for result in _run_phase(todo, work, describe, grace_s, out, on_result):
            finished[result["step"]] = result
    return finished


def _run_phase(todo: list[Step], work: Path, describe, grace_s: float, out: Path,
               on_result) -> list[dict]:
    """The steps of one phase side by side; each result written as its step ends.

    This process's handlers go in before the steps start: a child inherits an ignored
    SIGINT (a script's background job ignores it) and a shell cannot trap a signal ignored
    at its start, while a handled one is reset to the default in the child."""
    previous = _stop_on_signals()
    running, results = [], []
    try:
        for step in todo:
            running.append(_start(step, work))
        while running:
            time.sleep(POLL_S)
            for job in [job for job in running if job.process.poll() is not None]:
                running.remove(job)
                results.append(_finish(job, describe, out))
                on_result(results[-1])
            for job in running:
                _enforce_budget(job, grace_s)
    except Interrupted:
        for job in running:
            _signal_group(job.process, signal.SIGKILL)
            job.process.wait()
        raise
    finally:
        _restore_signals(previous)
    return results


def _start(step: Step, work: Path) -> _Running:
    log = work / f"{step.name}.log"
    with log.open("w") as sink:  # the child holds its own descriptor
        process = subprocess.Popen(step.command, stdout=sink, stderr=subprocess.STDOUT,
                                   env={**os.environ, **step.env}, cwd=step.cwd,
                                   process_group=0)
    return _Running(step, process, time.monotonic(), log)


def _enforce_budget(job: _Running, grace_s: float) -> None:
    """SIGINT at the budget, so the step writes what it has; SIGKILL after the grace."""
    now = time.monotonic()
    if job.stopped_at is None and now - job.started > job.step.budget_s:
        job.stopped_at = now
        _signal_group(job.process, signal.SIGINT)
    elif job.stopped_at is not None and now - job.stopped_at > grace_s:
        _signal_group(job.process, signal.SIGKILL)


def _finish(job: _Running, describe, out: Path) -> dict:
    timed_out = job.stopped_at is not None
    status = job.process.returncode
    result = {**describe(job.step, status, timed_out), "step": job.step.name,
              "title": job.step.title, "command": list(job.step.command),
              "budget_s": job.step.budget_s, "status": status, "timed_out": timed_out,
              "seconds": round(time.monotonic() - job.started, 1),
              "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    write_result(out, result)
    return result


def _signal_group(process: subprocess.Popen, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has ended already
        os.killpg(process.pid, number)


def _raise_interrupted(number, frame):
    raise Interrupted(signal.Signals(number).name)


def _stop_on_signals() -> dict:
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, _raise_interrupted)
    return previous


def _restore_signals(previous: dict) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)
