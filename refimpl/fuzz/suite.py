"""Where the property suite lives, and which of its files belong to each component.

A component's properties are the files ``test_<component>*.py`` in the suite's folder
(``refimpl/properties/`` of the source tree unless ``--properties`` names another).
"""

from __future__ import annotations

from pathlib import Path

import refimpl.properties

#: the installed property suite, as a reproducer names it
PACKAGE = refimpl.properties.__name__


def properties_folder(name: str) -> Path:
    """``name`` as a folder: the installed suite for :data:`PACKAGE`, else a path."""
    return default_properties_dir() if name == PACKAGE else Path(name)


def default_properties_dir() -> Path:
    """The folder of the installed ``refimpl.properties`` package (a wheel or a checkout)."""
    return Path(refimpl.properties.__file__).resolve().parent


def component_files(properties: Path, component: str) -> list[Path]:
    """The property files of ``component``, sorted; an error if the folder is missing."""
    if not properties.is_dir():
        raise FileNotFoundError(
            f"properties={str(properties)!r} is not a folder: pass --properties DIR naming a "
            "folder of test_<component>*.py property files (the default is refimpl.properties)")
    return sorted(properties.glob(f"test_{component}*.py"))
