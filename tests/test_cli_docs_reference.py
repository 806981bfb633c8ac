"""The docs a newcomer reads first: the API reference covers every public name, the install
line names setup.cfg's torch floor, and no page links a file the built site does not hold."""

from __future__ import annotations

import configparser
import importlib
import re
from pathlib import Path

import pytest

import refimpl
import refimpl.oracle
import refimpl.strategies

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = (DOCS / "reference.md").read_text()
#: the objects mkdocstrings renders: "::: module.path.NAME" lines.
DIRECTIVES = re.findall(r"^::: (\S+)$", REFERENCE, flags=re.MULTILINE)
#: what a backend sets to state its promises, besides refimpl.oracle's names.
PROMISES = ("PartitionPromise", "CheckpointPromise", "FlopConventions")


def rendered(path: str):
    """The object a ``:::`` path names (the module, then the attribute)."""
    module_name, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def rendered_objects() -> dict[str, object]:
    return {path.rpartition(".")[2]: rendered(path) for path in DIRECTIVES}


def strategy_names() -> dict[str, list[str]]:
    """refimpl.strategies' public names, per submodule (the package finds them there)."""
    return {sub: list(importlib.import_module(f"refimpl.strategies.{sub}").__all__)
            for sub in refimpl.strategies.SUBMODULES}


@pytest.mark.parametrize("package", [refimpl, refimpl.oracle], ids=lambda p: p.__name__)
def test_each_public_name_is_rendered_from_its_docstring(package):
    objects = rendered_objects()
    missing = [name for name in package.__all__
               if name not in objects or objects[name] is not getattr(package, name)]
    assert missing == []


def test_the_promises_a_backend_states_are_rendered():
    assert set(PROMISES) <= set(rendered_objects())


def test_each_strategy_name_is_in_its_submodules_row():
    """The table row of each submodule names all of its public names, in backticks; every
    strategy (a lowercase function that is not a helper) is also rendered with ``:::``."""
    rows = {m.group(1): m.group(0) for m in
            re.finditer(r"^\| `(\w+)` \|.*$", REFERENCE, flags=re.MULTILINE)}
    objects = rendered_objects()
    for sub, names in strategy_names().items():
        assert sub in rows, f"no row for refimpl.strategies.{sub}"
        row_names = set(re.findall(r"`(\w+)`", rows[sub]))
        assert set(names) <= row_names, (sub, sorted(set(names) - row_names))
        strategies = re.search(r"^\| `\w+` \| ([^|]*)\|", rows[sub]).group(1)
        for name in re.findall(r"`(\w+)`", strategies):
            module = importlib.import_module(f"refimpl.strategies.{sub}")
            assert objects.get(name) is getattr(module, name), f"{sub}.{name} not rendered"


def test_getting_started_names_setup_cfgs_torch_floor():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    floor = re.search(r"torch>=([\d.]+)", config["options"]["install_requires"]).group(1)
    text = (DOCS / "getting-started.md").read_text()
    assert f"torch {floor} or newer" in text
    assert re.findall(r"torch (\d+\.\d+) or newer", text) == [floor]


def test_no_page_links_outside_the_site():
    """A link to ../ (a repository file outside docs/) is dead once the site is built."""
    outside = [f"{page.name}: {target}" for page in DOCS.glob("*.md")
               for target in re.findall(r"\]\((\.\./[^)\s]*)\)", page.read_text())]
    assert outside == []


def test_the_fuzz_workflow_is_inlined_from_the_repository():
    fuzzing = (DOCS / "fuzzing.md").read_text()
    assert '--8<-- ".github/workflows/fuzz.yml"' in fuzzing
    assert (ROOT / ".github" / "workflows" / "fuzz.yml").is_file()
