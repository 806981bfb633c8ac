"""``refimpl fuzz --engine hypofuzz``: the target properties under HypoFuzz, for long campaigns.

HypoFuzz (the Hypothesis maintainers' fuzzer; ``pip install 'refimpl[hypofuzz]'``, licensed for
non-commercial use only, see docs/fuzzing.md) interleaves many property functions, prioritises
those making progress, is coverage-guided, and runs workers that share one example database:
``--database redis://...`` on several machines makes one campaign of them.

Algorithm
    1. Choose the property files of the components the target provides (the others are
       reported skipped, with the target's reason).
    2. Start ``hypothesis fuzz -n JOBS --no-dashboard -- FILES -p refimpl.fuzz.hypofuzz`` in
       its own process group, with the ``fuzz`` profile's database set to --database (or
       ``--out/hypothesis-db``) through ``REFIMPL_FUZZ_DATABASE``.
    3. This module, loaded as a pytest plugin in every HypoFuzz worker, counts each
       property's examples and reach from Hypothesis's observability stream and records its
       first failing example; each worker rewrites ``--out/hypofuzz/worker-PID.json``.
    4. The parent stops the workers when --minutes have passed, on SIGINT/SIGTERM, or (with
       --fail-fast) at the first failure, then merges the workers' files into the usual
       report.json, reproducers and summary.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis.internal import observability
from hypothesis.internal.observability import add_observability_callback

from refimpl.fuzz.campaign import campaign_header, component_skips, report_campaign
from refimpl.fuzz.compare import load_report
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.outdir import clean_out
from refimpl.fuzz.suite import component_files, default_properties_dir
from refimpl.fuzz.worker import PropertyResult
from refimpl.properties.reach import REACH_EVENT, REACHED

HYPOFUZZ_CLI = "import hypofuzz.entrypoint; from hypothesis.extra.cli import main; main()"
FLUSH_SECONDS = 2.0


def check_installed() -> None:
    """Raise ImportError naming the extra unless HypoFuzz can be imported."""
    try:
        import hypofuzz  # noqa: F401
    except ImportError as exc:
        raise ImportError("HypoFuzz is not installed: pip install 'refimpl[hypofuzz]' "
                          "(non-commercial licence; see docs/fuzzing.md)") from exc


# --- the worker side: a pytest plugin loaded into each HypoFuzz worker ---------------------
class _Status:
    """Per-property tallies of one HypoFuzz worker, flushed to its own JSON file."""

    def __init__(self, path: Path) -> None:
        self.path, self.flushed = path, 0.0
        self.properties: dict[str, dict[str, Any]] = {}

    def observe(self, observation) -> None:
        if getattr(observation, "type", None) != "test_case" or observation.status == "gave_up":
            return
        row = self.properties.setdefault(observation.property, {
            "examples": 0, "reach_recorded": 0, "reached": 0, "failure": None})
        row["examples"] += 1
        if REACH_EVENT in observation.features:
            row["reach_recorded"] += 1
            row["reached"] += observation.features[REACH_EVENT] == REACHED
        failed = observation.status == "failed" and row["failure"] is None
        if failed:
            row["failure"] = {"example": observation.representation,
                              "message": observation.status_reason, "at": time.time()}
        if failed or time.monotonic() - self.flushed > FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.properties))
        tmp.replace(self.path)


def _fresh_fixture_requests() -> None:
    """Work around HypoFuzz 25.11 on a session-scoped fixture (``refimpl_backend``): leaving a
    target tears every fixture down, and re-entering a target visited before then asks that
    item's stale FixtureRequest, which still believes the fixture is set up ("The fixture
    value for 'refimpl_backend' is not available"). A fresh request per entry (what pytest
    gives an item before each run) computes the fixture again."""
    from hypofuzz.hypofuzz import FuzzTarget

    enter = FuzzTarget._enter_fixtures
    if getattr(enter, "_refimpl_fresh", False):
        return

    def enter_fresh(self) -> None:
        if self.pytest_item is not None and hasattr(self.pytest_item, "_initrequest"):
            self.pytest_item._initrequest()
        enter(self)

    enter_fresh._refimpl_fresh = True
    FuzzTarget._enter_fixtures = enter_fresh


def pytest_configure(config) -> None:
    folder = os.environ.get("REFIMPL_HYPOFUZZ_STATUS")
    if not folder:
        return
    _fresh_fixture_requests()

    observability.OBSERVABILITY_COLLECT_COVERAGE = False  # HypoFuzz measures its own
    status = _Status(Path(folder) / f"worker-{os.getpid()}.json")
    add_observability_callback(status.observe)


# --- the parent side ------------------------------------------------------------------------
def read_status(folder: Path) -> dict[str, dict[str, Any]]:
    """Every worker's tallies, summed per property (the earliest failure kept)."""
    merged: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("worker-*.json")):
        try:
            rows = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for nodeid, row in rows.items():
            into = merged.setdefault(nodeid, {"examples": 0, "reach_recorded": 0,
                                              "reached": 0, "failure": None})
            for key in ("examples", "reach_recorded", "reached"):
                into[key] += row[key]
            if row["failure"] and (into["failure"] is None
                                   or row["failure"]["at"] < into["failure"]["at"]):
                into["failure"] = row["failure"]
    return merged


