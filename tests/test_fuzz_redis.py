"""Campaigns on several machines pool what they find through one Redis example database.

The test starts a real ``redis-server`` on a free loopback port; where none is installed it is
skipped, and says so. Two campaigns share the database: the second replays the first's failing
example and so fails on its very first example.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_fuzz import SUITE

redis = pytest.importorskip("redis", reason="the 'redis' client package is not installed")
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="no redis-server on this machine (apt-get install "
                                       "redis-server to run this test)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path: Path):
    port = _free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(50):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _campaign(folder: Path, out: Path, url: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "refimpl", "fuzz", "--component", "cse", "--properties",
         str(folder), "--out", str(out), "--max-examples", "30", "--database", url],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    return json.loads((out / "report.json").read_text())


def test_two_campaigns_share_failures_through_redis(redis_url: str, tmp_path: Path):
    folder = tmp_path / "props"
    folder.mkdir()
    (folder / "test_cse_tiny.py").write_text(SUITE)
    _campaign(folder, tmp_path / "a", redis_url)
    keys = redis.Redis.from_url(redis_url).keys("*")
    assert keys, "the first campaign stored nothing in Redis"
    second = _campaign(folder, tmp_path / "b", redis_url)
    small = next(p for p in second["properties"] if p["nodeid"].endswith("test_small"))
    assert small["outcome"] == "failed"
    assert small["examples"] <= 3  # replayed from the shared database, not searched again
