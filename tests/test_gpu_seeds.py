"""The GPU check's seed steps on CPU (issue 31, item 1): each seed file extracted verbatim as
its upstream module, run in two columns (torch's implementation, refimpl swapped in), each
counted per module; the report and docs/gpu.md built from the step results.

The seed files here are made up, in the seeds' layout (a header line naming the upstream
module, then the module in one fenced block), so the counts expected are known by
construction: the real seeds are CUDA tests and skip on a CPU machine."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402
import gpu_report  # noqa: E402
import upstream_tests  # noqa: E402

#: one test passes, one fails, one skips, one passes only with refimpl swapped in.
MODULE = '''# Owner(s): ["module: made up"]
import unittest

import torch.utils.flop_counter
from torch._functorch.compile_utils import fx_graph_cse
from torch.testing._internal.common_utils import TestCase, run_tests

import refimpl


class MadeUp(TestCase):
    def test_passes(self):
        self.assertEqual(1 + 1, 2)

    def test_fails(self):
        self.assertEqual(1 + 1, 3)

    @unittest.skipIf(True, "needs a GPU")
    def test_skips(self):
        pass

    def test_refimpl_is_swapped_in(self):
        self.assertIs(getattr(fx_graph_cse, "__wrapped__", None), refimpl.fx_graph_cse)
        counter = torch.utils.flop_counter.FlopCounterMode(display=False)
        self.assertIsInstance(counter, refimpl.FlopCounterMode)


if __name__ == "__main__":
    run_tests()'''


def _seed(folder: Path, name: str, upstream: str, code: str) -> Path:
    folder.mkdir(exist_ok=True)
    seed = folder / name
    seed.write_text(f"# `{upstream}`\n\n```\n{code}\n```", encoding="utf-8")
    return seed


def test_each_seed_file_is_extracted_verbatim_as_its_upstream_module(tmp_path: Path):
    code = 'import torch\n\n\n# 注释 kept as written\ndef test_x():\n    assert "```" != ""'
    _seed(tmp_path / "seeds", "000_aa.txt", r".\pytorch\test\functorch\test_ac.py", code)
    _seed(tmp_path / "seeds", "001_bb.txt", "pytorch/test/test_flop_counter.py", "x = 1")
    (tmp_path / "seeds" / "README.md").write_text("not a seed")
    found = upstream_tests.extract_seeds(tmp_path / "seeds", tmp_path / "modules")
    assert found == {"000_aa.txt": tmp_path / "modules" / "test_ac.py",
                     "001_bb.txt": tmp_path / "modules" / "test_flop_counter.py"}
    assert found["000_aa.txt"].read_text(encoding="utf-8") == code + "\n"
    assert sorted(p.name for p in (tmp_path / "modules").iterdir()) == [
        "test_ac.py", "test_flop_counter.py"]


@pytest.mark.parametrize("text, why", [
    ("import torch\n", "not a seed file"),
    ("# `test_a.py`\n\n```\nx = 1\n", "not a seed file"),  # the block never closes
    ("# `pytorch/test/helpers.py`\n\n```\nx = 1\n```", r"names helpers\.py, not a new test_"),
])
def test_a_file_not_in_the_seed_layout_is_refused_by_name(tmp_path: Path, text, why):
    (tmp_path / "000_bad.txt").write_text(text)
    with pytest.raises(ValueError, match=rf"000_bad\.txt: {why}"):
        upstream_tests.extract_seeds(tmp_path, tmp_path / "modules")


def test_two_seed_files_naming_one_module_and_an_empty_folder_are_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="holds no seed files"):
        upstream_tests.extract_seeds(tmp_path, tmp_path / "modules")
    _seed(tmp_path, "000_a.txt", "test/test_ac.py", "x = 1")
    _seed(tmp_path, "001_b.txt", "other/test_ac.py", "x = 2")
    with pytest.raises(ValueError, match=r"001_b\.txt: names test_ac\.py"):
        upstream_tests.extract_seeds(tmp_path, tmp_path / "modules")


@pytest.mark.slow
def test_the_seed_steps_run_both_columns_and_count_each_module(tmp_path: Path):
    seeds = tmp_path / "seeds"
    _seed(seeds, "000_made_up.txt", r".\pytorch\test\test_made_up.py", MODULE)
    _seed(seeds, "001_flops.txt", r".\pytorch\test\test_flop_counter.py", MODULE.replace(
        "class MadeUp", "class MadeUpToo"))
    steps = gpu_check.seed_steps(seeds, tmp_path / "work", ("-q", "-k", "not test_fails"),
                                 jobs=2)
    assert [s.name for s in steps] == ["seeds-torch", "seeds-refimpl"]
    results = gpu_check.run(steps, tmp_path / "out", tmp_path / "work", grace_s=5)
    torch_column, refimpl_column = results["seeds-torch"], results["seeds-refimpl"]
    # torch's implementation: test_refimpl_is_swapped_in fails; -k deselected test_fails
    assert torch_column["per_file"]["test_made_up.py"]["counts"] == {
        "passed": 1, "failed": 1, "errors": 0, "skipped": 1}
    assert refimpl_column["per_file"]["test_made_up.py"]["counts"] == {
        "passed": 2, "failed": 0, "errors": 0, "skipped": 1}
    assert torch_column["counts"] == {"passed": 2, "failed": 2, "errors": 0, "skipped": 2}
    assert refimpl_column["counts"] == {"passed": 4, "failed": 0, "errors": 0, "skipped": 2}
    assert [f["test"] for f in torch_column["failures"]] == [
        "MadeUpToo::test_refimpl_is_swapped_in", "MadeUp::test_refimpl_is_swapped_in"]
    assert (torch_column["status"], refimpl_column["status"]) == (1, 0)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu-report.md", "logs.tar.gz", "seeds-refimpl.json", "seeds-torch.json"]
    # test_refimpl_is_swapped_in constructs one FlopCounterMode; fx_graph_cse is not called
    assert refimpl_column["reached"]["test_made_up.py"] == {
        "aot_eager_decomp_partition": 0, "inductor": 0, "memory_efficient_fusion": 0,
        "fx_graph_cse": 0, "checkpoint": 0, "FlopCounterMode": 1}
    assert torch_column["reached"]["test_made_up.py"] == {}
    table = (out / "gpu-report.md").read_text()
    assert ("| test_made_up.py | 1 passed, 1 failed, 0 errors, 1 skipped | 2 passed, 0 failed, "
            "0 errors, 1 skipped | FlopCounterMode 1 |") in table
    with tarfile.open(out / "logs.tar.gz") as archive:
        names = archive.getnames()
    assert {"seeds-torch.log", "seeds-refimpl/xml/test_made_up.xml"} <= set(names)


def _result(step: str, **fields) -> dict:
    return {"step": step, "title": step, "status": 0, "timed_out": False, "seconds": 12.3,
            "budget_s": 170, "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130",
            "cuda": "13.0", "ended": "2026-11-28 10:00:00 UTC", "counts": None,
            "failures": [], **fields}


def _counts(passed, failed=0, errors=0, skipped=0) -> dict:
    return {"passed": passed, "failed": failed, "errors": errors, "skipped": skipped}


def test_the_report_shows_every_step_the_seed_table_and_each_failure_with_its_note():
    failure = {"test": "MemoryBudgetTest::test_profile", "outcome": "failed",
               "message": "AssertionError: 3 | 4"}
    results = {
        "seeds-torch": _result("seeds-torch", counts=_counts(42),
                               per_file={"test_ac.py": {"counts": _counts(7)}}),
        "seeds-refimpl": _result("seeds-refimpl", status=1, counts=_counts(41, failed=1),
                                 failures=[failure], per_file={
                                     "test_ac.py": {"counts": _counts(6, failed=1)},
                                     "test_checkpoint.py": None},
                                 reached={"test_ac.py": {"inductor": 0, "checkpoint": 3,
                                                         "FlopCounterMode": 2},
                                          "test_checkpoint.py": None}),
        "fuzz-inductor": _result("fuzz-inductor", timed_out=True, reach={"test_layout": 0.6},
                                 counts={**_counts(3), "unfinished": 2}),
    }
    notes = {"seeds-refimpl/MemoryBudgetTest::test_profile": "finding 12"}
    text = gpu_report.report(results, notes)
    assert "- NVIDIA H100 80GB HBM3, torch 2.11.0+cu130 (CUDA 13.0)" in text
    assert "| pytest-cuda | not run | | |" in text
    assert "| fuzz-inductor | 0 | 12 (170, cut at its budget) | 3 passed" in text
    assert ("| test_ac.py | 7 passed, 0 failed, 0 errors, 0 skipped | 6 passed, 1 failed, "
            "0 errors, 0 skipped | checkpoint 3, FlopCounterMode 2 |") in text
    assert ("| test_checkpoint.py | no result written | no result written | not written |"
            in text)
    assert ("| seeds-refimpl | MemoryBudgetTest::test_profile | failed | AssertionError: "
            "3 \\| 4 | finding 12 |") in text
    assert "- fuzz-inductor: test_layout 60%" in text
    assert "not triaged yet" in gpu_report.report(results, {})


def test_write_docs_writes_the_page_from_a_runs_results_and_refuses_an_empty_folder(
        tmp_path: Path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "pytest-cuda.json").write_text(json.dumps(_result(
        "pytest-cuda", counts=_counts(45, skipped=2))))
    page = tmp_path / "gpu.md"
    assert gpu_check.write_docs(run, page) == 0
    text = page.read_text()
    assert text.startswith("# The last GPU check\n")
    assert "| pytest-cuda | 0 | 12 (170) | 45 passed, 0 failed, 0 errors, 2 skipped |" in text
    assert "The seed files were not run." in text
    with pytest.raises(gpu_check.UsageError, match="holds no step results"):
        gpu_check.write_docs(tmp_path / "empty", page)


def test_the_plan_fits_eight_minutes_with_its_grace():
    """The budgets stated in the docstring are the ones the steps get, and they add up."""
    phases = [("install",), ("seeds-torch", "seeds-refimpl", "pytest-cuda"),
              ("fuzz-inductor", "fuzz-refimpl")]
    worst = sum(max(gpu_check.BUDGET_S[s] for s in phase) + gpu_check.GRACE_S
                for phase in phases)
    assert worst < 8 * 60 - 20
    for name, seconds in gpu_check.BUDGET_S.items():
        assert f"{name:<14}  {seconds:>6}" in gpu_check.__doc__  # the table's row
    steps = [gpu_check.install_step(Path("b")), *gpu_check.check_steps(Path("w"), 10, 4)]
    assert {s.name: s.budget_s for s in steps} == {
        k: v for k, v in gpu_check.BUDGET_S.items() if not k.startswith("seeds")}


@pytest.mark.parametrize("argv, message", [
    (["--plan", "--examples", "0"], "--examples 0: expected a number >= 1"),
    (["--plan", "--upstream", "--seeds", "/absent"], "--seeds /absent: not a folder"),
    (["--plan", "--bundle", "/absent"], "--bundle /absent: holds no requirements.txt"),
    (["--plan", "--resume", "/absent"], "--resume /absent: not a folder"),
    (["--write-docs", "/absent"], "--write-docs /absent: holds no step results"),
])
def test_bad_options_are_one_line_naming_the_option(argv, message, capsys):
    assert gpu_check.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu_check.py: {message}") and err.count("\n") == 1


def test_a_machine_s_line_names_its_latest_step():
    """A resumed run merges results of two sessions on one machine kind: its line names the
    step that ended last, whatever the order the results are read in (it named the last one
    read, an earlier session's, on the 2026-11-28 page)."""
    machine = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "cuda": "13.0"}
    results = {"fuzz-refimpl": {**machine, "ended": "2026-11-28 18:19:36 UTC"},
               "seeds-torch": {**machine, "ended": "2026-11-28 18:05:56 UTC"}}
    assert gpu_report.machines(results) == [
        "NVIDIA H200, torch 2.11.0+cu130 (CUDA 13.0), last step ended 2026-11-28 18:19:36 UTC"]
