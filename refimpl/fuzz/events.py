"""The worker side of ``refimpl fuzz``: a pytest plugin that streams results as JSON lines.

Loaded with ``-p refimpl.fuzz.events`` in each worker; it reads these environment variables:

``REFIMPL_FUZZ_EVENTS``    the file to append events to, one JSON object per line:
                           ``{"event": "collected", "nodeids": [...]}`` once, then per property
                           ``{"event": "start", "nodeid"}`` and ``{"event": "result", ...}``
                           (outcome, examples, reach counts, seconds, reason, message, the
                           shrunk failing example and where its arguments were saved).
``REFIMPL_FUZZ_SETTINGS``  JSON overrides of the Hypothesis profile in force
                           (``max_examples``, ``database``, ``phases``,
                           ``report_multiple_bugs``).
``REFIMPL_FUZZ_TIMEOUT``   seconds one example may run (default: no limit).
``REFIMPL_FUZZ_CURRENT``   a file rewritten before every example with the example's call,
                           its start (``at``, wall-clock seconds) and the examples the
                           property ran before it, so that the parent can report the example
                           (and write its reproducer) when it has to kill a worker stuck where
                           neither the per-example limit nor SIGTERM reaches.
``REFIMPL_FUZZ_SAVED``     the folder where the arguments of a failing example are pickled
                           (``refimpl fuzz`` sets ``--out/examples``); unset, as when a
                           reproducer replays one example, nothing is saved.
``REFIMPL_FUZZ_SKIP``      a reason: every collected property is skipped with it (the target
                           lacks the component; nothing runs, nothing can pass).
``REFIMPL_FUZZ_REPEATABLE`` set (the campaign has a ``--seed``): shrinking is bounded by
                           Hypothesis's step count only, not also by its five minutes of
                           wall time, so a slower machine shrinks to the same example.

Every example runs inside :func:`_guarded` (Hypothesis's ``inner_test`` hook): a SIGALRM
timer bounds it. An overrun raises :class:`ExampleTimeout`, a BaseException, so Hypothesis
neither shrinks nor replays it (each shrink step of a hang would wait out the limit again): the
property fails at once, "timed out", with the example that hung. SIGTERM/SIGINT raise
:class:`Interrupted`, which ends the property with the examples run so far ("interrupted")
and stops the session; a failure Hypothesis had already found (it was shrinking) is kept and
reported as the property's failure, unshrunk. A worker whose parent died (even by SIGKILL)
kills its own process group: nothing it started outlives the campaign
(``REFIMPL_FUZZ_PARENT``: the campaign's pid). Examples, reach and the failing example come
from Hypothesis's observability stream (one ``test_case`` observation per example).
"""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import Phase, settings
from hypothesis.internal import observability
from hypothesis.internal.conjecture import engine
from hypothesis.internal.observability import add_observability_callback

from refimpl.fuzz.database import make_database
from refimpl.fuzz.examples import describe_call, keep_arguments
from refimpl.fuzz.worker import REPEATABLE, STOPPED_FIRST
from refimpl.properties.reach import REACH_EVENT, REACHED

#: ``how_generated`` prefixes of test cases that are not examples of the search.
_NOT_SEARCH = ("during shrink", "during explain", "minimal failing")


class ExampleTimeout(BaseException):
    """One example ran longer than ``--timeout``: ends the property, unshrunk (a
    BaseException: Hypothesis lets it through instead of shrinking a hang)."""


class SetupTimeout(Exception):
    """A property's setup (its fixtures) ran longer than ``--timeout``. An Exception, so that
    pytest caches it for a module's fixture and the next property that needs the fixture
    reports the same timeout."""


SETUP = "setting up the property (its fixtures)"


class Interrupted(BaseException):
    """The campaign is stopping (SIGTERM/SIGINT, or --minutes ran out): not a failure."""


