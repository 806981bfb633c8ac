"""`refimpl fuzz --engine hypofuzz`: two HypoFuzz workers (two "machines" on loopback) share one
Redis example database, and what they find is replayed by the plain runner from it.

Needs the optional extra (pip install 'refimpl[hypofuzz]') and a redis-server; skipped, visibly,
without them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_fuzz import SUITE, _run, report_of, write_suite

pytest.importorskip("hypofuzz", reason="HypoFuzz is not installed (pip install "
                                       "'refimpl[hypofuzz]'; non-commercial licence)")
from tests.test_fuzz_redis import pytestmark as _needs_redis
from tests.test_fuzz_redis import redis
from tests.test_fuzz_redis import redis_url as redis_url  # the fixture, re-exported

pytestmark = [_needs_redis, pytest.mark.slow]


def _hypofuzz(folder: Path, out: Path, url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "refimpl", "fuzz", "--engine", "hypofuzz", "--minutes", "0.6",
         "--component", "cse", "--properties", str(folder), "--out", str(out),
         "--database", url, "--junitxml", str(out / "junit.xml")], cwd=folder.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def test_two_hypofuzz_workers_share_redis_and_the_runner_replays(redis_url: str,
                                                                  tmp_path: Path):
    folder = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    workers = [_hypofuzz(folder, tmp_path / name, redis_url) for name in ("a", "b")]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode == 1, output  # each reports the failure
    for name in ("a", "b"):
        rows = report_of(tmp_path / name)
        assert rows["test_small"]["outcome"] == "failed"
        assert "x=" in rows["test_small"]["example"]
        # one report tail for both engines: --junitxml is written under HypoFuzz too
        assert 'failures="1"' in (tmp_path / name / "junit.xml").read_text()
    client = redis.Redis.from_url(redis_url)
    assert len(client.keys("*hypofuzz.worker_identity*")) == 2  # both in one database
    replayed = _run("fuzz", "--component", "cse", "--properties", str(folder), "--out",
                    str(tmp_path / "runner"), "--max-examples", "30", "--database", redis_url,
                    cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    row = report_of(tmp_path / "runner")["test_small"]
    # the reuse phase replays what the workers saved (their failures first): a handful, where
    # a fresh search would need its generate phase
    assert row["outcome"] == "failed" and row["examples"] <= 10, row


def test_hypofuzz_needs_minutes(tmp_path: Path):
    done = _run("fuzz", "--engine", "hypofuzz", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("refimpl fuzz: --minutes:")
