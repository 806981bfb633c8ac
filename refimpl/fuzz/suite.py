"""Where the property suite lives, and which of its files belong to each component.

A component's properties are the files ``test_<component>*.py`` in the suite's folder
(``properties/`` of the source tree unless ``--properties`` names another).
"""

from __future__ import annotations

from pathlib import Path

import refimpl


def default_properties_dir() -> Path:
    """``properties/`` beside the installed ``refimpl`` package (an editable/source install)."""
    return Path(refimpl.__file__).resolve().parent.parent / "properties"


def component_files(properties: Path, component: str) -> list[Path]:
    """The property files of ``component``, sorted; an error if the folder is missing."""
    if not properties.is_dir():
        raise FileNotFoundError(
            f"properties={str(properties)!r} is not a folder: pass --properties DIR pointing at "
            "refimpl's properties/ (it ships in the source tree, not in the wheel)")
    return sorted(properties.glob(f"test_{component}*.py"))