class _Recorder:
    """Per-property tallies from the observability stream, and the event file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reset()
        add_observability_callback(self._observe)

    def reset(self, nodeid: str = "") -> None:
        self.nodeid = nodeid
        self.examples = self.reach_recorded = self.reached = 0
        self.failing: str | None = None
        self.failing_reason = ""  # why the failing example failed, as Hypothesis saw it
        self.arguments: dict = {}  # the arguments of the example that ran last
        self.call = ""  # the printed call of the example that ran last
        self.module: ModuleType | None = None  # the property's module (names in the call)

    def _observe(self, observation) -> None:
        if getattr(observation, "type", None) != "test_case":
            return
        if observation.status == "failed":
            # Saved here, outside the traced test call, so that Hypothesis's explain phase
            # does not report the harness's own lines as "only run by failing test cases".
            self.failing = observation.representation
            self.failing_reason = getattr(observation, "status_reason", "") or ""
            if _worker.saved is not None:
                keep_arguments(_worker.saved, self.nodeid, self.arguments, self.call,
                               self.module, observation)
        if observation.status == "gave_up" or observation.how_generated.startswith(_NOT_SEARCH):
            return  # rejected draws, shrink and explain attempts are not examples
        self.examples += 1
        if REACH_EVENT in observation.features:
            self.reach_recorded += 1
            self.reached += observation.features[REACH_EVENT] == REACHED

    def emit(self, **event) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(event) + "\n")


class _Worker:
    """The state of this worker process: recorder, limits, the running example."""

    def __init__(self) -> None:
        self.recorder = _Recorder(Path(os.environ["REFIMPL_FUZZ_EVENTS"]))
        self.timeout = float(os.environ.get("REFIMPL_FUZZ_TIMEOUT") or 0)
        current = os.environ.get("REFIMPL_FUZZ_CURRENT")
        self.current = Path(current) if current else None
        saved = os.environ.get("REFIMPL_FUZZ_SAVED")
        self.saved = Path(saved) if saved else None
        self.skip = os.environ.get("REFIMPL_FUZZ_SKIP")
        self.in_example = False  # inside a limited stretch: one example, or the setup
        self.limited = "the example"  # what the running limited stretch is, for messages
        self.stopping = False
        self.session: pytest.Session | None = None

    def on_alarm(self, signum, frame) -> None:
        if self.in_example:
            self.in_example = False
            timeout = SetupTimeout if self.limited == SETUP else ExampleTimeout
            raise timeout(f"timed out: {self.limited} ran longer than --timeout "
                          f"{self.timeout:g}s")

    def limit(self, what: str) -> None:
        """Start the time limit for ``what`` (an example, or a property's setup)."""
        self.limited, self.in_example = what, True
        if self.timeout:
            signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def unlimit(self) -> None:
        self.in_example = False
        if self.timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def on_stop(self, signum, frame) -> None:
        self.stopping = True
        if self.session is not None:
            self.session.shouldstop = f"stopped by signal {signum}"
        if self.in_example:
            self.in_example = False
            raise Interrupted(signum)


_worker: _Worker | None = None


def _guarded(item: pytest.Item, inner):
    """``inner`` (one example of ``item``) under the time limit, recording what it ran."""
    fixtures = set(getattr(item, "funcargs", {}))

    @functools.wraps(inner)
    def run(*args, **kwargs):
        if _worker.stopping:
            raise Interrupted(signal.SIGTERM)
        arguments = {k: v for k, v in kwargs.items() if k not in fixtures}
        rec = _worker.recorder
        rec.arguments, rec.call = arguments, describe_call(inner.__name__, arguments)
        rec.module = sys.modules.get(inner.__module__)
        if _worker.current is not None:
            _worker.current.write_text(json.dumps({"nodeid": item.nodeid, "call": rec.call,
                                                   "at": time.time(),
                                                   "examples": rec.examples}))
        _worker.limit("the example")
        try:
            return inner(*args, **kwargs)
        finally:
            _worker.unlimit()

    return run


ORPHAN_POLL_SECONDS = 0.5


def die_with_parent(parent: int) -> None:
    """Kill this worker's process group (itself and all it started) as soon as ``parent``
    is no longer its parent: the campaign died, even by SIGKILL, and nobody else will stop
    it. A daemon thread polls ``getppid`` (portable, unlike Linux's PR_SET_PDEATHSIG)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_SECONDS)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="refimpl-orphan-watch", daemon=True).start()


def unbound_shrinking() -> None:
    """Take the wall-time limit off Hypothesis's shrinking (``MAX_SHRINKING_SECONDS``, a
    module constant the engine reads each time it starts to shrink); its step limit
    (``MAX_SHRINKS`` successful steps) still ends it. A Hypothesis without the constant
    has no such limit to take off."""
    if hasattr(engine, "MAX_SHRINKING_SECONDS"):
        engine.MAX_SHRINKING_SECONDS = math.inf


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    global _worker  # one per worker process, created once here
    overrides = json.loads(os.environ.get("REFIMPL_FUZZ_SETTINGS", "{}"))
    if "database" in overrides:
        overrides["database"] = make_database(overrides["database"])
    if "phases" in overrides:
        overrides["phases"] = [Phase[name] for name in overrides["phases"]]
    if overrides:
        settings.register_profile("fuzz-campaign", parent=settings.default, **overrides)
        settings.load_profile("fuzz-campaign")
    if os.environ.get(REPEATABLE):
        unbound_shrinking()
    # Observability is on only to count examples and reach; per-line coverage would slow
    # every example (Hypothesis documents this switch for that purpose).
    observability.OBSERVABILITY_COLLECT_COVERAGE = False
    _worker = _Worker()
    parent = os.environ.get("REFIMPL_FUZZ_PARENT")
    if parent:
        die_with_parent(int(parent))
    signal.signal(signal.SIGALRM, _worker.on_alarm)
    signal.signal(signal.SIGTERM, _worker.on_stop)
    signal.signal(signal.SIGINT, _worker.on_stop)


def pytest_collection_modifyitems(session: pytest.Session, config, items) -> None:
    if _worker.skip:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=_worker.skip))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A property file that cannot be collected is a failure, never "not run"."""
    if report.failed:
        _worker.recorder.emit(
            event="result", nodeid=report.nodeid, outcome="failed", examples=0,
            reach_recorded=0, reached=0, seconds=0.0, reason="", timed_out=False,
            message=f"collection failed: {str(report.longrepr)[-2000:]}", example=None)


