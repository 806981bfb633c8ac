"""No test searches a strategy by luck: every search goes through ``tests.finding``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from tests.finding import find_example

TESTS = Path(__file__).resolve().parent


def _calls_find(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    imported = any(isinstance(node, ast.ImportFrom) and node.module == "hypothesis"
                   and any(alias.name == "find" for alias in node.names)
                   for node in ast.walk(tree))
    attribute = any(isinstance(node, ast.Attribute) and node.attr == "find"
                    and isinstance(node.value, ast.Name) and node.value.id == "hypothesis"
                    for node in ast.walk(tree))
    return imported or attribute


def test_no_test_calls_hypothesis_find_directly():
    offenders = [p.name for p in sorted(TESTS.glob("*.py"))
                 if p.name != "finding.py" and _calls_find(p)]
    assert offenders == [], f"use tests.finding.find_example instead of find in {offenders}"


def test_the_search_is_the_same_every_time():
    draws = [find_example(st.integers(0, 10**9), lambda n: n % 7 == 3, shrink=False)
             for _ in range(3)]
    assert draws[0] % 7 == 3 and draws == [draws[0]] * 3


def test_a_search_that_finds_nothing_says_so():
    with pytest.raises(NoSuchExample):
        find_example(st.integers(0, 10), lambda n: n > 10, max_examples=50)
