"""refimpl's packages form layers, and no import goes from a lower layer to a higher one.

Algorithm: every module under ``refimpl/`` is parsed with :mod:`ast` (never imported) and
every ``import``/``from ... import`` in it, at module level or inside a function, is read.
Each module belongs to a unit (its subpackage, or its own name for a top-level module); an
import of another unit is allowed only when that unit sits in a strictly lower layer. Two
units in the same layer are independent: neither imports the other. ``from refimpl import
name`` goes through the package's lazy facade (``refimpl/__init__.py``); it is read as an
import of the facade itself.

Invariant checked: the arrows of the import graph all point down ``LAYERS``, so the graph
has no cycle between units and a lower layer can be read (and tested) without the ones above.

The same holds module by module (:func:`import_circles`): inside a unit too, no module
imports, directly or through others, a module that imports it back.

The package's files: ``refimpl/`` and the property suite, the top-level ``properties/`` folder
shipped as ``refimpl.properties`` (setup.cfg maps the package there); both are read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "refimpl"

#: The layers, lowest first. A unit may import only units of strictly lower layers.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: the activation meter, the user's files (code loaded, output paths), the model zoo
    ("memory", "user_files", "models"),
    # the FLOP formula table and counter (its command line reads the model zoo and output
    # checks); the one conv FLOP formula lives here and the layout pass reads it
    ("flops",),
    # three of the five systems
    ("cse", "layout", "checkpointing"),
    # the partitioner: its cost model counts FLOPs, it runs CSE and the layout pass
    ("partition",),
    # the Pareto sweep over the partitioner's budgets
    ("pareto",),
    # the Hypothesis strategies: torch and hypothesis only
    ("strategies",),
    # the independent expectations (a checkpoint prediction is over a strategy's ModuleStack)
    ("expect",),
    # the lazy public facade: its names reach every system and the accuracy rule in expect
    ("refimpl",),
    # the backends under test and the oracle's targets (which state their promises as expect data)
    ("oracle",),
    # the property suite
    ("properties",),
    # `refimpl fuzz`, the pytest plugin and the Hypothesis profiles
    ("fuzz",),
    # the command line
    ("cli",),
)

#: (importing module, imported module) pairs allowed to point upwards. Empty: every arrow in
#: the package points down. An entry needs a comment arguing why the layering cannot hold.
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()

RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}

#: Top-level modules that belong to another unit.
_ALIASES = {"__main__": "cli"}


def module_name(path: Path, root: Path = ROOT, prefix: tuple[str, ...] = ("refimpl",)) -> str:
    """The dotted name of the module at ``path`` of the package ``prefix`` held in ``root``."""
    parts = prefix + path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module of the package whose checkout folder is ``root``,
    and of its property suite where that lies beside it (``root/../properties``)."""
    files = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    suite = root.parent / "properties"
    if (suite / "__init__.py").is_file():
        files |= {module_name(path, suite, ("refimpl", "properties")): path
                  for path in sorted(suite.rglob("*.py"))}
    return files


