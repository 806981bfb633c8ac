"""Where the property suite lives, and which of its files belong to each component.

A component's properties are the files ``test_<component>*.py`` in the suite's folder: the
installed ``refimpl.properties`` package unless ``--properties`` names another. A checkout
holds it at the top level, ``properties/``, which setup.cfg's ``package_dir`` installs (a wheel
or an editable install) as ``refimpl.properties``.
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
    """The folder of the installed ``refimpl.properties`` package (a wheel or a checkout);
    an error if that name resolved to a folder without ``__init__.py`` (a stray
    ``refimpl/properties/`` in a checkout shadows the mapped ``properties/``)."""
    if refimpl.properties.__file__ is None:
        raise ImportError(
            f"refimpl.properties is the folder {list(refimpl.properties.__path__)}, not the "
            "property suite: remove that stray folder (a checkout keeps the suite in "
            "properties/)")
    return Path(refimpl.properties.__file__).resolve().parent


def component_files(properties: Path, component: str) -> list[Path]:
    """The property files of ``component``, sorted; an error if the folder is missing."""
    if not properties.is_dir():
        raise FileNotFoundError(
            f"properties={str(properties)!r} is not a folder: pass --properties DIR naming a "
            "folder of test_<component>*.py property files (the default is refimpl.properties)")
    return sorted(properties.glob(f"test_{component}*.py"))
