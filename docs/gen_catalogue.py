"""Generate the property catalogue (docs/properties.md) from the property suite itself.

For each component (``refimpl.oracle.backend.COMPONENTS``) the catalogue lists the files
``refimpl fuzz`` runs for it (``refimpl.fuzz.suite.component_files``), each property's
docstring read from the source with ``ast`` (nothing is imported or run), the built-in targets
whose backend class provides the component's method, and, when a ``report.json`` written by
``refimpl fuzz`` is given, each property's reach and example count in that campaign.

Invariant: every ``test_*`` function of every component's file appears exactly once, under
its file's docstring (which states what the file's properties check); a property without a
docstring of its own says so in the page rather than showing an empty cell.

Run by MkDocs (``hooks:`` in mkdocs.yml: the page is generated afresh at build time; set
``REFIMPL_CATALOGUE_REPORT=path/to/report.json`` for the reach column) or by hand. A copy
without reach is checked in as docs/properties.md, so links to it resolve in a clone; a test
keeps it equal to what this script writes:

    python docs/gen_catalogue.py --write docs/properties.md
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.suite import component_files, default_properties_dir
from refimpl.oracle.backend import ALTERNATIVES, COMPONENTS
from refimpl.oracle.registry import BUILTIN_TARGETS

PAGE = "properties.md"
REPORT_VARIABLE = "REFIMPL_CATALOGUE_REPORT"


@dataclass(frozen=True)
class Property:
    """One property as the catalogue shows it."""

    component: str
    file: str  # e.g. "test_cse.py"
    name: str
    doc: str  # "" where the function has no docstring of its own


def read_properties(folder: Path) -> tuple[list[Property], dict[str, str]]:
    """(every ``test_*`` function of every component's files in file and source order,
    file name -> the file's docstring)."""
    found, file_docs = [], {}
    for comp in COMPONENTS:
        for path in component_files(folder, comp):
            tree = ast.parse(path.read_text(), filename=str(path))
            file_docs[path.name] = ast.get_docstring(tree) or ""
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    doc = ast.get_docstring(node) or ""
                    found.append(Property(comp, path.name, node.name, doc))
    return found, file_docs


def _class_node(module_name: str, class_name: str) -> tuple[ast.ClassDef, dict[str, str]]:
    """The class's ``ast`` node in its module's source, and the module's ``from refimpl...``
    imports (name -> module), read without importing the module."""
    spec = importlib.util.find_spec(module_name)
    tree = ast.parse(Path(spec.origin).read_text(), filename=spec.origin)
    imported = {alias.asname or alias.name: node.module for node in tree.body
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("refimpl")
                for alias in node.names}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return node, imported
    raise LookupError(f"{module_name} defines no class {class_name}")


def class_methods(module_name: str, class_name: str) -> set[str]:
    """Names a class defines, its own and its refimpl bases', read from the source.

    Static on purpose: a FLOP peer's adapter imports its optional package when built, and the
    page must not depend on which extras the machine that builds it has installed."""
    node, imported = _class_node(module_name, class_name)
    names = {item.name for item in node.body
             if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {target.id for item in node.body if isinstance(item, ast.Assign)
              for target in item.targets if isinstance(target, ast.Name)}
    for base in node.bases:
        if isinstance(base, ast.Name):
            names |= class_methods(imported.get(base.id, module_name), base.id)
    return names


def targets_with(method: str) -> list[str]:
    """Built-in targets whose backend class defines ``method``, with the extra each needs."""
    have = []
    for name, entry in BUILTIN_TARGETS.items():
        module_name, _, class_name = entry.factory.partition(":")
        if method in class_methods(module_name, class_name):
            have.append(f"`{name}`" + (f" (extra `{entry.extra}`)" if entry.extra else ""))
    return have


def read_reach(report: Path) -> dict[str, str]:
    """``file::name`` -> "reach 0.93 over 15 examples" from a ``refimpl fuzz`` report.json."""
    data = json.loads(report.read_text())
    profile = data.get("options", {}).get("profile")
    cells = {}
    for row in data["properties"]:
        key = row["nodeid"].rsplit("/", 1)[-1]
        if row["outcome"] in ("skipped", "not run"):
            cells[key] = f"{row['outcome']} ({row['reason']})"
        elif row["reach"] is None:
            cells[key] = f"no reach recorded ({row['examples']} examples)"
        else:
            cells[key] = f"{row['reach']:.2f} of {row['examples']} examples ({profile} profile)"
    return cells


def _component_section(comp: str, props: list[Property], file_docs: dict[str, str],
                       reach: dict[str, str] | None) -> str:
    methods = [COMPONENTS[comp], *ALTERNATIVES.get(comp, ())]
    have = [t for m in methods for t in targets_with(m)]
    named = " or ".join(f"`{m}`" for m in methods)
    lines = [f"## {comp}", "",
             f"Backend method: {named}. Built-in targets that provide it: "
             f"{', '.join(dict.fromkeys(have)) or 'none'}.", ""]
    for file in dict.fromkeys(p.file for p in props):
        lines += [f"### `properties/{file}`", "", file_docs[file] or "(no docstring)", ""]
        for prop in (p for p in props if p.file == file):
            lines += [f"#### `{prop.name}`", ""]
            if reach is not None:
                lines += [f"*Reach:* {reach.get(f'{file}::{prop.name}', 'not in the report')}",
                          ""]
            lines += [prop.doc or "No docstring of its own: see its file's docstring above.", ""]
    return "\n".join(lines)


def catalogue_markdown(folder: Path, report: Path | None) -> str:
    """The whole catalogue page."""
    props, file_docs = read_properties(folder)
    reach = read_reach(report) if report is not None else None
    intro = [
        "# Property catalogue", "",
        "Generated from the property suite by `docs/gen_catalogue.py`: do not edit by hand.",
        f"{len(props)} properties. Each takes the backend under test; a backend that lacks a",
        "component's method has all of that component's properties reported as skipped.",
        "",
        ("*Reach* is the share of examples that reached the case the property was written for, "
         f"read from `{report.name}`." if report is not None else
         "No `refimpl fuzz` report was given, so reach is not shown: build with "
         f"`{REPORT_VARIABLE}=fuzz-out/report.json` after `refimpl fuzz --target refimpl "
         "--profile ci` to add it."),
        "",
    ]
    sections = [_component_section(c, [p for p in props if p.component == c], file_docs, reach)
                for c in COMPONENTS]
    return "\n".join(intro) + "\n" + "\n\n".join(sections) + "\n"


def _report_from_environment() -> Path | None:
    value = os.environ.get(REPORT_VARIABLE)
    if not value:
        return None
    path = Path(value)
    if not path.is_file():
        raise FileNotFoundError(f"{REPORT_VARIABLE}={value!r} is not a file")
    return path


def on_files(files, config):
    """MkDocs hook: add the generated catalogue page to the site."""
    from mkdocs.structure.files import File

    content = catalogue_markdown(default_properties_dir(), _report_from_environment())
    committed = files.get_file_from_path(PAGE)
    if committed is not None:
        files.remove(committed)  # the checked-in copy (no reach) is replaced by a fresh one
    files.append(File.generated(config, PAGE, content=content))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="a report.json written by refimpl fuzz")
    parser.add_argument("--write", type=Path, help="write the page here (default: stdout)")
    args = parser.parse_args(argv)
    if args.report is not None and not args.report.is_file():
        parser.error(f"--report {args.report}: not a file")
    text = catalogue_markdown(default_properties_dir(), args.report)
    if args.write is None:
        sys.stdout.write(text)
    else:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
