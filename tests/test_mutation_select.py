"""The mutation score's test selection (benchmarks/mutation_select.py) and sampling.

The selection must never leave out a test that could kill a mutant: a change that runs at
import, or in a fixture's setup, selects every test; a change inside a function body selects
the tests that executed its whole statement. Expectations here are written by hand from the
small sources below.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # mutation_score imports its sibling as a script does
select_mod = importlib.import_module("mutation_select")
score_mod = importlib.import_module("mutation_score")

SOURCE = textwrap.dedent('''\
    LIMIT = 3                      # 1


    @staticmethod                  # 4
    def scaled(x, k=2):            # 5
        total = (x * k             # 6
                 + LIMIT)          # 7
        if total > LIMIT and (     # 8
                x != 0):           # 9
            return total           # 10
        else:
            return -total          # 12
    ''')


def test_changed_lines_are_the_replaced_lines():
    mutated = SOURCE.replace("+ LIMIT)", "- LIMIT)")
    assert select_mod.changed_lines(SOURCE, mutated) == {7}


@pytest.mark.parametrize(("line", "expected"), [
    (7, {6, 7}),    # the second line of a two-line statement: the whole statement
    (9, {8, 9}),    # the header of an if: the header only
    (10, {10}),
    (12, {12}),
    (1, None),      # module level: runs at import
    (4, None),      # a decorator: runs at import
    (5, None),      # the def line and its default argument: run at import
    (11, None),     # `else:` belongs to no statement's own code: every test, to be safe
])
def test_statement_lines(line, expected):
    assert select_mod.statement_lines(SOURCE, line) == expected


CACHED = textwrap.dedent('''\
    import functools                    # 1
    from functools import cache         # 2


    @cache                              # 5
    def table(x):                       # 6
        return x + 1                    # 7


    @functools.lru_cache(maxsize=None)  # 10
    def other(x):                       # 11
        return x * 2                    # 12


    def plain(x):                       # 15
        return table(x)                 # 16
    ''')


@pytest.mark.parametrize(("line", "expected"), [(7, None), (12, None), (16, {16})])
def test_a_cached_function_body_selects_every_test(line, expected):
    # a cached result computed in one test is read by tests that never run the body
    assert select_mod.statement_lines(CACHED, line) == expected


def coverage(lines: dict, seconds: dict) -> dict:
    return {"lines": lines, "seconds": seconds}


def test_select_takes_the_tests_that_ran_the_statement_fastest_first():
    cov = coverage({"t::slow": {"m.py": [6, 8]}, "t::fast": {"m.py": [6]},
                    "t::other": {"m.py": [10]}, "t::elsewhere": {"n.py": [6]}},
                   {"t::slow": 9.0, "t::fast": 0.5, "t::other": 0.1, "t::elsewhere": 0.1})
    mutated = SOURCE.replace("+ LIMIT)", "- LIMIT)")  # line 7: statement 6-7
    assert select_mod.select_tests(cov, "m.py", SOURCE, mutated) == ["t::fast", "t::slow"]


def test_select_takes_every_test_for_import_time_and_setup_changes():
    cov = coverage({"t::a": {"m.py": [10]}, select_mod.SHARED: {"m.py": [12]}}, {"t::a": 1.0})
    at_import = SOURCE.replace("LIMIT = 3", "LIMIT = 4")
    in_setup = SOURCE.replace("return -total", "return total")
    assert select_mod.select_tests(cov, "m.py", SOURCE, at_import) == [select_mod.EVERY_TEST]
    assert select_mod.select_tests(cov, "m.py", SOURCE, in_setup) == [select_mod.EVERY_TEST]


def test_select_takes_nothing_for_a_statement_no_test_ran():
    cov = coverage({"t::a": {"m.py": [12]}}, {"t::a": 1.0})
    mutated = SOURCE.replace("return total ", "return -total ")
    assert select_mod.select_tests(cov, "m.py", SOURCE, mutated) == []


def test_the_tracer_records_each_test_and_the_setup_apart(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(SOURCE)
    tracer = select_mod.LineTracer(tmp_path, ["m.py"], tmp_path / "cov.json")
    spec = importlib.util.spec_from_file_location("traced_m", module)
    traced = importlib.util.module_from_spec(spec)

    class Item:
        nodeid = "t::a"

    tracer.pytest_sessionstart(None)
    spec.loader.exec_module(traced)        # at import: outside any test
    tracer.pytest_runtest_setup(Item)
    traced.scaled(-3, 1)                   # in setup: total = 0, the else branch
    tracer.pytest_runtest_call(Item)
    traced.scaled(1)                       # in the test: total = 5
    tracer.pytest_runtest_teardown(Item)
    tracer.pytest_sessionfinish(None)
    lines = tracer.lines
    assert sorted(lines["t::a"]["m.py"]) == [6, 7, 8, 9, 10]
    assert {1, 4, 12} <= lines[select_mod.SHARED]["m.py"]
    assert 10 not in lines[select_mod.SHARED]["m.py"]


def test_stratified_sample_reaches_every_module_and_repeats():
    keys = ["big.py"] * 200 + ["solver.py"] * 3 + ["tiny.py"]
    first = score_mod.stratified(keys, 40, seed=0)
    assert len(first) == 40
    assert first == score_mod.stratified(keys, 40, seed=0)
    picked = [keys[i] for i in first]
    # 40 // (2 * 3 modules) = 6 each, at most what a module has
    assert picked.count("solver.py") == 3 and picked.count("tiny.py") == 1
    assert score_mod.stratified(keys, 500, seed=0) == set(range(len(keys)))


def test_only_annotations_needs_postponed_annotations():
    source = "from __future__ import annotations\n\n\ndef f(a: int | None) -> int:\n    return 1\n"
    assert select_mod.only_annotations(source, source.replace("int | None", "int * None"))
    assert select_mod.only_annotations(source, source.replace("-> int", "-> str"))
    assert not select_mod.only_annotations(source, source.replace("return 1", "return 2"))
    evaluated = source.replace("from __future__ import annotations\n", "")
    assert not select_mod.only_annotations(evaluated, evaluated.replace("int | None",
                                                                        "int * None"))


def test_the_score_counts_every_survivor_but_a_demonstrated_equivalent():
    mutant = lambda key, outcome, **kw: score_mod.Mutant(
        "j" + key, key.split(":")[0], int(key.split(":")[1].split()[0]),
        key.split()[1], int(key.split()[2]), outcome, **kw)
    shown = "refimpl/partition/cut.py:2 core/NumberReplacer 0"
    argued = "refimpl/partition/cut.py:3 core/NumberReplacer 0"
    found = [mutant("refimpl/partition/cut.py:1 core/AddNot 0", "killed"),
             mutant(shown, "survived"), mutant(argued, "survived"),
             mutant("refimpl/partition/cut.py:4 core/AddNot 0", "survived",
                    annotation_only=True),
             mutant("refimpl/partition/cut.py:5 core/AddNot 0", "incompetent")]
    verdicts = {shown: score_mod.DEMONSTRATED, argued: "not demonstrated: pytest exit 1"}
    figures = score_mod.score("partition", found, 1.0, verdicts)
    # killed 1; survivors 3, of which the demonstrated one and the annotation-only one
    # are equivalent: 1 / (1 + 3 - 2)
    assert (figures.killed, figures.survived, figures.equivalent) == (1, 3, 2)
    assert (figures.incompetent, figures.score) == (1, 1 / 2)
    assert score_mod.score("partition", found, 1.0, {}).score == 1 / 3
