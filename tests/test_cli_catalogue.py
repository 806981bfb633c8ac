"""docs/gen_catalogue.py lists every property of the suite once, under its component."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROPERTIES = ROOT / "properties"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_catalogue", ROOT / "docs/gen_catalogue.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_catalogue", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _all_property_names() -> set[str]:
    names = set()
    for path in PROPERTIES.glob("test_*.py"):
        tree = ast.parse(path.read_text())
        names |= {f"{path.name}::{n.name}" for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    return names


def test_every_property_appears_exactly_once():
    props, _ = _load_generator().read_properties(PROPERTIES)
    listed = [f"{p.file}::{p.name}" for p in props]
    assert len(listed) == len(set(listed))
    assert set(listed) == _all_property_names()


def test_reach_is_read_from_a_report(tmp_path):
    gen = _load_generator()
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"options": {"profile": "ci"}, "properties": [
        {"nodeid": "properties/test_cse.py::test_cse_is_sound", "outcome": "passed",
         "examples": 15, "reach": 0.6, "reason": ""},
        {"nodeid": "properties/test_cse.py::test_cse_is_idempotent", "outcome": "skipped",
         "examples": 0, "reach": None, "reason": "component not provided"}]}))
    page = gen.catalogue_markdown(PROPERTIES, report)
    assert "*Reach:* 0.60 of 15 examples (ci profile)" in page
    assert "*Reach:* skipped (component not provided)" in page
    assert "*Reach:* not in the report" in page


def test_the_checked_in_catalogue_is_current():
    """docs/properties.md equals a fresh generation: regenerate with
    ``python docs/gen_catalogue.py --write docs/properties.md``."""
    fresh = _load_generator().catalogue_markdown(PROPERTIES, None)
    assert (ROOT / "docs" / "properties.md").read_text() == fresh


def test_static_methods_agree_with_the_imported_classes():
    """The page reads each target's methods from source (so it is the same whichever extras
    are installed); for every target importable here that reading matches the class."""
    from refimpl.oracle.backend import COMPONENTS
    from refimpl.oracle.registry import BUILTIN_TARGETS

    gen = _load_generator()
    checked = 0
    for name, entry in BUILTIN_TARGETS.items():
        module_name, _, class_name = entry.factory.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except ImportError:
            continue
        static = gen.class_methods(module_name, class_name)
        for method in COMPONENTS.values():
            assert (method in static) == hasattr(cls, method), (name, method)
        checked += 1
    assert checked >= 8  # refimpl, torch, inductor, the checkpoint targets, fx-cse-pass
