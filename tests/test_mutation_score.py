"""The mutation score's protocol (benchmarks/mutation_protocol.py, benchmarks/mutation_score.py).

A fresh seed per run, printed first and recorded; every module of a component mutated or left
out for a reason the test checks; the Wilson interval against published values; equivalents
refused without a test; the first-run flag from git. None of this needs cosmic-ray.
"""

from __future__ import annotations

import ast
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the script imports its siblings as a script does
protocol = importlib.import_module("mutation_protocol")
score_mod = importlib.import_module("mutation_score")
WORKFLOW = ROOT / ".github" / "workflows" / "mutation.yml"


# --- the seed ---------------------------------------------------------------------------

def test_a_given_seed_is_a_replay():
    assert protocol.draw_seed(1234) == (1234, False)
    assert protocol.draw_seed(0) == (0, False)


def test_a_drawn_seed_comes_from_os_urandom(monkeypatch):
    monkeypatch.setattr(protocol.os, "urandom", lambda n: bytes([7, 1, 0, 0][:n]))
    assert protocol.draw_seed(None) == (7 + 256, True)


def test_without_os_randomness_the_seed_comes_from_the_clock(monkeypatch):
    def no_source(n):
        raise NotImplementedError

    monkeypatch.setattr(protocol.os, "urandom", no_source)
    monkeypatch.setattr(protocol.time, "time_ns", lambda: 0x0102030405)
    assert protocol.draw_seed(None) == (0x02030405, True)


def test_two_runs_draw_different_seeds():
    # 32 random bits each: equal with probability 2**-32
    assert protocol.draw_seed(None)[0] != protocol.draw_seed(None)[0]


def fake_component(component, work_root, size, seed, timeout, jobs):
    figures = score_mod.Score(component, size, size - 1, 1, 0, 0, 1.0)
    found = [score_mod.Mutant("j", "refimpl/cse/keys.py", 3, "core/AddNot", 0, "survived")]
    return score_mod.component_record(figures, found, {}, 10.0, timeout, "1 passed")


@pytest.fixture
def equivalents_checked(monkeypatch):
    """Stand in for the EQUIVALENT check (it needs cosmic-ray; its own tests are below).

    Returns the list of tables the script asked to check, so a test can see it asked once.
    """
    checked = []
    monkeypatch.setattr(score_mod, "check_equivalents", checked.append)
    return checked


