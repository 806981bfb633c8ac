"""The documentation site builds with warnings as errors, and mypy passes on the public modules.

Both need optional tools (the ``docs`` and ``typecheck`` extras); without them the tests are
skipped with the reason, never passed.
"""

from __future__ import annotations

import os
import pathlib
import re
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
    reference = (tmp_path / "reference" / "index.html").read_text()
    assert reference.count("FlopCounterMode") > 0
    # docstrings' Sphinx roles shown as Sphinx shows them (docs/docstring_roles.py), not as
    # ":mod:" before the name; a "~" name by its last component
    assert not re.search(r":(func|class|mod|meth|attr|data|exc|obj):<code>", reference)
    assert "<code>refimpl.flops.free_ops</code>" in reference  # :mod:`refimpl.flops.free_ops`
    assert "<code>SolverTimeLimit</code>" in reference  # :class:`~...errors.SolverTimeLimit`
    assert "PartitionPromise" in reference and "conv_configs" in reference
    # the nightly workflow inlined from the repository, not linked (a link would be dead)
    fuzzing = (tmp_path / "fuzzing" / "index.html").read_text()
    assert "actions/upload-artifact@v4" in fuzzing and "../.github" not in fuzzing
    assert (tmp_path / "errors" / "index.html").is_file()


@pytest.mark.slow
def test_mypy_is_clean_on_the_public_modules():
    pytest.importorskip("mypy", reason="the typecheck extra is not installed: "
                        "pip install '.[typecheck]'")
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, env=_tool_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
