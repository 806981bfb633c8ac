"""The worker side of ``refimpl fuzz``: a pytest plugin that streams results as JSON lines.

Loaded with ``-p refimpl.fuzz.events`` in each worker; it reads these environment variables:

``REFIMPL_FUZZ_EVENTS``    the file to append events to, one JSON object per line:
                           ``{"event": "collected", "nodeids": [...]}`` once, then per property
                           ``{"event": "start", "nodeid"}`` and ``{"event": "result", ...}``
                           (outcome, examples, reach counts, seconds, reason, message, the
                           shrunk failing example and where its arguments were saved).
``REFIMPL_FUZZ_SETTINGS``  JSON overrides of the Hypothesis profile in force
                           (``max_examples``, ``database``, ``phases``).
``REFIMPL_FUZZ_TIMEOUT``   seconds one example may run (default: no limit).
``REFIMPL_FUZZ_CURRENT``   a file rewritten before every example with the example's call, so
                           that the parent can write a reproducer when it has to kill a worker
                           stuck where the per-example limit cannot interrupt it.
``REFIMPL_FUZZ_SAVED``     the folder where the arguments of a failing example are pickled
                           (``refimpl fuzz`` sets ``--out/examples``); unset, as when a
                           reproducer replays one example, nothing is saved.
``REFIMPL_FUZZ_SKIP``      a reason: every collected property is skipped with it (the target
                           lacks the component; nothing runs, nothing can pass).

Every example runs inside :func:`_guarded` (Hypothesis's ``inner_test`` hook): a SIGALRM
timer bounds it (an overrun raises :class:`ExampleTimeout`, a failure Hypothesis shrinks);
SIGTERM/SIGINT raise :class:`Interrupted`, which ends the property with the examples run so far
("interrupted") and stops the session. Examples, reach and the failing example come from
Hypothesis's observability stream (one ``test_case`` observation per example).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis.internal import observability
from hypothesis.internal.observability import add_observability_callback

from refimpl.fuzz.database import make_database
from refimpl.fuzz.examples import describe_call, save_arguments
from refimpl.testing.reach import REACH_EVENT, REACHED

#: ``how_generated`` prefixes of test cases that are not examples of the search.
_NOT_SEARCH = ("during shrink", "during explain", "minimal failing")


class ExampleTimeout(Exception):
    """One example ran longer than ``--timeout``."""


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
        self.arguments: dict = {}  # the arguments of the example that ran last

    def _observe(self, observation) -> None:
        if getattr(observation, "type", None) != "test_case":
            return
        if observation.status == "failed":
            # Saved here, outside the traced test call, so that Hypothesis's explain phase
            # does not report the harness's own lines as "only run by failing test cases".
            self.failing = observation.representation
            if _worker.saved is not None:
                save_arguments(_worker.saved, self.nodeid, self.arguments)
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
        self.in_example = False
        self.stopping = False
        self.session: pytest.Session | None = None

    def on_alarm(self, signum, frame) -> None:
        if self.in_example:
            self.in_example = False
            raise ExampleTimeout(f"timed out: the example ran longer than --timeout "
                                 f"{self.timeout:g}s")

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
        _worker.recorder.arguments = arguments
        if _worker.current is not None:
            _worker.current.write_text(json.dumps(
                {"nodeid": item.nodeid, "call": describe_call(inner.__name__, arguments)}))
        if _worker.timeout:
            signal.setitimer(signal.ITIMER_REAL, _worker.timeout)
        _worker.in_example = True
        try:
            return inner(*args, **kwargs)
        finally:
            _worker.in_example = False
            if _worker.timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)

    return run


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
    # Observability is on only to count examples and reach; per-line coverage would slow
    # every example (Hypothesis documents this switch for that purpose).
    observability.OBSERVABILITY_COLLECT_COVERAGE = False
    _worker = _Worker()
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


def pytest_runtest_setup(item: pytest.Item) -> None:
    _worker.recorder.reset(item.nodeid)
    _worker.recorder.emit(event="start", nodeid=item.nodeid, at=time.time())
    hypothesis = getattr(getattr(item, "obj", None), "hypothesis", None)
    if hypothesis is not None and not getattr(hypothesis, "_refimpl_guarded", False):
        hypothesis.inner_test = _guarded(item, hypothesis.inner_test)
        hypothesis._refimpl_guarded = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Interrupted):
        report.outcome, report.longrepr = "passed", None
        report.refimpl_interrupted = True


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
    rec.emit(event="result", nodeid=report.nodeid, outcome=outcome, examples=examples,
             reach_recorded=0 if report.skipped else rec.reach_recorded,
             reached=0 if report.skipped else rec.reached, seconds=report.duration,
             reason=reason, message=message,
             timed_out=report.failed and "ExampleTimeout" in str(report.longrepr),
             example=rec.failing if report.failed else None)