def test_a_run_prints_its_seed_first_and_records_it(monkeypatch, tmp_path, capsys,
                                                   equivalents_checked):
    monkeypatch.setattr(score_mod, "run_component", fake_component)
    real_urandom = protocol.os.urandom  # only the seed's 4 bytes are pinned
    monkeypatch.setattr(protocol.os, "urandom",
                        lambda n: bytes([42, 0, 0, 0]) if n == 4 else real_urandom(n))
    record = tmp_path / "run.json"
    assert score_mod.main(["--component", "cse", "--work", str(tmp_path),
                           "--json", str(record)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "seed 42 (drawn for this run)"
    run = json.loads(record.read_text())
    assert (run["seed"], run["seed_drawn"]) == (42, True)
    assert run["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                           capture_output=True, check=True).stdout.strip()
    assert run["first_run"] == (not run["properties_changed"])
    cse = run["components"]["cse"]
    assert (cse["sampled"], cse["killed"], cse["survived"]) == (100, 99, 1)
    assert cse["interval_95"] == pytest.approx(list(protocol.wilson_interval(99, 100)))
    assert equivalents_checked == [score_mod.EQUIVALENT]


def test_a_replayed_seed_is_recorded_as_not_a_first_run(monkeypatch, tmp_path, capsys,
                                                      equivalents_checked):
    monkeypatch.setattr(score_mod, "run_component", fake_component)
    record = tmp_path / "run.json"
    score_mod.main(["--component", "cse", "--seed", "5", "--sample", "3",
                    "--json", str(record)])
    assert capsys.readouterr().out.splitlines()[0] == "seed 5 (given: a replay)"
    run = json.loads(record.read_text())
    assert (run["seed"], run["seed_drawn"], run["first_run"]) == (5, False, False)
    assert run["components"]["cse"]["sampled"] == 3
    score_mod.main(["--report", "--json", str(record)])
    assert "NOT a first run (a replay of a given seed)" in capsys.readouterr().out


# --- every module of each component -----------------------------------------------------

def component_modules(component: str) -> set[str]:
    folder = ROOT / score_mod.COMPONENT_DIRS[component]
    return {p.relative_to(ROOT).as_posix() for p in folder.rglob("*.py")}


@pytest.mark.parametrize("component", sorted(score_mod.MODULES))
def test_every_module_of_a_component_is_mutated_or_left_out_with_a_reason(component):
    on_disk = component_modules(component)
    mutated = set(score_mod.MODULES[component])
    left_out = {path for path in score_mod.LEFT_OUT if path in on_disk}
    assert mutated <= on_disk, f"listed but not on disk: {sorted(mutated - on_disk)}"
    assert not mutated & left_out, sorted(mutated & left_out)
    assert on_disk == mutated | left_out, \
        f"neither mutated nor left out: {sorted(on_disk - mutated - left_out)}"


def reexports_only(source: str) -> bool:
    """A docstring, imports, ``__all__`` of strings and names bound to other names: no
    statement a mutation could change the behaviour of."""
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
                and isinstance(statement.value.value, str):
            continue
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            value = statement.value
            if isinstance(value, ast.Name | ast.Attribute):
                continue
            names = isinstance(value, ast.List) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)
            if names and getattr(statement.targets[0], "id", None) == "__all__":
                continue
        return False
    return True


def test_each_module_left_out_holds_what_its_reason_says():
    folders = tuple(score_mod.COMPONENT_DIRS.values())
    for path, reason in score_mod.LEFT_OUT.items():
        assert path.startswith(folders), path
        assert reason == score_mod.REEXPORTS_ONLY, (path, reason)
        assert reexports_only((ROOT / path).read_text()), f"{path} holds code to mutate"


def test_the_reexport_check_rejects_code():
    assert reexports_only('"""doc"""\nfrom a import b\nc = b.d\n__all__ = ["b"]\n')
    assert not reexports_only('"""doc"""\nLIMIT = 3\n')
    assert not reexports_only("def f():\n    return 1\n")
    assert not reexports_only('__all__ = ["a" + "b"]\n')


# --- the interval -----------------------------------------------------------------------

@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # Newcombe, Statistics in Medicine 17 (1998) 857-872, table I, method 3 (score)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_published_values(k, n, low, high):
    got = protocol.wilson_interval(k, n)
    assert (round(got[0], 4), round(got[1], 4)) == (low, high)


@pytest.mark.parametrize("n", [1, 10, 34])
def test_wilson_interval_at_the_ends_has_its_closed_form(n):
    z2 = protocol.Z95 ** 2
    assert protocol.wilson_interval(0, n) == pytest.approx((0.0, z2 / (n + z2)))
    assert protocol.wilson_interval(n, n) == pytest.approx((n / (n + z2), 1.0))


@pytest.mark.parametrize(("k", "n"), [(1, 0), (-1, 4), (5, 4)])
def test_wilson_interval_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError, match="0 <= k <= n"):
        protocol.wilson_interval(k, n)


def test_a_score_carries_the_interval_of_its_live_mutants():
    figures = score_mod.Score("checkpoint", 40, 27, 13, 6, 0, 1.0)
    assert figures.live == 34 and figures.score == 27 / 34
    low, high = figures.interval
    assert (round(low, 3), round(high, 3)) == (0.632, 0.897)  # 27/34, the recount
    empty = score_mod.Score("cse", 0, 0, 0, 0, 0, 1.0)
    assert math.isnan(empty.score) and all(math.isnan(x) for x in empty.interval)


# --- equivalents need a test ------------------------------------------------------------

HERE = "tests/test_mutation_score.py"


def test_an_equivalent_without_an_existing_test_is_refused():
    table = {
        "a.py:1 core/AddNot 0": (f"{HERE}::test_that_does_not_exist", "argued"),
        "a.py:2 core/AddNot 0": ("", "argued, no test"),
        "a.py:3 core/AddNot 0": ("benchmarks/mutation_score.py::main", "not under tests/"),
        "a.py:4 core/AddNot 0": (f"{HERE}::test_the_reexport_check_rejects_code", " "),
        "a.py:5 core/AddNot 0": (f"{HERE}::test_the_reexport_check_rejects_code",
                                 "demonstrated there"),
    }
    refused = protocol.equivalents_without_a_test(table, ROOT)
    assert [entry.split(":")[1].split()[0] for entry in refused] == ["1", "2", "3", "4"]


def test_the_script_refuses_to_run_with_an_untested_equivalent(monkeypatch, capsys, tmp_path):
    def must_not_run(*args):
        raise AssertionError("a component ran with an untested equivalent")

    monkeypatch.setattr(score_mod, "run_component", must_not_run)
    monkeypatch.setattr(score_mod, "EQUIVALENT",
                        {"a.py:1 core/AddNot 0": ("tests/test_nowhere.py::test_x", "argued")})
    with pytest.raises(SystemExit, match="an equivalent needs a test"):
        score_mod.main(["--component", "cse", "--json", str(tmp_path / "run.json")])
    assert "seed" not in capsys.readouterr().out  # refused before drawing a seed


def test_every_equivalent_of_the_script_names_an_existing_test():
    assert protocol.equivalents_without_a_test(score_mod.EQUIVALENT, ROOT) == []


def test_every_equivalent_of_the_script_names_a_mutant_of_todays_tree():
    """A key whose line or occurrence moved with the code would silently match nothing."""
    pytest.importorskip("cosmic_ray", reason="cosmic-ray is not installed (the mutation extra)")
    assert score_mod.stale_equivalents(score_mod.EQUIVALENT) == []


def test_without_cosmic_ray_the_script_says_what_to_install(monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] == "cosmic_ray"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cosmic_ray", None)  # an import of it now fails
    with pytest.raises(SystemExit, match=r"needs cosmic-ray: pip install -e '\.\[mutation\]'"):
        score_mod.main(["--component", "cse", "--seed", "5"])


def test_a_key_that_moved_is_stale(tmp_path):
    pytest.importorskip("cosmic_ray", reason="cosmic-ray is not installed (the mutation extra)")
    (tmp_path / "m.py").write_text("def f(a, b):\n    return a < b\n")
    here = "m.py:2 core/ReplaceComparisonOperator_Lt_Gt 0"
    moved = "m.py:1 core/ReplaceComparisonOperator_Lt_Gt 0"
    assert here in score_mod.mutant_keys(Path("m.py"), tmp_path)
    stale = score_mod.stale_equivalents({here: ("t", "why"), moved: ("t", "why")}, tmp_path)
    assert [entry.split(":")[1].split()[0] for entry in stale] == ["1"]


# --- the first-run flag -----------------------------------------------------------------

def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "properties").mkdir()
    (tmp_path / "refimpl" / "cse").mkdir(parents=True)
    (tmp_path / "properties" / "test_a.py").write_text("def test_a(): pass\n")
    (tmp_path / "refimpl" / "cse" / "keys.py").write_text("X = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "start")
    return tmp_path


def test_a_fresh_seed_on_the_committed_properties_is_a_first_run(repo):
    commit = protocol.head_commit(repo)
    (repo / "refimpl" / "cse" / "keys.py").write_text("X = 2\n")  # code, not a property
    assert protocol.properties_changed(repo, commit) == []
    assert protocol.first_run(True, [])
    assert not protocol.first_run(False, [])  # a replay


def test_a_changed_or_new_property_file_is_not_a_first_run(repo):
    commit = protocol.head_commit(repo)
    (repo / "properties" / "test_a.py").write_text("def test_a(): assert 0\n")
    (repo / "refimpl" / "strategies").mkdir()
    (repo / "refimpl" / "strategies" / "new.py").write_text("")
    changed = protocol.properties_changed(repo, commit)
    assert changed == ["properties/test_a.py", "refimpl/strategies/new.py"]
    assert not protocol.first_run(True, changed)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "tuned")
    assert protocol.properties_changed(repo, commit) == changed  # since the recorded commit
    assert protocol.properties_changed(repo, protocol.head_commit(repo)) == []


