"""``refimpl fuzz --engine dask``: one property per task on a Dask cluster, one command.

Dask distributed (BSD-3; ``pip install 'refimpl[dask]'``) runs a scheduler and workers, on one
machine (a :class:`distributed.LocalCluster` on loopback, ``--jobs`` workers, at most one per
CPU this process may use: :func:`local_workers_cap`; more is refused, never clamped) or on
many (``dask scheduler`` on one host, ``dask worker tcp://...`` on the others, and
``--scheduler tcp://...`` here). The workers share the example database when
``--database redis://...`` names one server for them all.

Algorithm
    1. Collect every chosen component's properties here, with the plain runner's worker
       (``pytest --collect-only`` under :mod:`refimpl.fuzz.events`): a file that cannot be
       collected fails as it does under the runner; the properties of a component the target
       lacks are reported skipped with the target's reason, never run.
    2. Submit one task per property: :func:`run_task` runs that property alone in the
       runner's pytest worker (:func:`refimpl.fuzz.worker.start_worker`: the same
       per-example ``--timeout``, the same watchdog) in a scratch folder on whichever Dask
       worker takes it, and returns plain data: the property's results as dicts, its log and
       any pickled failing example.
    3. As each task returns, keep its results; under ``--minutes`` submit the property's next
       round (``10 * 2**round`` examples, seed + round), as the runner does.
    4. Stop when every task has returned. ``--minutes`` running out or SIGINT/SIGTERM sets one
       Dask ``Event`` per component that every task polls: a running property ends as
       "interrupted", a task not yet started returns "not run" at once; with ``--fail-fast``
       a failure sets its own component's event. Tasks still out ``STOP_GRACE_SECONDS + 30``
       seconds after the stop are reported "not run" (a lost worker cannot hang the campaign).
    5. Fold the rounds per property (:func:`refimpl.fuzz.runner.fold_rounds`) and hand them
       to the report tail every engine shares (:func:`refimpl.fuzz.campaign.report_campaign`).

Invariant: every collected property appears in the report exactly once, run or "not run",
and a failure a task returned is never dropped (it outranks every other outcome in the fold).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from refimpl.fuzz.campaign import campaign_header, component_skips, report_campaign
from refimpl.fuzz.compare import load_report
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.outdir import clean_out
from refimpl.fuzz.runner import (
    STARTUP_SECONDS,
    caught_stop_signals,
    fold_rounds,
    missing_components,
    progress_line,
    round_examples,
    stall_limit,
)
from refimpl.fuzz.suite import component_files, default_properties_dir
from refimpl.fuzz.worker import (
    STOP_GRACE_SECONDS,
    STOPPED_FIRST,
    PropertyResult,
    Worker,
    collect_results,
    start_worker,
)

INSTALL_HINT = "pip install 'refimpl[dask]'"
CONNECT_SECONDS = 10  # to reach a --scheduler
POLL_SECONDS = 0.5  # how often a task looks at its stop event, and the parent at its futures
GIVE_UP_SECONDS = STOP_GRACE_SECONDS + 30  # after a stop, how long the parent waits for tasks
FAIL_FAST_REASON = "--fail-fast: the component stopped at its first failure"


class DaskError(ValueError):
    """The dask engine cannot run: ``option`` names the argument at fault."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise DaskError("--engine", f"dask needs the 'distributed' package: {INSTALL_HINT}"
                        ) from exc
    return distributed


