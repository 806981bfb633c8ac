"""Loading the user's own code: ``module:attribute`` found where the user runs the command.

``refimpl fuzz --target mine:Backend``, the pytest route's ``--refimpl-target`` and
``refimpl flops mymodels:factory`` all name the user's code this way. The module is imported
as ``python -m`` would import it: the current folder first on ``sys.path`` (added once), then
the installed packages. Whatever the import raises reaches the caller, who names the
argument it came from.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def split_spec(spec: str) -> tuple[str, str]:
    """``"pkg.module:attribute"`` -> ("pkg.module", "attribute"); ValueError unless both
    parts are present."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{spec!r}: expected 'package.module:attribute'")
    return module_name, attribute


def import_attribute(spec: str) -> Any:
    """The attribute ``spec`` names, its module imported with the current folder first on
    ``sys.path``. Raises what the import raises (any exception), or AttributeError."""
    module_name, attribute = split_spec(spec)
    folder = os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise AttributeError(f"module {module_name!r} has no attribute {attribute!r}") from None
