"""refimpl's own suite uses the same pytest plugin it ships to users.

The plugin (``refimpl.fuzz.pytest_plugin``) is registered through the ``pytest11`` entry
point when refimpl is installed; loading it here too keeps a plain source checkout working.

The suite runs under pytest-xdist (``pytest -n 2``), whose workers must collect the same test
ids: an id that prints an object's address (``<function <lambda> at 0x7f...>``) differs from
process to process, so collection refuses one, naming the test.

Tests of the harness's own machinery (the fuzz campaign, the command line's files, the docs
build, the GPU scripts' plumbing) are marked ``harness``: they exercise pure Python around
torch and give the same answer on every torch release, so CI runs them on the default release
only. The target properties (every test of ``properties/``: each takes the backend under test)
are marked ``target``: on the other releases CI runs them once, in ``refimpl fuzz``, whose
report the reach tests read, so the test command there is ``-m "not harness and not target"``.

The property suite sits at the top level (``properties/``) and installs as
``refimpl.properties`` (setup.cfg's ``package_dir``). pytest would name a file of it by its
folders, ``properties.test_cse``, a second module beside the ``refimpl.properties.test_cse``
that refimpl, the fuzz campaign and the reproducers import: two objects, with module-level
state (registries, counters) split between them. So this checkout collects the suite's files
as plain folders and modules (:func:`pytest_collect_directory`) and imports each under its
package name (:class:`SuiteModule`); tests/test_suite_layout.py fails if any file of the suite
is imported under a second name.
"""

import fnmatch
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
HARNESS_FILES = ("test_fuzz*.py", "test_cli_*.py", "test_gpu_*.py", "test_plugin_markers.py",
                 "test_profiles.py", "test_repository_citations.py", "test_getting_started.py")
#: the property suite of this checkout, and the package it installs as
SUITE = Path(__file__).resolve().parent / "properties"
SUITE_PACKAGE = "refimpl.properties"


def _plugin_is_installed() -> bool:
    return any(ep.value.startswith("refimpl.fuzz.pytest_plugin")
               for ep in importlib.metadata.entry_points(group="pytest11"))


pytest_plugins = [] if _plugin_is_installed() else ["refimpl.fuzz.pytest_plugin"]


def _map_the_suite() -> None:
    """Import ``refimpl.properties`` from :data:`SUITE` when no install maps it: a plain
    checkout on ``sys.path``, or an install elsewhere shadowed by this checkout's ``refimpl/``
    (``python -m pytest`` puts the checkout first). It is what setup.cfg's mapping does."""
    if SUITE_PACKAGE in sys.modules or importlib.util.find_spec(SUITE_PACKAGE) is not None:
        return
    spec = importlib.util.spec_from_file_location(
        SUITE_PACKAGE, SUITE / "__init__.py", submodule_search_locations=[str(SUITE)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[SUITE_PACKAGE] = module
    spec.loader.exec_module(module)


_map_the_suite()


class SuiteModule(pytest.Module):
    """A file of this checkout's property suite, imported by its package name
    (``refimpl.properties.<stem>``) instead of by its folders; refused when that name is
    another file (refimpl installed from another checkout)."""

    def _getobj(self):
        name = f"{SUITE_PACKAGE}.{self.path.stem}"
        module = importlib.import_module(name)
        if Path(module.__file__).resolve() != self.path.resolve():
            raise self.CollectError(
                f"{name} imports {module.__file__}, not this checkout's {self.path}: "
                "install this checkout (pip install -e .)")
        self.config.pluginmanager.consider_module(module)
        return module


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Dir | None:
    """The suite's folder as a plain folder: a ``Package`` would import its ``__init__.py``
    as a top-level ``properties``."""
    return pytest.Dir.from_parent(parent, path=path) if path == SUITE else None


def pytest_pycollect_makemodule(module_path: Path,
                                parent: pytest.Collector) -> SuiteModule | None:
    return (SuiteModule.from_parent(parent, path=module_path)
            if module_path.parent == SUITE else None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unstable = [item.nodeid for item in items if ADDRESS.search(item.nodeid)]
    if unstable:
        raise pytest.UsageError(
            "test ids must not contain object addresses (pytest-xdist workers would collect "
            "different tests); give these an `ids=` function: " + ", ".join(unstable))
    for item in items:
        name = Path(str(item.path)).name
        if any(fnmatch.fnmatch(name, pattern) for pattern in HARNESS_FILES):
            item.add_marker(pytest.mark.harness)
        if Path(str(item.path)).parent == SUITE:
            item.add_marker(pytest.mark.target)