# --- the nightly job --------------------------------------------------------------------

def test_the_nightly_workflow_runs_the_script_and_uploads_its_record():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (the test extra has it)")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "schedule" in workflow[True]  # YAML 1.1 reads the key `on` as True
    steps = workflow["jobs"]["mutation"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    install = next(r for r in runs if "pip install" in r)
    assert 'pip install -c constraints.txt -e ".[test,mutation]"' in install
    command = next(r for r in runs if "mutation_score.py" in r).split()
    args = score_mod.parser().parse_args(command[command.index(
        "benchmarks/mutation_score.py") + 1:])
    assert args.seed is None and args.jobs == 2  # a fresh seed, on the runner's 2 cores
    upload = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()"
    assert Path(upload["with"]["path"]) == args.json.parent


def test_the_default_samples_fit_the_nightly_job():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (the test extra has it)")
    minutes = sum(protocol.estimated_seconds(score_mod.SECONDS_PER_MUTANT[c], n, 2)
                  for c, n in score_mod.DEFAULT_SAMPLE.items()) / 60
    limit = yaml.safe_load(WORKFLOW.read_text())["jobs"]["mutation"]["timeout-minutes"]
    assert minutes < limit / 2, (minutes, limit)  # half the limit: room for a slow runner


@pytest.mark.parametrize(("code", "summary", "demonstrated"), [
    (0, "3 passed in 0.5s", True),
    (0, "2 passed, 1 skipped in 0.5s", False),
    (0, "1 skipped in 0.1s", False),
    (0, "1 passed, 1 xfailed in 0.3s", False),
    (1, "1 failed, 1 passed in 0.3s", False),
])
def test_an_equivalence_is_demonstrated_only_by_a_test_that_ran_and_passed(
        monkeypatch, tmp_path, code, summary, demonstrated):
    """A skipped equivalence test shows nothing: on the release that skips it, the mutant may
    differ from the original."""
    ran = subprocess.CompletedProcess([], code, stdout=f"..\n{summary}\n".encode(), stderr=b"")
    monkeypatch.setattr(score_mod, "unit_test_run", lambda work, test: ran)
    verdict = score_mod.unit_test_verdict(tmp_path, "tests/test_x.py::test_y")
    assert (verdict == score_mod.DEMONSTRATED) is demonstrated
