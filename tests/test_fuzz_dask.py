"""`refimpl fuzz --engine dask`: a Dask scheduler and two workers on loopback (the processes a
real cluster runs, `dask scheduler` and `dask worker`), sharing one Redis example database where
a redis-server is installed, catch a deliberately broken backend; a passing target passes; an
unreachable --scheduler is one line, exit 2.

The cluster tests need the optional extra (pip install 'refimpl[dask]') and are skipped,
visibly, without it; the missing extra's own message is tested with the package hidden.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl.fuzz.distributed import local_workers_cap
from tests.test_fuzz import SUITE, _run, report_of, write_suite
from tests.test_fuzz_redis import _free_port
from tests.test_fuzz_redis import redis_url as redis_url  # the fixture, re-exported

try:
    import distributed
except ImportError:
    distributed = None
needs_dask = pytest.mark.skipif(distributed is None, reason="Dask distributed is not "
                                                            "installed (pip install "
                                                            "'refimpl[dask]')")

ROOT = Path(__file__).resolve().parent.parent
#: workers of the local clusters below: two, or one where this process may use one CPU only
#: (a local cluster starts at most one worker per CPU; more is refused)
JOBS = min(2, local_workers_cap())


def _dask(*args: str, cwd: Path, log: Path) -> subprocess.Popen:
    """``dask scheduler`` / ``dask worker`` as a user starts them, logging into ``log``."""
    with log.open("w") as f:
        return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=cwd, stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@pytest.fixture
def scheduler(tmp_path: Path):
    """The address of a loopback scheduler with two single-threaded workers, started as
    separate processes in the repository root (so that ``tests.broken_backends`` imports)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_dask("scheduler", "--host", "127.0.0.1", "--port", str(port),
                   "--no-dashboard", cwd=ROOT, log=tmp_path / "scheduler.log")]
    for n in range(2):
        procs.append(_dask("worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                           "--no-dashboard", "--local-directory", str(tmp_path / f"w{n}"),
                           cwd=ROOT, log=tmp_path / f"worker{n}.log"))
    try:
        client = distributed.Client(address, timeout=120)
        client.wait_for_workers(2, timeout=120)
        client.close()
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def database(request, tmp_path: Path) -> str:
    """A Redis server's URL where redis-server is installed (the database a cluster shares),
    else a folder (both workers of this test run on one machine)."""
    if shutil.which("redis-server") is None:
        return str(tmp_path / "db")
    pytest.importorskip("redis", reason="the 'redis' client package is not installed")
    return request.getfixturevalue("redis_url")


