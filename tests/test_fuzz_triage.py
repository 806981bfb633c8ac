"""Triage (issue 30, item 1): a campaign's failures grouped by cause (the error's kind and
first words, the shrunk example's shape), one group per cause with its count and one
reproducer; and the baseline: what only the target under test fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refimpl.expect.cse_soundness import unsound_reasons
from refimpl.fuzz import baseline as baseline_module
from refimpl.fuzz.baseline import Baseline, split
from refimpl.fuzz.cli import UsageError, check_baseline
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.triage import error_kind, example_shape, first_words, group_failures
from refimpl.oracle import load_backend
from refimpl.properties import test_cse as cse_properties
from refimpl.strategies.graphs import GraphSpec, NodeSpec
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


class DropsTheSecondPrint:
    """refimpl's CSE, then the second of two effectful prints removed: torch's known defect
    "fx_graph_cse merges two effectful calls" (docs/findings.md), on any torch release."""

    name = "drops"

    def fx_graph_cse(self, graph):
        new_graph = load_backend("refimpl").fx_graph_cse(graph)
        for node in list(new_graph.nodes):
            if node.name == "_print_default_1":
                new_graph.erase_node(node)
        return new_graph


TWO_PRINTS = GraphSpec(num_inputs=1, side=3, outputs=(1,), style="aten", nodes=(
    NodeSpec(op="clone", inputs=(0,), params=()),
    NodeSpec(op="print", inputs=(), params=("refimpl op_graphs effect",)),
    NodeSpec(op="print", inputs=(), params=("refimpl op_graphs effect",)),
    NodeSpec(op="clone", inputs=(0,), params=())))


def test_a_merged_print_found_by_three_properties_is_one_cause():
    """test_cse_is_sound (the judge's words), the effectful-calls property and the
    never-merged property each find the lost print; they word it alike, so it is one group."""
    rows = []
    for name in ("test_cse_is_sound", "test_effectful_calls_are_never_merged",
                 "test_random_and_mutating_nodes_are_never_merged"):
        prop = getattr(cse_properties, name).hypothesis.inner_test
        with pytest.raises(AssertionError) as failure:
            prop(refimpl_backend=DropsTheSecondPrint(), spec=TWO_PRINTS)
        example = f"{name}(\n    refimpl_backend=<drops object at 0x1>,\n    spec={TWO_PRINTS},\n)"
        rows.append(failed(f"cse::{name}", f"AssertionError: {failure.value}", example))
    groups = group_failures(rows)
    assert [g.count for g in groups] == [3], [(g.words, g.shape) for g in groups]
    assert "never-merged nodes removed: ['_print_default_1']" in groups[0].message


def test_the_properties_word_a_lost_node_as_the_judge_does():
    gm = TWO_PRINTS.traced()
    lost = unsound_reasons(gm, DropsTheSecondPrint().fx_graph_cse(gm.graph),
                           TWO_PRINTS.example_inputs, must_keep=["_print_default_1"],
                           checks=("kept",))
    assert lost == [cse_properties.lost_message(["_print_default_1"])]


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


def test_the_baseline_target_runs_unshrunk(tmp_path: Path, monkeypatch):
    """Only the baseline's verdicts are compared, and shrinking never changes one: the
    baseline target runs with ``shrink`` off (the walkthrough's torch run shrank
    test_cse_is_sound's failure for minutes only to compare a verdict)."""
    ran = []

    def campaign(opts, skips):
        ran.append(opts)
        return baseline_module.CampaignResult([])

    monkeypatch.setattr(baseline_module, "run_campaign", campaign)
    opts = FuzzOptions(out=tmp_path / "out", components=("cse",), seed=1, shrink=True)
    report = baseline_module._run_baseline(opts, Baseline("refimpl", load_backend("refimpl")))
    assert [(o.target, o.shrink, o.out) for o in ran] == [
        ("refimpl", False, tmp_path / "out" / "baseline")]
    assert report["target_name"] == "refimpl"


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


def test_baseline_with_resume_reuses_a_finished_campaign_and_runs_only_the_baseline(
        tmp_path: Path):
    """Issue 30's walkthrough: fuzz mine once, then ``--baseline refimpl --resume`` on the
    same --out: mine's campaign is reused (its worker's log untouched, its rows as they
    were), only the baseline runs."""
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    write_suite(props, "test_cse_named.py", NAMED)
    (tmp_path / "mine.py").write_text(MINE)
    out = tmp_path / "o"
    args = ["fuzz", "--target", "mine:Mine", "--component", "cse", "--properties", str(props),
            "--max-examples", "5", "--seed", "3", "--out", str(out)]
    first = _run(*args, cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    log = out / "logs" / "cse.log"
    ran_mine = (log.read_text(), log.stat().st_mtime_ns)
    rows = json.loads((out / "report.json").read_text())["properties"]
    done = _run(*args, "--baseline", "refimpl", "--resume", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join(done.stdout.split())  # the note folds to 100 columns
    assert "the finished campaign of mine in" in said
    assert "ran on this seed and these examples: reused, not run again" in said
    assert (log.read_text(), log.stat().st_mtime_ns) == ran_mine  # mine did not run again
    report = json.loads((out / "report.json").read_text())
    assert [(r["nodeid"], r["outcome"], r["examples"]) for r in report["properties"]] == [
        (r["nodeid"], r["outcome"], r["examples"]) for r in rows]
    assert [n.split("::")[-1] for n in report["baseline"]["only_mine"]] == [
        "test_the_backend_is_not_mine"]
    assert json.loads((out / "baseline" / "report.json").read_text())["target_name"] == (
        "refimpl")
    again = _run(*args, "--baseline", "refimpl", "--resume", cwd=tmp_path)  # a baseline there
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reused, not run again" in " ".join(again.stdout.split())


def test_baseline_with_resume_refuses_a_campaign_that_ran_otherwise(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    out = tmp_path / "o"

    def fuzz(*more: str):
        return _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                    str(out), *more, cwd=tmp_path)

    assert fuzz("--max-examples", "3", "--seed", "3").returncode == 1
    for other, expected in ((["--max-examples", "3", "--seed", "4"], "seed 3 (this run: 4)"),
                            (["--max-examples", "4", "--seed", "3"],
                             "max_examples 3 (this run: 4)"),
                            (["--max-examples", "3"], "ran with --seed 3: give it")):
        done = fuzz(*other, "--baseline", "torch", "--resume")
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("refimpl fuzz: --resume: ") and expected in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
    write_suite(props, "test_cse_named.py", NAMED)  # the suite changed since
    done = fuzz("--max-examples", "3", "--seed", "3", "--baseline", "torch", "--resume")
    assert done.returncode == 2 and "property files (digest) '" in done.stderr, done.stderr
