"""refimpl's own suite uses the same pytest plugin it ships to users.

The plugin (``refimpl.fuzz.pytest_plugin``) is registered through the ``pytest11`` entry
point when refimpl is installed; loading it here too keeps a plain source checkout working.

The suite runs under pytest-xdist (``pytest -n 2``), whose workers must collect the same test
ids: an id that prints an object's address (``<function <lambda> at 0x7f...>``) differs from
process to process, so collection refuses one, naming the test.
"""

import importlib.metadata
import re

import pytest

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


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