def hypofuzz_command(opts: FuzzOptions, files: list[Path]) -> list[str]:
    return [sys.executable, "-c", HYPOFUZZ_CLI, "fuzz", "-n", str(opts.jobs), "--no-dashboard",
            "--", *map(str, files), "-p", "refimpl.fuzz.hypofuzz", "-p", "no:cacheprovider",
            "-o", "addopts=", "--refimpl-target", opts.target]


def start_hypofuzz(opts: FuzzOptions, files: list[Path], status: Path) -> subprocess.Popen:
    """Start HypoFuzz on ``files`` in its own process group; it writes into ``status``."""
    status.mkdir(parents=True, exist_ok=True)
    database = opts.database or str((opts.out / "hypothesis-db").resolve())
    env = dict(os.environ, HYPOTHESIS_PROFILE="fuzz", REFIMPL_FUZZ_DATABASE=database,
               REFIMPL_TARGET=opts.target, REFIMPL_HYPOFUZZ_STATUS=str(status.resolve()),
               PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(),
                                                        os.environ.get("PYTHONPATH")])))
    log = (opts.out / "logs" / "hypofuzz.log").open("a")
    return subprocess.Popen(hypofuzz_command(opts, files), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    for signum, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def _results(opts: FuzzOptions, files_by_component: dict[str, list[Path]],
             status: dict[str, dict[str, Any]], started: float) -> list[PropertyResult]:
    results = []
    for nodeid, row in sorted(status.items()):
        comp = next((c for c, files in files_by_component.items()
                     if any(nodeid.split("::")[0].endswith(f.name) for f in files)), "?")
        failure = row["failure"]
        outcome = "failed" if failure else "passed" if row["examples"] else "not run"
        results.append(PropertyResult(
            comp, nodeid, outcome, row["examples"],
            seconds=(failure["at"] - started) if failure else 0.0,
            message=failure["message"] if failure else "",
            example=failure["example"] if failure else None,
            reach_recorded=row["reach_recorded"], reached=row["reached"]))
    return results


def _supervise(opts: FuzzOptions, files: list[Path], status_dir: Path,
               stopped_by: list[int]) -> None:
    """Run HypoFuzz until --minutes pass, a signal arrives or (--fail-fast) a failure shows.

    HypoFuzz's hub exits when, 60 s after it started its workers, none has reported its
    tests yet (a slow collection on a loaded machine); such an early exit without a failure is
    restarted, and said in the log."""
    deadline = time.monotonic() + 60 * opts.minutes
    while time.monotonic() < deadline and not stopped_by:
        proc = start_hypofuzz(opts, files, status_dir)
        while proc.poll() is None and time.monotonic() < deadline and not stopped_by:
            time.sleep(0.5)
            if opts.fail_fast and any(r["failure"] for r in read_status(status_dir).values()):
                stopped_early = True
                break
        else:
            stopped_early = False
        _stop(proc)
        found = any(r["failure"] for r in read_status(status_dir).values())
        if stopped_early or found:
            return
        with (opts.out / "logs" / "hypofuzz.log").open("a") as log:
            log.write(f"\n=== HypoFuzz exited early ({proc.returncode}) with nothing found: "
                      "restarting\n")


def run_hypofuzz(opts: FuzzOptions, backend: Any) -> int:
    """The whole --engine hypofuzz campaign; reported by the plain runner's report tail
    (:func:`refimpl.fuzz.campaign.report_campaign`: --junitxml and --compare included)."""

    properties = opts.properties or default_properties_dir()
    old_rows = load_report(opts.compare) if opts.compare else None  # before --force cleans
    clean_out(opts.out, resume=opts.resume)
    skips = component_skips(backend, opts.components)
    files = {c: component_files(properties, c) for c in opts.components if c not in skips}
    skipped = [PropertyResult(c, f"{c} (component)", "skipped", 0, reason=why)
               for c, why in skips.items()]
    status_dir, started = opts.out / "hypofuzz", time.time()
    stopped_by: list[int] = []
    previous = {s: signal.signal(s, lambda n, f: stopped_by.append(n))
                for s in (signal.SIGINT, signal.SIGTERM)}
    print(f"refimpl fuzz: {campaign_header(opts, backend)}; engine hypofuzz", flush=True)
    try:
        _supervise(opts, [f for fs in files.values() for f in fs], status_dir, stopped_by)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    results = skipped + _results(opts, files, read_status(status_dir), started)
    print(f"HypoFuzz log: {opts.out / 'logs' / 'hypofuzz.log'}")
    return report_campaign(opts, backend, results, stopped_by[0] if stopped_by else None,
                           old_rows, engine_note=" (engine hypofuzz)")
