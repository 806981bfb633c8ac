"""The property suite's layout: a top-level ``properties/`` folder, one package, one name.

The checkout keeps the suite in ``properties/`` (beside ``refimpl/``, ``tests/`` and
``benchmarks/``); setup.cfg installs it as ``refimpl.properties``, the name every import uses.
These check that the install maps it so (from a folder with no conftest), that setup.cfg lists
every package of ``refimpl/``, and that pytest collecting the checkout's files imports each
once, under its package name (the root conftest's ``SuiteModule``), with pytest's assertion
rewriting.
"""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

import pytest

import refimpl.properties
from refimpl.fuzz.suite import default_properties_dir

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "properties"

#: run in a subprocess: collect the given arguments, then list every module object whose file
#: lies in the suite, by the name it is registered under
COLLECT_AND_LIST = """
import json, sys
from pathlib import Path

import pytest
import pytest
suite = Path(sys.argv[1]).resolve()
code = pytest.main(sys.argv[2:])
names = {n: str(Path(m.__file__).resolve()) for n, m in list(sys.modules.items())
         if getattr(m, "__file__", None) and Path(m.__file__).resolve().parent == suite}
rewritten = sorted(n for n in names if hasattr(sys.modules[n], "@py_builtins"))
print(json.dumps({"code": int(code), "names": names, "rewritten": rewritten}))
"""


def _collect(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", COLLECT_AND_LIST, str(SUITE), "--collect-only", "-q",
         "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_install_maps_the_package_to_the_top_level_folder(tmp_path):
    """From a folder without this checkout's conftest, ``refimpl.properties`` is
    ``properties/`` (setup.cfg's package_dir, as the editable install writes it)."""
    done = subprocess.run(
        [sys.executable, "-c", "import refimpl.properties.reach as r; print(r.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == SUITE / "reach.py"
    assert not (ROOT / "refimpl" / "properties").exists(), (
        "a refimpl/properties/ folder would shadow the mapped properties/ as a namespace package")


def test_setup_cfg_lists_every_package_and_maps_the_suite():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "refimpl").rglob("__init__.py")}
    assert listed == on_disk | {"refimpl.properties"}
    lines = config["options"]["package_dir"].strip().splitlines()
    mapping = {key.strip(): value.strip() for key, _, value in (s.partition("=") for s in lines)}
    assert mapping == {"refimpl.properties": "properties"}
    assert (SUITE / "__init__.py").is_file()


def _named_once(found: dict) -> list[str]:
    """The suite's module names of a collection, checked: collection passed, every name is
    ``refimpl.properties`` or below it, and no file is registered under two names."""
    assert found["code"] == 0, found
    names = found["names"]
    assert [n for n in names if not n.startswith("refimpl.properties")] == [], names
    assert len(set(names.values())) == len(names), f"a file under two names: {names}"
    return sorted(names)


def test_collecting_the_checkout_imports_each_file_once_under_its_package_name():
    """By path and by ``--pyargs``, every suite module in ``sys.modules`` is
    ``refimpl.properties.*`` (never ``properties.*``), one name per file, and the test
    modules are assertion-rewritten."""
    found = _collect("properties/test_cse.py", "properties/test_layout.py")
    by_path = _named_once(found)
    collected = {"refimpl.properties.test_cse", "refimpl.properties.test_layout"}
    assert collected <= set(by_path) and collected <= set(found["rewritten"])
    every = _collect("--pyargs", "refimpl.properties")
    names = _named_once(every)
    tests = sorted(f"refimpl.properties.{p.stem}" for p in SUITE.glob("test_*.py"))
    assert [n for n in names if n.rpartition(".")[2].startswith("test_")] == tests
    assert set(tests) <= set(every["rewritten"])


#: run in a subprocess from the checkout: hide the editable install's finder (as a plain
#: checkout, or a wheel installed elsewhere, would have none), then load the root conftest
WITHOUT_THE_INSTALL = """
import importlib.util, sys
sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path.insert(0, sys.argv[1])
before = importlib.util.find_spec("refimpl.properties")
import conftest
import refimpl.properties.reach as reach
print(before is None, reach.__file__)
"""


def test_the_checkout_conftest_maps_the_suite_where_no_install_does(tmp_path):
    done = subprocess.run([sys.executable, "-c", WITHOUT_THE_INSTALL, str(ROOT)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    unmapped, reach_file = done.stdout.split()
    assert unmapped == "True", "the install's finder was not hidden: nothing is checked"
    assert Path(reach_file).resolve() == SUITE / "reach.py"


def test_a_stray_folder_shadowing_the_suite_is_named(monkeypatch, tmp_path):
    """A ``refimpl/properties/`` folder without ``__init__.py`` makes the name a namespace
    package (no ``__file__``), found before the install's mapping: the suite's folder is then
    refused, naming that folder, instead of a TypeError from ``Path(None)``."""
    stray = tmp_path / "refimpl" / "properties"
    monkeypatch.setattr(refimpl.properties, "__file__", None)
    monkeypatch.setattr(refimpl.properties, "__path__", [str(stray)])
    with pytest.raises(ImportError, match="stray folder") as raised:
        default_properties_dir()
    assert str(stray) in str(raised.value)


def _collected(*args: str) -> list[str]:
    """The node ids ``pytest --collect-only`` finds in this checkout for ``args``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_release_selection_leaves_every_target_property_to_the_fuzz():
    """CI's other releases run ``-m "not harness and not target"`` after their
    ``refimpl fuzz``: every test of the suite carries ``target`` (so none runs twice there),
    and the tests beside it do not (so none is lost)."""
    suite_file, other_file = "properties/test_cse.py", "tests/test_suite_layout.py"
    target = _collected(suite_file, other_file, "-m", "target")
    rest = _collected(suite_file, other_file, "-m", "not harness and not target")
    assert target and all(nodeid.startswith("properties/") for nodeid in target), target
    assert rest and all(nodeid.startswith("tests/") for nodeid in rest), rest