@needs_dask
@pytest.mark.slow
def test_a_scheduler_and_two_workers_catch_a_broken_backend(scheduler: str, database: str,
                                                            tmp_path: Path):
    out = tmp_path / "out"
    start = time.monotonic()
    done = _run("fuzz", "--engine", "dask", "--scheduler", scheduler, "--database", database,
                "--target", "tests.broken_backends:RandomMergingCSE", "--component", "cse",
                "--profile", "ci", "--fail-fast", "--no-shrink", "--out", str(out), cwd=ROOT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"engine: dask, on the Dask scheduler at {scheduler} (2 workers now)" in done.stdout
    rows = report_of(out)
    failed = [r for r in rows.values() if r["outcome"] == "failed"]
    assert failed and all("::" in r["nodeid"] for r in failed), rows
    # every property of the component is listed (a parametrized one once per case);
    # --fail-fast stopped the rest
    written = {line.split("(")[0].removeprefix("def ")
               for path in sorted((ROOT / "properties").glob("test_cse*.py"))
               for line in path.read_text().splitlines() if line.startswith("def test_")}
    assert {name.split("[")[0] for name in rows} == written, (rows, written)
    assert all(r["outcome"] in ("passed", "failed", "interrupted", "not run")
               for r in rows.values()), rows
    assert all(r["reason"] == "--fail-fast: the component stopped at its first failure"
               for r in rows.values() if r["outcome"] == "not run"), rows
    repro = Path(failed[0]["reproducer"])
    replayed = subprocess.run([sys.executable, str(repro)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "REPRODUCED" in replayed.stdout
    tasks = (out / "logs" / "cse.log").read_text().count("=== dask task on ")
    assert tasks == len(rows), tasks  # one task per property, each logged
    if database.startswith("redis://"):
        import redis

        assert redis.Redis.from_url(database).keys("*"), "the workers stored nothing in Redis"
    print(f"\ncaught in {time.monotonic() - start:.1f} s")


@needs_dask
@pytest.mark.slow
def test_a_passing_target_passes_on_a_local_cluster(tmp_path: Path):
    folder = write_suite(tmp_path / "props", "test_cse_ok.py",
                         SUITE.replace("box.x < 100", "box.x == box.x"))
    out = tmp_path / "out"
    done = _run("fuzz", "--engine", "dask", "--jobs", str(JOBS), "--component", "cse",
                "--properties", str(folder), "--max-examples", "15", "--out", str(out),
                cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"on a local Dask cluster of {JOBS} workers on loopback" in done.stdout
    rows = report_of(out)
    assert sorted(rows) == ["test_always", "test_small"]
    assert all(r["outcome"] == "passed" and r["examples"] >= 15 for r in rows.values()), rows


@needs_dask
def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path: Path):
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    done = _run("fuzz", "--engine", "dask", "--scheduler", address, "--out",
                str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"refimpl fuzz: --scheduler: cannot reach a Dask scheduler "
                                  f"at {address}: ")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "o").exists()  # nothing ran, nothing written


@needs_dask
def test_a_scheduler_without_workers_is_one_line_and_exit_2(tmp_path: Path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    proc = _dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard",
                 cwd=tmp_path, log=tmp_path / "scheduler.log")
    try:
        client = distributed.Client(address, timeout=120)
        client.close()
        done = _run("fuzz", "--engine", "dask", "--scheduler", address, "--out",
                    str(tmp_path / "o"), cwd=tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (f"refimpl fuzz: --scheduler: the Dask scheduler at {address} has "
                           f"no workers: start one with `dask worker {address}`\n")


@needs_dask
@pytest.mark.parametrize("over", ["10000", "cap + 1"])
def test_a_local_cluster_past_one_worker_per_cpu_is_one_line_and_exit_2(tmp_path: Path,
                                                                       over: str):
    """Issue 32, item 8: `--engine dask --jobs 10000` started a local cluster of that many
    workers. A local cluster is capped at one worker per CPU this process may use: more is
    one line naming --jobs, exit 2, before any worker starts (never clamped)."""
    cpus = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count())
    jobs = 10000 if over == "10000" else cpus + 1
    folder = write_suite(tmp_path / "props", "test_cse_ok.py",  # quick, were it to run
                         SUITE.replace("box.x < 100", "box.x == box.x"))
    done = _run("fuzz", "--engine", "dask", "--jobs", str(jobs), "--component", "cse",
                "--properties", str(folder), "--max-examples", "1", "--out",
                str(tmp_path / "o"), cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"refimpl fuzz: --jobs: {jobs} workers is more than a "
                                  "local Dask cluster may start here"), done.stderr
    assert f"({cpus}); give --jobs {cpus} or fewer" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "o").exists()  # nothing ran, nothing written


def test_scheduler_needs_the_dask_engine(tmp_path: Path):
    done = _run("fuzz", "--scheduler", "tcp://127.0.0.1:8786", "--out", str(tmp_path / "o"),
                cwd=tmp_path)
    assert done.returncode == 2
    assert "needs engine='dask'" in done.stderr


def test_the_missing_extra_is_one_line_and_exit_2(tmp_path: Path):
    hide = ("import sys; sys.modules['distributed'] = None; from refimpl.cli import main; "
            "sys.exit(main(['fuzz', '--engine', 'dask', '--out', 'o']))")
    done = subprocess.run([sys.executable, "-c", hide], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("refimpl fuzz: --engine: dask needs the 'distributed' package: "
                           "pip install 'refimpl[dask]'\n")


SIGNAL_SUITE = '''
import time
from pathlib import Path
from hypothesis import given, strategies as st


@given(x=st.integers())
def test_a_fast(refimpl_backend, x):
    pass


@given(x=st.integers())
def test_b_slow(refimpl_backend, x):
    (Path(__file__).parent / "slow-started").touch()
    time.sleep(1)


@given(x=st.integers())
def test_c_later(refimpl_backend, x):
    pass
'''


@needs_dask
@pytest.mark.slow
def test_sigint_stops_the_tasks_and_reports_what_ran(tmp_path: Path):
    from tests.test_fuzz_limits import _orphans

    props = write_suite(tmp_path / "props", "test_cse_sig.py", SIGNAL_SUITE)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "refimpl", "fuzz", "--engine", "dask",
                             "--jobs", "1", "--component", "cse", "--properties", str(props),
                             "--out", str(out), "--max-examples", "30"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (props / "slow-started").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2.5)  # inside test_b_slow's examples
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout + stderr
    rows = report_of(out)
    assert rows["test_a_fast"]["outcome"] == "passed"
    assert rows["test_b_slow"]["outcome"] == "interrupted"
    assert 0 < rows["test_b_slow"]["examples"] < 30
    assert rows["test_c_later"]["outcome"] == "not run"
    assert "stopped by signal 2" in stdout
    assert not _orphans(str(props))


@needs_dask
@pytest.mark.slow
def test_minutes_bounds_the_campaign_and_rounds_go_deeper(tmp_path: Path):
    folder = write_suite(tmp_path / "props", "test_cse_ok.py",
                         SUITE.replace("box.x < 100", "box.x == box.x"))
    out = tmp_path / "out"
    start = time.monotonic()
    done = _run("fuzz", "--engine", "dask", "--jobs", str(JOBS), "--component", "cse",
                "--properties", str(folder), "--minutes", "0.5", "--out", str(out),
                cwd=tmp_path)
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    # 30 s of rounds, plus the cluster's start, the collection and a stop's grace period
    assert seconds < 30 + 120, seconds
    rows = report_of(out)
    assert all(r["outcome"] == "passed" for r in rows.values()), rows
    headers = [line for line in (out / "logs" / "cse.log").read_text().splitlines()
               if line.startswith("=== dask task on ")]
    tasks = {name: sum(h.endswith(f"::{name}") for h in headers) for name in rows}
    assert all(n >= 2 for n in tasks.values()), tasks  # a second round was started for each


class _Future:
    """A Dask future whose task raised (its worker was lost), as _task_rows reads one."""

    status = "error"

    def exception(self):
        return RuntimeError("worker tcp://10.0.0.2:4000 lost")


def test_a_lost_worker_leaves_its_property_not_run_never_passed(tmp_path: Path):
    from refimpl.fuzz.distributed import _task_rows

    (row,) = _task_rows(_Future(), "cse", "props/test_cse_x.py::test_y", tmp_path)
    assert (row.nodeid, row.outcome, row.examples) == ("props/test_cse_x.py::test_y",
                                                       "not run", 0)
    assert row.reason == ("its Dask task did not return results: it failed: RuntimeError: "
                          "worker tcp://10.0.0.2:4000 lost")
