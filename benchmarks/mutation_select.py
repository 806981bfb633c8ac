"""Which target properties can kill a mutant: per-test line coverage of the mutated modules.

A mutant differs from the unmutated tree in one place. A test whose run never executes the
changed statement runs exactly as on the unmutated tree (the ``ci`` profile is derandomised
and has no example database, so it draws the same examples), so it passes there too and
cannot kill the mutant. Running only the tests that execute the change is therefore exact,
not a sample, and it is what makes 40 mutants a component fit a nightly job.

Algorithm:
  1. baseline (:class:`LineTracer`, a pytest plugin): the unmutated killing suite runs once
     under ``sys.settrace``; for each test, the lines of the mutated modules it executes,
     and its duration, are written to ``coverage.json``;
  2. per mutant (:func:`changed_lines`): the mutated file is diffed against its pristine
     copy; each changed line widens to its whole statement (:func:`statement_lines`: a
     multi-line expression reports one line when it runs);
  3. :func:`select_tests`: the tests that executed any of those lines, fastest first (the suite
     stops at the first failure). Every test is selected for a change that may reach any
     test: one outside every function body (a module constant, a decorator, a default
     argument: it runs at import), or one executed outside a test's call (at collection, or
     in a fixture's setup: the backend under test is built once, in the first test's setup),
     or one inside a cached function (``@cache``, ``@lru_cache``: its result, computed in one
     test, is reused by tests that never run its body).
Invariant: a test left out never executed the changed statement, so it passes on the mutant.
It rests on one assumption: no result the mutated modules compute in one test is reused by
another, except through a function cached by decorator (every test is selected for those).
"""

from __future__ import annotations

import ast
import difflib
import json
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

#: every test of the killing suite: a change that runs at import
EVERY_TEST = "*"
#: the coverage key of lines run outside a test's call: collection, and fixtures' setup
SHARED = "<outside a test's call>"


class LineTracer:
    """pytest plugin: the lines of ``paths`` (relative to ``root``) each test executes."""

    def __init__(self, root: Path, paths: list[str], out: Path):
        self.root, self.out = root.resolve(), out
        self.files = {str((self.root / p).resolve()): p for p in paths}
        self.current = SHARED  # the running test's node id, or SHARED
        self.lines: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        self.seconds: dict[str, float] = defaultdict(float)

    def _local(self, frame, event, arg):
        if event == "line":
            path = self.files[frame.f_code.co_filename]
            self.lines[self.current][path].add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        return self._local if frame.f_code.co_filename in self.files else None

    def pytest_sessionstart(self, session):
        threading.settrace(self._global)
        sys.settrace(self._global)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.current = SHARED
        sys.settrace(self._global)  # a library may have replaced it between tests

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        self.current = item.nodeid

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):
        self.current = SHARED

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session):
        sys.settrace(None)
        threading.settrace(None)
        data = {"lines": {test: {p: sorted(ls) for p, ls in files.items()}
                          for test, files in self.lines.items()},
                "seconds": dict(self.seconds)}
        self.out.write_text(json.dumps(data, indent=1, sort_keys=True))


#: decorators whose function's result one test may compute and another reuse
CACHING_DECORATORS = {"cache", "lru_cache", "cached_property"}


def _caches(function: ast.AST) -> bool:
    """Whether a function is cached by one of :data:`CACHING_DECORATORS` (``@cache``,
    ``@functools.lru_cache(...)``)."""
    for decorator in getattr(function, "decorator_list", ()):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in CACHING_DECORATORS:
            return True
    return False


def statement_lines(source: str, line: int) -> set[int] | None:
    """The lines of the innermost statement of a function body holding ``line`` (a compound
    statement: its header only), or None when ``line`` may affect any test: it runs at
    import (outside every function body: module and class level, decorators, default
    arguments), or in the body of a cached function (:func:`_caches`)."""
    tree = ast.parse(source)
    best: ast.stmt | None = None
    in_body = False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            if body[0].lineno <= line <= max(b.end_lineno for b in body):
                if _caches(node):
                    return None
                in_body = True
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            end = _header_end(node)
            if line <= end and (best is None or node.lineno >= best.lineno):
                best = node
    if not in_body or best is None:
        return None
    return set(range(best.lineno, _header_end(best) + 1))


def _header_end(node: ast.stmt) -> int:
    """The last line of a statement's own code: a compound statement's header ends before
    its first body statement."""
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return body[0].lineno - 1
    return node.end_lineno


def changed_lines(pristine: str, mutated: str) -> set[int]:
    """1-based lines of ``pristine`` that the mutation replaced or inserted next to."""
    old, new = pristine.splitlines(), mutated.splitlines()
    changed: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return changed


class _Unannotated(ast.NodeTransformer):
    """An AST with every annotation removed (arguments, returns, annotated assignments)."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node):
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AnnAssign:
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)


def only_annotations(pristine: str, mutated: str) -> bool:
    """True when the mutation changed annotations only, in a module with
    ``from __future__ import annotations``: they stay strings, never evaluated, so the
    mutant is equivalent by construction (no run needed)."""
    tree = ast.parse(pristine)
    postponed = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                    and any(alias.name == "annotations" for alias in node.names)
                    for node in tree.body)
    strip = lambda source: ast.dump(_Unannotated().visit(ast.parse(source)))
    return postponed and pristine != mutated and strip(pristine) == strip(mutated)


def select_tests(coverage: dict, path: str, pristine: str, mutated: str) -> list[str]:
    """The node ids of the tests that can kill this mutant of ``path``, fastest first
    (module docstring); ``[EVERY_TEST]`` when the change runs at import."""
    wanted: set[int] = set()
    for line in changed_lines(pristine, mutated):
        statement = statement_lines(pristine, line)
        if statement is None:
            return [EVERY_TEST]
        wanted |= statement
    lines, seconds = coverage["lines"], coverage["seconds"]
    if wanted & set(lines.get(SHARED, {}).get(path, ())):
        return [EVERY_TEST]
    tests = [test for test, files in lines.items()
             if test != SHARED and wanted & set(files.get(path, ()))]
    return sorted(tests, key=lambda test: (seconds.get(test, 0.0), test))
