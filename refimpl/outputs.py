"""Where a command may write: output paths checked up front, before any work is done.

Every command that writes files (``refimpl flops --output``, ``refimpl pareto --out``,
``refimpl fuzz --out``/``--junitxml``) refuses an unusable path in one line naming the option
(exit status 2), instead of failing with a traceback after minutes of work or writing
somewhere the user did not name.
"""

from __future__ import annotations

import os
from pathlib import Path


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
