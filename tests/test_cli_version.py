"""`refimpl --version` prints the package's version and exits 0; packaging files are present."""

from __future__ import annotations

import pathlib

import pytest

import refimpl
from refimpl.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["--version"])
    assert excinfo.value.code == 0
    assert capsys.readouterr().out.startswith(f"refimpl {refimpl.__version__} (torch ")


def test_setup_cfg_version_matches_the_package():
    setup_cfg = (ROOT / "setup.cfg").read_text()
    assert f"version = {refimpl.__version__}\n" in setup_cfg


@pytest.mark.parametrize("name", ["LICENSE", "CHANGELOG.md", "refimpl/py.typed"])
def test_packaging_file_exists(name):
    assert (ROOT / name).is_file(), name


def test_py_typed_is_package_data():
    assert "refimpl = py.typed" in (ROOT / "setup.cfg").read_text()
