"""scripts/gpu_bundle.py (issue 31, item 2): the folder a GPU machine without network installs
refimpl's checks from. Fast tests: which requirements are walked, which wheels the device
takes, what folder is replaced. The slow one makes a bundle (it needs PyPI) and installs
from it offline, as the device's CPython 3.12 would, into a throwaway folder."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_bundle  # noqa: E402


def test_the_closure_walks_what_pytest_requires_and_stops_at_the_devices_stack():
    found = gpu_bundle.closure(["pytest", "refimpl"])
    assert {"pytest", "pluggy", "iniconfig", "packaging", "hypothesis", "refimpl"} <= set(found)
    assert not {"torch", "numpy", "scipy", "matplotlib"} & set(found)
    assert found["pytest"] == subprocess.run(
        [sys.executable, "-m", "pytest", "--version"], capture_output=True,
        text=True).stdout.split()[-1]


def test_a_requirement_not_installed_here_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(gpu_bundle, "requires", lambda name: ["no-such-dist-xyz"])
    with pytest.raises(gpu_bundle.BundleError, match="no-such-dist-xyz is required but not"):
        gpu_bundle.closure(["pytest"])


@pytest.mark.parametrize("wheel, takes", [
    ("a-1.0-py3-none-any.whl", True),
    ("a-1.0-py2.py3-none-any.whl", True),
    ("a-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", True),
    ("a-1.0-cp39-abi3-manylinux_2_28_x86_64.whl", True),
    ("a-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", False),  # another Python
    ("a-1.0-cp312-cp312-manylinux_2_28_aarch64.whl", False),  # another processor
    ("a-1.0-cp312-cp312-macosx_11_0_arm64.whl", False),
    ("a-1.0-cp313-abi3-manylinux_2_17_x86_64.whl", False),  # abi3 from a newer Python
])
def test_only_wheels_the_devices_python_takes_are_bundled(wheel, takes):
    assert gpu_bundle.installs_on_device(wheel) is takes


def test_a_folder_that_is_not_a_bundle_is_never_replaced(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(gpu_bundle.BundleError, match="not a bundle"):
        gpu_bundle.fresh(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    (tmp_path / "notes.txt").unlink()
    gpu_bundle.fresh(tmp_path)  # an empty folder, then a bundle in the making
    (tmp_path / "wheels" / "old.whl").write_text("stale")
    gpu_bundle.fresh(tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bundle.json", "wheels"]


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(meta).decode().splitlines()
    found = [Requirement(line.split(":", 1)[1]) for line in lines
             if line.startswith("Requires-Dist:")]
    return [r for r in found if r.marker is None or r.marker.evaluate(gpu_bundle.DEVICE_MARKERS)]


@pytest.mark.slow
def test_a_bundle_installs_offline_for_the_devices_python(tmp_path: Path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "000_a.txt").write_text("# `test/test_a.py`\n\n```\nx = 1\n```")
    bundle = tmp_path / "bundle"
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_bundle.py"), "--out",
                           str(bundle), "--seeds", str(seeds)], capture_output=True, text=True,
                          timeout=600)
    if made.returncode == 2 and "pip download failed" in made.stderr:
        pytest.skip(f"PyPI not reachable: {made.stderr.strip()}")
    assert made.returncode == 0, made.stderr
    wheels = sorted((bundle / "wheels").glob("*.whl"))
    names = {canonicalize_name(w.name.split("-")[0]) for w in wheels}
    assert {"refimpl", "hypothesis", "pytest", "pytest-xdist", "expecttest"} <= names
    for wheel in wheels:  # closed: every requirement is bundled or on the device already
        missing = {canonicalize_name(r.name) for r in _requirements(wheel)} - names
        assert missing <= gpu_bundle.DEVICE_HAS, (wheel.name, missing)
    assert json.loads((bundle / "bundle.json").read_text())["seeds"] == ["000_a.txt"]
    assert (bundle / "seeds" / "000_a.txt").read_text() == (seeds / "000_a.txt").read_text()
    target = tmp_path / "site"
    device = ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi",
              "abi3", "--abi", "none", "--platform", "manylinux_2_17_x86_64", "--only-binary",
              ":all:"]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links",
         str(bundle / "wheels"), "--no-deps", *device, "--target", str(target), "-r",
         str(bundle / "requirements.txt")], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    assert (target / "refimpl" / "__init__.py").is_file()
    assert (target / "refimpl" / "properties").is_dir()  # the suite `refimpl fuzz` runs
    assert {"hypothesis", "_pytest", "xdist", "expecttest"} <= {p.name for p in target.iterdir()}


def test_the_bundle_refuses_a_seeds_folder_that_is_absent_before_touching_out(
        tmp_path: Path, capsys):
    assert gpu_bundle.main(["--out", str(tmp_path / "b"), "--seeds", str(tmp_path / "no")]) == 2
    assert capsys.readouterr().err == f"gpu_bundle.py: --seeds {tmp_path / 'no'}: not a folder\n"
    assert not (tmp_path / "b").exists()