def pytest_collection_finish(session: pytest.Session) -> None:
    _worker.session = session
    _worker.recorder.emit(event="collected", nodeids=[i.nodeid for i in session.items])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """Record the start, guard every example, and bound the setup (fixtures may call the
    backend too) by the same time limit as one example."""
    _worker.recorder.reset(item.nodeid)
    _worker.recorder.emit(event="start", nodeid=item.nodeid, at=time.time())
    hypothesis = getattr(getattr(item, "obj", None), "hypothesis", None)
    if hypothesis is not None and not getattr(hypothesis, "_refimpl_guarded", False):
        hypothesis.inner_test = _guarded(item, hypothesis.inner_test)
        hypothesis._refimpl_guarded = True
    _worker.limit(SETUP)
    try:
        yield
    finally:
        _worker.unlimit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not call.excinfo.errisinstance(Interrupted):
        return
    rec = _worker.recorder
    if call.when != "call":  # stopped while setting up: skip the call, never run it half set up
        path, lineno, _ = item.location
        report.outcome, report.longrepr = "skipped", (path, lineno or 0, STOPPED_FIRST)
        report.refimpl_interrupted = True
    elif rec.failing is None:
        report.outcome, report.longrepr = "passed", None
        report.refimpl_interrupted = True
    else:  # stopped while shrinking a failure it had found: the failure stands
        report.outcome = "failed"
        report.longrepr = (f"{rec.failing_reason or 'the property failed'} (found before the "
                           "campaign stopped; shrinking was cut short)")


def _message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message if crash else str(report.longrepr)[-2000:]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    failed_outside_call = report.failed and report.when != "call"
    if not (report.when == "call" or report.skipped or failed_outside_call):
        return
    reason = message = ""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    elif report.failed:
        message = _message(report)
    rec = _worker.recorder
    examples = 0 if report.skipped else rec.examples  # a skip ends its only example
    outcome = report.outcome
    if getattr(report, "refimpl_interrupted", False):
        outcome = "interrupted" if examples else "not run"
    timed_out = report.failed and any(name in str(report.longrepr)
                                      for name in ("ExampleTimeout", "SetupTimeout"))
    if timed_out:  # the example that hung: Hypothesis never saw it fail
        examples = max(examples, 1)
        if _worker.saved is not None:
            keep_arguments(_worker.saved, report.nodeid, rec.arguments, rec.call, rec.module)
    example = (rec.call if timed_out else rec.failing) if report.failed else None
    example = example or None  # a setup that timed out ran no example
    rec.emit(event="result", nodeid=report.nodeid, outcome=outcome, examples=examples,
             reach_recorded=0 if report.skipped else rec.reach_recorded,
             reached=0 if report.skipped else rec.reached, seconds=report.duration,
             reason=reason, message=message, timed_out=timed_out, example=example)
