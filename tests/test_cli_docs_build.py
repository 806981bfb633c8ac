"""The documentation site builds with warnings as errors, and mypy passes on the public modules.

Both need optional tools (the ``docs`` and ``typecheck`` extras); without them the tests are
skipped with the reason, never passed.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("REFIMPL_CATALOGUE_REPORT", None)
    return env


@pytest.mark.slow
def test_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, env=_tool_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    catalogue = (tmp_path / "properties" / "index.html").read_text()
    assert "test_cse_is_sound" in catalogue
    assert (tmp_path / "reference" / "index.html").read_text().count("FlopCounterMode") > 0


@pytest.mark.slow
def test_mypy_is_clean_on_the_public_modules():
    pytest.importorskip("mypy", reason="the typecheck extra is not installed: "
                        "pip install '.[typecheck]'")
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, env=_tool_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
