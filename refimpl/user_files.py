"""The user's files as a command meets them: the code it loads and the paths it writes.

Both are named by the user on the command line and both are found where the user runs the
command, so that a command works from the folder that holds the user's files and refuses a
name it cannot use up front, in one line naming the argument, before any work is done.

Loading code: ``refimpl fuzz --target mine:Backend``, the pytest route's
``--refimpl-target`` and ``refimpl flops mymodels:factory`` all name the user's code as
``module:attribute``. The module is imported as ``python -m`` would import it: the current
folder first on ``sys.path`` (added once), then the installed packages. Whatever the import
raises reaches the caller, who names the argument it came from.

Writing: every command that writes files (``refimpl flops --output``, ``refimpl pareto
--out``, ``refimpl fuzz --out``/``--junitxml``) checks the path first (:func:`file_problem`)
and refuses an unusable one (exit status 2), instead of failing with a traceback after
minutes of work or writing somewhere the user did not name.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
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


def file_problem(path: Path) -> str | None:
    """Why a file cannot be written at ``path``, or None: it is a folder, its folder does not
    exist, a part of its folder is a file, or the folder is not writable."""
    if path.is_dir():
        return f"{path} is a folder; name a file"
    folder = path.parent if str(path.parent) else Path(".")
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{path} lies under {existing}, which is a file"
    if existing != folder.absolute():
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    return None