def package_of(module: str, path: Path) -> str:
    """The package a module's relative imports start from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def unit_of(module: str) -> str | None:
    """The unit of a dotted module name inside refimpl; None outside refimpl."""
    parts = module.split(".")
    if parts[0] != "refimpl":
        return None
    if len(parts) == 1:
        return "refimpl"
    return _ALIASES.get(parts[1], parts[1])


def imported_modules(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in ``tree``, relative imports resolved."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.append((node.lineno, target))
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import under ``root`` that points to a layer higher than (or beside) its own."""
    wrong = []
    for module, path in package_files(root).items():
        unit = unit_of(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in imported_modules(tree, package_of(module, path)):
            target_unit = unit_of(target)
            if target_unit is None or target_unit == unit:
                continue
            if unit not in RANK or target_unit not in RANK:
                wrong.append(f"{module}:{line} imports {target}: unit not in LAYERS")
            elif RANK[target_unit] >= RANK[unit] and (module, target) not in ALLOWED_UPWARD:
                wrong.append(f"{module}:{line} ({unit}, layer {RANK[unit]}) imports {target} "
                             f"({target_unit}, layer {RANK[target_unit]})")
    return wrong


def test_every_unit_is_placed_in_a_layer():
    units = {unit_of(module) for module in package_files()}
    assert units - set(RANK) == set(), "a new package or module needs a place in LAYERS"
    assert set(RANK) - units == set(), "LAYERS names a unit that no longer exists"


def test_no_import_points_up_the_layers():
    assert upward_imports(ROOT) == []


def test_an_upward_import_is_found(tmp_path):
    """The checker itself: a copy of the package with one added import from a lower layer to
    a higher one (and one inside a function) fails, naming both."""
    copy = tmp_path / "refimpl"
    for path in ROOT.rglob("*.py"):
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    assert upward_imports(copy) == []
    (copy / "memory.py").write_text((copy / "memory.py").read_text()
                                    + "\nfrom refimpl.oracle import load_backend\n")
    (copy / "expect" / "same.py").write_text((copy / "expect" / "same.py").read_text()
                                             + "\ndef f():\n    from ..fuzz import cli\n")
    wrong = upward_imports(copy)
    assert len(wrong) == 2
    assert any(w.startswith("refimpl.memory:") and "refimpl.oracle" in w for w in wrong)
    assert any(w.startswith("refimpl.expect.same:") and "imports refimpl.fuzz " in w for w in wrong)


#: the systems the expectations judge (issue 29): an expectation computed by the code it
#: checks would agree with that code's bugs, so ``refimpl/expect/`` imports none of them
JUDGED_SYSTEMS = ("cse", "flops", "partition", "checkpointing", "layout")


def judged_imports(root: Path) -> list[str]:
    """Every import under ``root/expect`` (module level or inside a function) that reaches a
    judged system: ``import refimpl.cse``, ``from refimpl.cse.effects import x``, ``from
    refimpl import cse``, ``from ..layout import backend``."""
    wrong = []
    for path in sorted((root / "expect").rglob("*.py")):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in imported_modules(tree, package_of(module, path)):
            names = [target] + [f"{target}.{name}" for name in _imported_names(tree, line)]
            reached = sorted({unit_of(n) for n in names} & set(JUDGED_SYSTEMS))
            if reached:
                wrong.append(f"{module}:{line} imports {target} (judged system {reached[0]})")
    return wrong


def _imported_names(tree: ast.AST, line: int) -> list[str]:
    """The names of the ``from ... import`` statements on ``line``."""
    return [alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.lineno == line
            for alias in node.names]


def test_expectations_import_no_system_they_judge():
    assert judged_imports(ROOT) == []


def test_an_expectation_importing_a_judged_system_is_found(tmp_path):
    """The checker itself: each way of reaching a judged system, at module level or inside a
    function, is found, and an import of the strategies (allowed) is not."""
    copy = tmp_path / "refimpl"
    (copy / "expect").mkdir(parents=True)
    (copy / "expect" / "judge.py").write_text(
        "import refimpl.cse\n"
        "from refimpl.strategies import op_graphs\n"
        "from refimpl import flops\n"
        "def f():\n    from ..layout.backend import compile_for\n"
        "def g():\n    from refimpl.checkpointing import checkpoint\n"
        "from .. import partition\n")
    wrong = judged_imports(copy)
    assert sorted(w.split(" (judged system ")[1].rstrip(")") for w in wrong) == sorted(
        JUDGED_SYSTEMS), wrong


# --- import circles, module by module ---------------------------------------------------

@dataclass(frozen=True)
class Edge:
    """One import statement of ``source`` that reaches the module ``target``."""

    source: str
    line: int
    target: str
    in_function: bool  # inside a def or lambda: runs when called, not when imported


def import_edges(root: Path = ROOT) -> list[Edge]:
    """Every import of one package module by another, read with :mod:`ast`.

    Each ``import a.b`` names module ``a.b``; ``from a import b`` names module ``a.b`` where
    that is a module, else ``a`` (``b`` is an attribute of it); relative imports are
    resolved. The parent packages an import runs on the way (``a/__init__.py`` for ``a.b``)
    are not edges: every submodule would form a circle with a package that re-exports it.
    Imports inside functions are edges too (marked ``in_function``): they run later, but a
    module that needs another which needs it back is one concept split across two files
    whichever way the import is written.
    """
    files = package_files(root)
    edges = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, in_function in _import_nodes(tree):
            for target in _targets(node, package_of(module, path), files):
                if target != module:
                    edges.append(Edge(module, node.lineno, target, in_function))
    return edges


def _import_nodes(tree: ast.AST, in_function: bool = False):
    """(import statement, whether it sits inside a def or lambda) of every import in
    ``tree``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
        yield from _import_nodes(child, inside)


def _targets(node: ast.Import | ast.ImportFrom, package: str, files: dict[str, Path]):
    """The package modules one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        (_, base), = imported_modules(node, package)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                 for alias in node.names]
    return sorted({name for name in names if name in files})