def local_workers_cap() -> int:
    """The most workers a local cluster may start: the CPUs this process may run on. Each
    worker runs one property at a time in a pytest process of its own; more workers than
    CPUs only contend for them (and each holds its own memory)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_jobs(jobs: int) -> None:
    """Raise :class:`DaskError` (``--jobs``) if a local cluster of ``jobs`` workers is more
    than :func:`local_workers_cap` allows: refused, never clamped."""
    cap = local_workers_cap()
    if jobs > cap:
        raise DaskError("--jobs", f"{jobs} workers is more than a local Dask cluster may start "
                                  f"here: at most one per CPU this process may use ({cap}); "
                                  f"give --jobs {cap} or fewer, or --scheduler tcp://... to "
                                  "run on a cluster of many machines")


def check_scheduler(address: str | None, jobs: int) -> None:
    """Raise :class:`DaskError` unless Dask distributed imports, and ``address`` (when given)
    answers as a Dask scheduler within ``CONNECT_SECONDS`` and has a worker (without one,
    a campaign bounded by examples would wait for ever), or (no ``address``) the local
    cluster of ``jobs`` workers fits :func:`check_jobs`."""
    distributed = _distributed()
    if address is None:
        check_jobs(jobs)
        return
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # one line, ours, not its log
    try:
        client = distributed.Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except Exception as exc:  # OSError, TimeoutError, a bad address: ValueError, ...
        raise DaskError("--scheduler", f"cannot reach a Dask scheduler at {address}: "
                                       f"{type(exc).__name__}: {exc}") from None
    try:
        workers = client.scheduler_info().get("workers", {})
    finally:
        client.close()
    if not workers:
        raise DaskError("--scheduler", f"the Dask scheduler at {address} has no workers: "
                                       f"start one with `dask worker {address}`")


# --- the worker side: one Dask task -------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One round of one property, as a Dask worker receives it (picklable, small)."""

    opts: FuzzOptions  # its ``database`` is filled in: the parent's, never a scratch folder
    properties: str | None  # the suite's folder; None: the Dask worker's installed suite
    component: str
    nodeid: str  # relative to the suite folder's parent, as the runner's events name it
    round_no: int
    stop: str  # the name of the Dask Event that stops this component


def _supervise(worker: Worker, timeout: float, stop) -> None:
    """Wait for ``worker`` to end: stop it when ``stop`` is set (SIGKILL after the grace
    period), kill it when it shows no progress past the runner's watchdog limit."""
    stopped_at = None
    while worker.proc.poll() is None:
        time.sleep(POLL_SECONDS)
        now = time.monotonic()
        if stopped_at is None and stop.is_set():
            worker.stop("stop")
            stopped_at = now
        elif stopped_at is not None and now - stopped_at > STOP_GRACE_SECONDS:
            worker.kill("stop")
        elif stopped_at is None and now - worker.last_activity() > stall_limit(worker, timeout):
            worker.kill("watchdog")


def run_task(task: Task) -> dict[str, Any]:
    """Run ``task`` on this Dask worker; return ``{"results": [PropertyResult as dict],
    "log": text, "log_path": str, "examples": {file name: bytes}, "host": name}``."""
    from distributed import Event

    stop = Event(task.stop)
    host = socket.gethostname()
    if stop.is_set():
        row = PropertyResult(task.component, task.nodeid, "not run", 0,
                             reason=STOPPED_FIRST)
        return {"results": [asdict(row)], "log": "", "log_path": "", "examples": {},
                "host": host}
    with tempfile.TemporaryDirectory(prefix="refimpl-dask-") as scratch:
        opts = replace(task.opts, out=Path(scratch))
        for sub in ("events", "logs", "examples"):
            (opts.out / sub).mkdir()
        folder = Path(task.properties) if task.properties else default_properties_dir()
        files = [folder / Path(task.nodeid.split("::")[0]).name]
        seed = None if opts.seed is None else opts.seed + task.round_no
        worker = start_worker(opts, task.component, files, seed, task.round_no,
                              round_examples(opts, task.round_no), None, select=(task.nodeid,))
        try:
            _supervise(worker, opts.timeout, stop)
        finally:  # the Dask worker is shutting down (or the loop raised): nothing outlives it
            if worker.proc.poll() is None:
                worker.kill("stop")
            worker.proc.wait()
        # a worker that ended before collecting reports "<component> (worker)": this property
        results = [replace(r, nodeid=task.nodeid) if "::" not in r.nodeid else r
                   for r in collect_results(worker)]
        examples = {p.name: p.read_bytes() for p in (opts.out / "examples").iterdir()}
        return {"results": [asdict(r) for r in results], "log": worker.log_path.read_text(),
                "log_path": str(worker.log_path), "examples": examples, "host": host}


