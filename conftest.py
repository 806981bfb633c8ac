"""refimpl's own suite uses the same pytest plugin it ships to users.

The plugin (``refimpl.testing.pytest_plugin``) is registered through the ``pytest11`` entry
point when refimpl is installed; loading it here too keeps a plain source checkout working.
"""

import importlib.metadata


def _plugin_is_installed() -> bool:
    return any(ep.value.startswith("refimpl.testing.pytest_plugin")
               for ep in importlib.metadata.entry_points(group="pytest11"))


pytest_plugins = [] if _plugin_is_installed() else ["refimpl.testing.pytest_plugin"]
