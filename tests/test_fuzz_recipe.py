"""docs/fuzzing.md's nightly job is a file (.github/workflows/fuzz.yml): it is linted here and
its fuzz step is run for a minute on loopback, with a real redis-server as its service."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.fuzz.campaign import component_skips
from refimpl.oracle import load_backend
from tests.test_fuzz_redis import redis_url  # noqa: F401  (the fixture)

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (the test extra has it)")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "fuzz.yml"


def job() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["fuzz"]


def fuzz_command(component: str = "cse") -> list[str]:
    """The fuzz step's command line, for the matrix entry ``component``."""
    step = next(s for s in job()["steps"] if s.get("name") == "fuzz")
    return shlex.split(re.sub(r"\$\{\{\s*matrix\.component\s*\}\}", component, step["run"]))


def test_the_workflow_runs_only_components_the_target_has():
    command = fuzz_command()
    target = command[command.index("--target") + 1]
    components = job()["strategy"]["matrix"]["component"]
    lacking = component_skips(load_backend(target), tuple(components))
    assert not lacking, f"the matrix runs components {target} lacks: {lacking}"


def test_the_workflow_fuzzes_randomly_with_a_shared_database():
    command = fuzz_command()
    assert command[command.index("--profile") + 1] == "fuzz"  # not the ci profile's
    database = command[command.index("--database") + 1]
    assert database.startswith("redis://localhost:6379")
    assert "redis" in job()["services"]
    assert job()["services"]["redis"]["ports"] == ["6379:6379"]
    assert "docs/fuzzing.md" in WORKFLOW.read_text() and \
        ".github/workflows/fuzz.yml" in (ROOT / "docs" / "fuzzing.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")
def test_the_fuzz_step_runs_for_its_minutes(tmp_path: Path, redis_url: str):  # noqa: F811
    command = fuzz_command("cse")
    command[command.index("--minutes") + 1] = "0.25"  # the workflow's command, for 15 s
    command[command.index("--database") + 1] = redis_url
    assert command[0] == "refimpl"
    done = subprocess.run([sys.executable, "-m", "refimpl", *command[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # it ran; 1: a finding
    assert (tmp_path / "fuzz-out" / "junit.xml").exists()
    assert "cse 1/" in done.stdout