# --- the parent side ----------------------------------------------------------------------
def collect(opts: FuzzOptions, skips: dict[str, str],
            stopped_by: list[int]) -> tuple[list[PropertyResult], list[tuple[str, str]]]:
    """Collect the chosen components' properties here (the runner's worker, collect only);
    returns the rows already decided (collection failures, skipped properties, components
    without files) and the (component, node id) pairs to run."""

    properties = opts.properties or default_properties_dir()
    rows = missing_components(opts, properties)
    workers = [start_worker(opts, c, files, None, 0, 1, None, collect_only=True)
               for c in opts.components if (files := component_files(properties, c))]
    started = time.monotonic()
    while any(w.proc.poll() is None for w in workers):
        time.sleep(POLL_SECONDS / 2)
        late = time.monotonic() - started > STARTUP_SECONDS
        for w in workers:
            if w.proc.poll() is None and (stopped_by or late):
                w.kill("stop" if stopped_by else "watchdog")
    todo = []
    for w in workers:
        for row in collect_results(w):
            if row.outcome != "not run" or "::" not in row.nodeid:
                rows.append(row)  # a file that failed to collect, or a crashed collection
            elif w.component in skips:
                rows.append(replace(row, outcome="skipped", reason=skips[w.component]))
            elif stopped_by:
                rows.append(replace(row, reason=STOPPED_FIRST))
            else:
                todo.append((w.component, row.nodeid))
    return rows, todo


def _task_rows(future, component: str, nodeid: str, out: Path) -> list[PropertyResult]:
    """A finished future's results (its log appended to the component's log in ``out``, its
    pickled examples kept in ``out/examples``). A task that raised or was cancelled leaves its
    property "not run" with the reason: the target runs in the task's own pytest process, so
    this is the cluster failing (a lost worker), not a finding, and never a pass."""
    if future.status != "finished":
        why = "it was cancelled"
        if future.status == "error":
            exc = future.exception()
            why = f"it failed: {type(exc).__name__}: {exc}"
        return [PropertyResult(component, nodeid, "not run", 0,
                               reason=f"its Dask task did not return results: {why}")]
    data = future.result()
    log = out / "logs" / f"{component}.log"
    with log.open("a") as f:
        f.write(f"=== dask task on {data['host']}: {nodeid}\n{data['log']}")
    for name, blob in data["examples"].items():
        (out / "examples" / name).write_bytes(blob)
    rows = [PropertyResult(**row) for row in data["results"]]
    if data["log_path"]:  # a crash message names the scratch log: name the kept one
        rows = [replace(r, message=r.message.replace(data["log_path"], str(log)))
                for r in rows]
    return rows