def circles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm: a
    depth-first search in which ``low[v]`` is the earliest search index reachable from
    ``v``'s subtree through the stack; ``v`` roots a component when ``low[v]`` is its own
    index). Invariant: a module is in a returned component iff it lies on an import
    circle."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_circles(root: Path = ROOT) -> list[str]:
    """One paragraph per circle: its modules, then each import between two of them."""
    edges = import_edges(root)
    report = []
    for component in circles(edges):
        inside = [e for e in edges if e.source in component and e.target in component]
        lines = [f"{e.source}:{e.line} imports {e.target}"
                 + (" (inside a function)" if e.in_function else "") for e in inside]
        report.append(f"circle of {len(component)} modules: {', '.join(component)}\n  "
                      + "\n  ".join(lines))
    return report


def test_no_import_circle():
    found = import_circles()
    assert found == [], "\n" + "\n".join(found)


def _copy_package(tmp_path: Path) -> Path:
    """A copy of the package's modules in one folder, the property suite in its place."""
    copy = tmp_path / "refimpl"
    for module, path in package_files().items():
        parts = module.split(".")[1:]
        target = (copy.joinpath(*parts, "__init__.py") if path.name == "__init__.py"
                  else copy.joinpath(*parts[:-1], parts[-1] + ".py"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    return copy


def test_an_import_circle_is_found(tmp_path):
    """The checker itself: a copy of the package (property suite included) has no circle;
    with ``memory`` importing ``models`` at module level and ``models`` importing ``memory``
    back through a relative import inside a function, it has one, printed with the two
    imports that close it."""
    copy = _copy_package(tmp_path)
    assert import_circles(copy) == []
    (copy / "memory.py").write_text((copy / "memory.py").read_text()
                                    + "\nimport refimpl.models\n")
    (copy / "models.py").write_text((copy / "models.py").read_text()
                                    + "\ndef f():\n    from . import memory\n")
    found = import_circles(copy)
    assert len(found) == 1, found
    assert found[0].startswith("circle of 2 modules: refimpl.memory, refimpl.models\n")
    assert "refimpl.memory:" in found[0] and " imports refimpl.models\n" in found[0]
    assert found[0].endswith("imports refimpl.memory (inside a function)")


def test_an_import_of_a_name_reaches_the_package_not_a_module(tmp_path):
    """``from refimpl.oracle import load_backend`` is an edge to ``refimpl.oracle`` (the
    package's ``__init__``), ``from refimpl.oracle import backend`` one to the module."""
    copy = _copy_package(tmp_path)
    (copy / "memory.py").write_text("from refimpl.oracle import load_backend, backend\n")
    targets = {e.target for e in import_edges(copy) if e.source == "refimpl.memory"}
    assert targets == {"refimpl.oracle", "refimpl.oracle.backend"}
