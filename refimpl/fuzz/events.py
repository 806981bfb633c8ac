"""The worker side of ``refimpl fuzz``: a pytest plugin that streams results as JSON lines.

Loaded with ``-p refimpl.fuzz.events`` in each worker; it reads two environment variables:

``REFIMPL_FUZZ_EVENTS``    the file to append events to, one JSON object per line:
                           ``{"event": "collected", "count": N}`` once, then per property
                           ``{"event": "result", "nodeid", "outcome", "examples", "seconds",
                           "reason", "message", "example"}``.
``REFIMPL_FUZZ_SETTINGS``  JSON overrides of the Hypothesis profile in force
                           (``max_examples``, ``database``, ``phases``).

Examples are counted from Hypothesis's observability stream (one ``test_case`` observation per
example run); the shrunk failing example is the ``representation`` of the last failing one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis.internal.observability import add_observability_callback


def make_database(spec: str):
    """An example database from a directory path or a ``redis://`` URL."""
    if spec.startswith("redis://"):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError as exc:
            raise ValueError(f"database={spec!r} needs the 'redis' package "
                             "(pip install 'refimpl[redis]')") from exc
        return RedisExampleDatabase(redis.Redis.from_url(spec))
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(spec)


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.examples = 0
        self.failing: str | None = None
        add_observability_callback(self._observe)

    def _observe(self, observation) -> None:
        if getattr(observation, "type", None) != "test_case":
            return
        self.examples += 1
        if observation.status == "failed":
            self.failing = observation.representation

    def emit(self, **event) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(event) + "\n")


_recorder: _Recorder | None = None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    global _recorder  # one recorder per worker process, created once here
    overrides = json.loads(os.environ.get("REFIMPL_FUZZ_SETTINGS", "{}"))
    if "database" in overrides:
        overrides["database"] = make_database(overrides["database"])
    if "phases" in overrides:
        overrides["phases"] = [Phase[name] for name in overrides["phases"]]
    if overrides:
        settings.register_profile("fuzz-campaign", parent=settings.default, **overrides)
        settings.load_profile("fuzz-campaign")
    _recorder = _Recorder(Path(os.environ["REFIMPL_FUZZ_EVENTS"]))


def pytest_collection_finish(session: pytest.Session) -> None:
    _recorder.emit(event="collected", count=len(session.items))


def pytest_runtest_setup(item: pytest.Item) -> None:
    _recorder.examples, _recorder.failing = 0, None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    failed_outside_call = report.failed and report.when != "call"
    if not (report.when == "call" or report.skipped or failed_outside_call):
        return
    reason = message = ""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    elif report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash else str(report.longrepr)[-2000:]
    examples = 0 if report.skipped else _recorder.examples  # a skip ends its only example
    _recorder.emit(event="result", nodeid=report.nodeid, outcome=report.outcome,
                   examples=examples, seconds=report.duration, reason=reason,
                   message=message,
                   example=_recorder.failing if report.failed else None)