class _DaskCampaign:
    """The parent's loop: tasks out, their results in, rounds, the deadline, signals."""

    def __init__(self, opts: FuzzOptions, client, stopped_by: list[int]) -> None:
        from distributed import Event

        self.opts, self.client, self.stopped_by = opts, client, stopped_by
        database = opts.database or str(opts.out / "hypothesis-db")
        if "://" not in database:  # a folder: the same one whatever a worker's own folder
            database = str(Path(database).resolve())
        self.task_opts = replace(opts, database=database)
        self.properties = str(opts.properties.resolve()) if opts.properties else None
        self.deadline = time.monotonic() + 60 * opts.minutes if opts.minutes else None
        prefix = f"refimpl-stop-{uuid.uuid4().hex}"
        self.events = {c: Event(f"{prefix}-{c}", client=client) for c in opts.components}
        self.stopping_since: float | None = None
        self.pending: dict[Any, tuple[str, str, int]] = {}
        self.finished = 0  # tasks returned, for the progress lines
        self.failed_fast: set[str] = set()  # components --fail-fast stopped

    def submit(self, component: str, nodeid: str, round_no: int) -> None:
        task = Task(self.task_opts, self.properties, component, nodeid, round_no,
                    self.events[component].name)
        future = self.client.submit(run_task, task, pure=False,
                                    key=f"refimpl-{round_no}-{uuid.uuid4().hex}")
        self.pending[future] = (component, nodeid, round_no)

    def _check_stop(self) -> None:
        late = self.deadline is not None and time.monotonic() >= self.deadline
        if self.stopping_since is None and (self.stopped_by or late):
            self.stopping_since = time.monotonic()
            for event in self.events.values():
                event.set()

    def _finish(self, future) -> list[PropertyResult]:
        component, nodeid, round_no = self.pending.pop(future)
        rows = _task_rows(future, component, nodeid, self.opts.out)
        self.finished += 1
        for row in rows:  # one line per finished task, as the runner prints off a terminal
            print(progress_line(component, asdict(row), self.finished, None) +
                  f" [round {round_no}]", flush=True)
        if self.opts.fail_fast and any(r.outcome == "failed" for r in rows):
            self.events[component].set()
            self.failed_fast.add(component)
        if component in self.failed_fast:  # say why, as the runner does
            rows = [replace(r, reason=FAIL_FAST_REASON) if r.outcome == "not run" else r
                    for r in rows]
        again = self.deadline is not None and self.stopping_since is None
        if again and not self.events[component].is_set():
            self.submit(component, nodeid, round_no + 1)
        return rows

    def run(self, todo: list[tuple[str, str]]) -> list[list[PropertyResult]]:
        from distributed import wait

        for component, nodeid in todo:
            self.submit(component, nodeid, 0)
        rounds = []
        while self.pending:
            self._check_stop()
            with contextlib.suppress(TimeoutError):
                wait(list(self.pending), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            for future in [f for f in self.pending if f.done()]:
                rounds.append(self._finish(future))
            if self.stopping_since and time.monotonic() - self.stopping_since > GIVE_UP_SECONDS:
                break
        for future, (component, nodeid, _) in self.pending.items():  # given up on
            future.cancel()
            rounds.append([PropertyResult(component, nodeid, "not run", 0, reason=(
                "the campaign stopped and its Dask task did not return in time"))])
        return rounds


def _cluster(opts: FuzzOptions):
    """A Client of ``--scheduler``, or of a new LocalCluster of ``--jobs`` worker processes on
    loopback (one thread each: one property at a time), and a description for the header."""
    distributed = _distributed()
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if opts.scheduler is not None:
        client = distributed.Client(opts.scheduler, timeout=CONNECT_SECONDS)
        workers = len(client.scheduler_info().get("workers", {}))
        return client, None, f"the Dask scheduler at {opts.scheduler} ({workers} workers now)"
    check_jobs(opts.jobs)
    # Ctrl-C reaches the whole foreground process group: the Dask workers start with SIGINT
    # ignored (inherited across exec), so that only this process acts on it, by stopping.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cluster = distributed.LocalCluster(
            n_workers=opts.jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=logging.ERROR)
    finally:
        signal.signal(signal.SIGINT, previous)
    client = distributed.Client(cluster)
    return client, cluster, f"a local Dask cluster of {opts.jobs} workers on loopback"


def run_dask(opts: FuzzOptions, backend: Any) -> int:
    """The whole --engine dask campaign, reported by the report tail every engine shares."""

    old_rows = load_report(opts.compare) if opts.compare else None  # before --force cleans
    clean_out(opts.out, resume=opts.resume)
    for sub in ("events", "logs", "examples", "reproducers"):
        (opts.out / sub).mkdir(parents=True, exist_ok=True)
    with caught_stop_signals() as stopped_by:  # until the report is written
        client, cluster, where = _cluster(opts)
        print(f"refimpl fuzz: {campaign_header(opts, backend)}\nengine: dask, on {where}"
              f"{_database_note(opts)}", flush=True)
        try:
            rows, todo = collect(opts, component_skips(backend, opts.components), stopped_by)
            rounds = _DaskCampaign(opts, client, stopped_by).run(todo) if todo else []
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        order = {nodeid: i for i, (_, nodeid) in enumerate(todo)}  # collection order
        results = rows + sorted(fold_rounds(rounds),
                                key=lambda r: order.get(r.nodeid, len(order)))
        return report_campaign(opts, backend, results, stopped_by[0] if stopped_by else None,
                               old_rows, engine_note=" (engine dask)")


def _database_note(opts: FuzzOptions) -> str:
    """Where the workers keep examples, when they may not share them."""
    if opts.scheduler is None or (opts.database or "").startswith(("redis://", "rediss://")):
        return ""
    folder = opts.database or str((opts.out / "hypothesis-db").resolve())
    return (f"\nexample database: the folder {folder} on each worker's machine (shared only "
            "where the workers share that file system; --database redis://... shares it)")

