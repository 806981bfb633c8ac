"""`refimpl fuzz` reads at a glance (issue 22, item 4): the header names the components that
run and the limits; a CI log gets a line per finished property; the table fits 100 columns;
a failed row's note is its failure; reach is explained where it is shown."""

from __future__ import annotations

import json
from pathlib import Path

from refimpl.fuzz.report import TABLE_WIDTH, fit_names, summary_table, wrap_words
from refimpl.fuzz.worker import PropertyResult
from tests.test_fuzz import SUITE, _run, write_suite

LONG_NAMES = '''
from hypothesis import given, strategies as st


@given(x=st.integers(0, 10))
def test_a_property_with_a_name_far_longer_than_any_table_column_should_hold(refimpl_backend, x):
    assert x < 5, f"refimpl: below 5, target: {x}"
'''


def test_the_output_reads_at_a_glance(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    write_suite(props, "test_cse_long.py", LONG_NAMES)
    out = tmp_path / "o"
    done = _run("fuzz", "--target", "torch", "--component", "cse", "--properties",
                str(props), "--out", str(out), "--max-examples", "30", "--seed", "3",
                cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refimpl fuzz: target torch")
    assert "components: cse" in lines  # what runs, not what the target has
    assert any(line.startswith("limits: 30 examples per property") for line in lines)
    assert any(line.startswith("cse 1/3: ") for line in lines)  # progress off a terminal
    summary = (out / "summary.txt").read_text().splitlines()
    too_wide = [line for line in summary if len(line) > TABLE_WIDTH]
    assert not too_wide, too_wide
    header = summary.index(next(line for line in summary if line.startswith("property ")))
    row = next(i for i, line in enumerate(summary) if "far_longe" in line and i > header)
    assert summary[row].split()[1] == "failed"
    assert summary[row + 1].strip().startswith("AssertionError: refimpl: below 5, target: ")
    assert any(line.startswith("reach: the share of") for line in summary)
    report = json.loads((out / "report.json").read_text())
    assert any("far_longer_than_any_table_column" in r["nodeid"] for r in report["properties"])


# issue 30, item 3: the table reads in 100 columns with every name told apart, notes keep the
# words that name the error, the causes come first with reproducers relative to --out.

OPS = ("add_scalar", "clamp", "clone", "full_like", "mul_scalar", "scale_by_size")
TARGET_ERROR = ("refimpl.oracle.blame.TargetError: the target failed: torch.fx_graph_cse "
                "raised TypeError: unhashable type: 'slice'\nFailing test case: ...")
UNSOUND = ("AssertionError: torch fx_graph_cse is unsound: ['outputs differ', \"values of "
           "surviving nodes differ: ['cos_default']\"]")


def _results() -> list[PropertyResult]:
    nodeid = "properties/test_cse_strength.py::test_a_write_between_equal_values[{}]"
    rows = [PropertyResult("cse", nodeid.format(op), "failed", 8, 1.0, message=UNSOUND,
                           example=f"test_x(\n    op={op!r},\n    data=data(...),\n)")
            for op in OPS]
    rows.append(PropertyResult("cse", nodeid.format("slice"), "failed", 10, 1.0,
                               message=TARGET_ERROR,
                               example="test_x(\n    op='slice',\n    data=data(...),\n)"))
    rows.append(PropertyResult("cse", "properties/test_cse.py::test_cse_is_sound", "passed", 5))
    return rows


def test_the_table_fits_100_columns_and_tells_every_property_apart():
    summary = summary_table(_results())
    too_wide = [line for line in summary.splitlines() if len(line) > TABLE_WIDTH]
    assert not too_wide, too_wide
    rows = [line.split()[0] for line in summary.splitlines()
            if line.split()[1:2] in (["failed"], ["passed"])]
    assert len(rows) == len(set(rows)) == len(OPS) + 2, rows  # no two names read alike
    for op in (*OPS, "slice"):
        assert any(row.endswith(f"[{op}]") for row in rows), (op, rows)


def test_names_are_shortened_from_the_left_and_never_to_one_name():
    names = ["cse_strength::test_a_write_between_equal_values[add_scalar]",
             "cse_strength::test_a_write_between_equal_values[clamp]",
             "cse::test_the_same_long_property_name_in_two_files_of_the_suite",
             "cse_strength::test_the_same_long_property_name_in_two_files_of_the_suite"]
    fitted = fit_names(names, 40)
    assert all(len(short) <= 40 for short in fitted.values()), fitted
    assert len(set(fitted.values())) == 4, fitted
    assert fitted[names[0]].endswith("between_equal_values[add_scalar]")
    assert fitted[names[2]].startswith("cse::") and fitted[names[3]].startswith("cse_strength::")


def test_a_note_keeps_the_words_that_name_the_error():
    summary = summary_table(_results())
    assert "TargetError: the target failed: torch.fx_graph_cse raised TypeError: unhashable " \
           "type: 'slice'" in summary
    assert "refimpl.oracle.blame" not in summary
    assert "values of surviving nodes differ" in summary.replace("\n      ", " ")


def test_a_note_too_long_for_two_lines_is_cut_between_words():
    lines = wrap_words("AssertionError: " + " ".join(f"word{i}" for i in range(60)))
    assert len(lines) == 2 and all(len(line) <= TABLE_WIDTH for line in lines)
    assert lines[-1].endswith(" ...") and lines[0].startswith("    AssertionError: word0 ")


def test_the_causes_come_first_with_one_reproducer_relative_to_out():
    summary = summary_table(_results())
    causes = summary.split("\nproperty ", 1)[0]
    assert causes.startswith("failures by cause: 7 failed properties, 2 cause(s)")
    assert "1. 6 failed: AssertionError: torch fx_graph_cse is unsound" in causes
    assert "2. 1 failed: TargetError: the target failed" in causes
    runs = [line.strip() for line in causes.splitlines() if "python " in line]
    assert runs == ["python reproducers/test_cse_strength__test_a_write_between_equal_values_"
                    "add_scalar.py",
                    "python reproducers/test_cse_strength__test_a_write_between_equal_values_"
                    "slice.py"]
