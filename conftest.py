"""refimpl's own suite uses the same pytest plugin it ships to users.

The plugin (``refimpl.fuzz.pytest_plugin``) is registered through the ``pytest11`` entry
point when refimpl is installed; loading it here too keeps a plain source checkout working.

The suite runs under pytest-xdist (``pytest -n 2``), whose workers must collect the same test
ids: an id that prints an object's address (``<function <lambda> at 0x7f...>``) differs from
process to process, so collection refuses one, naming the test.

Tests of the harness's own machinery (the fuzz campaign, the command line's files, the docs
build, the GPU scripts' plumbing) are marked ``harness``: they exercise pure Python around
torch and give the same answer on every torch release, so CI runs them on the default release
only and the other releases run ``-m "not harness"``.
"""

import fnmatch
import importlib.metadata
import re
from pathlib import Path

import pytest

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
HARNESS_FILES = ("test_fuzz*.py", "test_cli_*.py", "test_gpu_*.py", "test_plugin_markers.py",
                 "test_profiles.py", "test_repository_citations.py", "test_getting_started.py")


def _plugin_is_installed() -> bool:
    return any(ep.value.startswith("refimpl.fuzz.pytest_plugin")
               for ep in importlib.metadata.entry_points(group="pytest11"))


pytest_plugins = [] if _plugin_is_installed() else ["refimpl.fuzz.pytest_plugin"]


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
