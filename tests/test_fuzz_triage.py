"""Triage (issue 30, item 1): a campaign's failures grouped by cause (the error's kind and
first words, the shrunk example's shape), one group per cause with its count and one
reproducer; and the baseline: what only the target under test fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refimpl.fuzz.baseline import split
from refimpl.fuzz.cli import UsageError, check_baseline
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.triage import error_kind, example_shape, first_words, group_failures
from tests.test_fuzz import SUITE, _run, write_suite

WRITE_BETWEEN = '''test_a_write_between_equal_values(
    refimpl_backend=<refimpl.oracle.builtin.TorchBackend object at 0x7f81e663b5d0>,
    op={op!r},
    data=data(...),
)
Draw 1: {{'spec': {{'num_inputs': 1, 'nodes': [{{'op': {op!r}, 'inputs': [0]}}]}}}}'''

GRAPH = '''test_cse_is_sound(
    refimpl_backend=<refimpl.oracle.builtin.TorchBackend object at 0x7f0000000000>,
    spec=GraphSpec(num_inputs=1,
     side=3,
     nodes=(NodeSpec(op={op!r}, inputs=(0,), params=()),
      NodeSpec(op={op!r}, inputs=(0,), params=())),  # a comment(
     outputs=(1, 2),
     style='aten'),
)'''

UNSOUND = ("AssertionError: torch fx_graph_cse is unsound: ['outputs differ', \"values of "
           "surviving nodes differ: ['{node}']\"]\n  GraphSpec(...)")


def failed(nodeid: str, message: str, example: str | None, reproducer: str | None = None
           ) -> dict:
    return {"nodeid": nodeid, "outcome": "failed", "message": message, "example": example,
            "reproducer": reproducer}


def test_failures_of_one_defect_with_different_ops_are_one_group():
    rows = [failed(f"p::t[{op}]", UNSOUND.format(node=node), WRITE_BETWEEN.format(op=op),
                   f"reproducers/{op}.py")
            for op, node in (("add_scalar", "cos_default"), ("cos", "cos_default_2"),
                             ("clamp", "cos_default"))]
    rows.insert(1, {"nodeid": "p::ok", "outcome": "passed", "message": "", "example": None})
    (group,) = group_failures(rows)
    assert group.count == 3 and group.nodeids == ["p::t[add_scalar]", "p::t[cos]", "p::t[clamp]"]
    assert group.kind == "AssertionError" and group.reproducer == "reproducers/add_scalar.py"
    assert group.message.startswith("torch fx_graph_cse is unsound: ['outputs differ'")


def test_another_kind_other_words_or_another_shape_is_another_group():
    base = failed("a", UNSOUND.format(node="x"), GRAPH.format(op="cos"))
    other_kind = failed("b", "TargetError: the target failed: torch.fx_graph_cse raised "
                             "TypeError: unhashable type: 'slice'", GRAPH.format(op="cos"))
    other_words = failed("c", "AssertionError: torch fx_graph_cse removed 0 nodes, expected "
                              "at least 1", GRAPH.format(op="cos"))
    other_shape = failed("d", UNSOUND.format(node="x"), WRITE_BETWEEN.format(op="cos"))
    same = failed("e", UNSOUND.format(node="y"), GRAPH.format(op="neg"))
    groups = group_failures([base, other_kind, other_words, other_shape, same])
    assert [g.nodeids for g in groups] == [["a", "e"], ["b"], ["c"], ["d"]]
    members = [n for g in groups for n in g.nodeids]  # the invariant: each in exactly one
    assert sorted(members) == ["a", "b", "c", "d", "e"]


def test_the_parts_of_a_cause():
    assert error_kind("refimpl.oracle.blame.TargetError: the target failed: x") == (
        "TargetError", "the target failed: x")
    assert error_kind("timed out: the worker was stuck") == ("", "timed out: the worker was stuck")
    assert first_words("removed 10 nodes, expected at least 12 of them here") == (
        "removed ## nodes, expected at least ## of")  # 8 words
    assert example_shape(GRAPH.format(op="cos")) == "spec: GraphSpec, 2 NodeSpec"
    assert example_shape(WRITE_BETWEEN.format(op="cos")) == "op, data: data"
    assert example_shape(None) == "no example"


def test_the_baseline_split():
    mine = {n: {"outcome": o, "examples": 5} for n, o in
            (("new", "failed"), ("shared", "failed"), ("unjudged", "failed"), ("ok", "passed"))}
    base = {"new": {"outcome": "passed", "examples": 5},
            "shared": {"outcome": "failed", "examples": 3},
            "unjudged": {"outcome": "skipped", "examples": 0},
            "ok": {"outcome": "failed", "examples": 5}}
    result = split(mine, base)
    assert (result.only_mine, result.both, result.no_verdict) == (["new"], ["shared"],
                                                                  ["unjudged"])


MINE = '''
class Mine:
    name = "mine"

    def fx_graph_cse(self, graph):
        return graph
'''

NAMED = '''
from hypothesis import given, strategies as st


@given(x=st.integers(0, 3))
def test_the_backend_is_not_mine(refimpl_backend, x):
    assert refimpl_backend.name != "mine", "mine is wrong"
'''


def test_baseline_target_shows_first_what_only_mine_fails(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    write_suite(props, "test_cse_named.py", NAMED)
    (tmp_path / "mine.py").write_text(MINE)
    out = tmp_path / "o"
    done = _run("fuzz", "--target", "mine:Mine", "--baseline", "refimpl", "--component", "cse",
                "--properties", str(props), "--max-examples", "5", "--out", str(out),
                cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    text = done.stdout
    section = text.index("baseline refimpl: 1 failing properties fail only on mine")
    assert section < text.index("failures by cause") < text.index("property  ")
    assert "1 fail on refimpl too (not new)" in text
    assert "seed: " in text  # one seed, chosen and printed, for both
    report = json.loads((out / "report.json").read_text())
    assert [n.split("::")[-1] for n in report["baseline"]["only_mine"]] == [
        "test_the_backend_is_not_mine"]
    base = json.loads((out / "baseline" / "report.json").read_text())
    assert base["target_name"] == "refimpl" and base["options"] == report["options"]
    assert (out / "summary.txt").read_text().startswith("baseline refimpl: 1 failing")


def test_a_baseline_that_cannot_load_or_a_report_without_the_seed_is_refused(tmp_path: Path):
    done = _run("fuzz", "--baseline", "no_such_module:Backend", "--component", "cse",
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--baseline" in done.stderr and "no_such_module" in done.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"target": "torch (x)", "options": {"seed": 4, "max_examples": 5},
                               "properties": []}))
    done = _run("fuzz", "--baseline", str(old), "--component", "cse", "--out",
                str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and "--baseline" in done.stderr, done.stderr
    assert "give --seed 4" in done.stderr and done.stderr.count("\n") == 1


def test_baseline_runs_with_the_plain_runner_only():
    opts = FuzzOptions(engine="hypofuzz", max_examples=None, minutes=1.0, baseline="torch")
    with pytest.raises(UsageError, match="--baseline: runs with --engine runner only"):
        check_baseline(opts)
    seeded, baseline = check_baseline(FuzzOptions(baseline="refimpl"))
    assert seeded.seed is not None and baseline.name == "refimpl"  # one seed for both
