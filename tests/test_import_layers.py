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
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "refimpl"

#: The layers, lowest first. A unit may import only units of strictly lower layers.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: the activation meter, output-path checks, the model zoo, the user's code loader
    ("memory", "outputs", "models", "user_code"),
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


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


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
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        unit = unit_of(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in imported_modules(tree, package):
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
    units = {unit_of(module_name(path)) for path in ROOT.rglob("*.py")}
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
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in imported_modules(tree, package):
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
