"""The oracle's strength: the mutation score of each component's target properties.

A mutant is refimpl with one small change (an operator, a constant, a comparison, a boolean)
made by cosmic-ray. The *killing suite* of a component is its target properties (the tests in
``refimpl/properties/test_<component>*.py`` that take the ``refimpl_backend`` fixture), run against
refimpl under the ``ci`` Hypothesis profile, stopping at the first failure. A mutant is killed
when that suite fails (or times out), survives when it passes. The score of a component is
``killed / (killed + survived - equivalent - cuda_only - api)``, where ``equivalent`` are the
survivors argued equivalent in docs/oracle-strength.md (``EQUIVALENT`` below, keyed by mutant,
and every annotation-only mutant), ``cuda_only`` those in code that runs only on a GPU
(``CUDA_ONLY``) and ``api`` those whose effect only refimpl's own API shows (``REFIMPL_API``),
which the unit test named for each kills; each is reported in its own column.

Algorithm, per component:
  1. copy the source tree into a work folder (cosmic-ray mutates files in place: never the
     checkout itself);
  2. ``cosmic-ray init`` over the component's modules (``MODULES``): every mutant of every
     operator, minus ``EXCLUDED_OPERATORS``;
  3. keep a seeded sample of ``--sample`` mutants (``random.Random(seed).sample`` over the
     mutants sorted by file, position and operator), mark the rest skipped;
  4. run the killing suite once unmutated (the baseline): a target property that fails
     there cannot judge a mutant, so it is deselected, and the report says so;
  5. ``cosmic-ray exec``: one test command per mutant, the killing suite. Importing torch
     costs more than the suite itself on a loaded machine, so the command is a thin client
     of a fork server (``--serve``) that has imported torch, Hypothesis and pytest, but never
     refimpl: each mutant's suite runs in a fresh fork that imports the mutated refimpl from
     the work folder, as a new process would. With ``--jobs N`` the sample is dealt into N
     shards, each a copy of the work folder with its own fork server, run side by side and
     merged back into one session (the same mutants and verdicts as one process);
  6. each survivor listed in ``REFIMPL_API``: applied to a fresh copy, its unit test run;
  7. print killed / survived / score per component, and every survivor (file:line operator).
Invariant: the same seed, sample size and source give the same mutants.

Run it (long; not in CI): ``python benchmarks/mutation_score.py --component cse --sample 40``
(``tox -e mutation``). Needs the ``mutation`` extra (cosmic-ray). ``--report WORK`` re-prints
the figures of a finished run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mutation_select import EVERY_TEST, LineTracer, only_annotations, select_tests

ROOT = Path(__file__).resolve().parent.parent

#: The code of each component the oracle must protect (issues 11 and 21): the FLOP formulas,
#: the CSE effect rules and keys, the partitioner with the solvers a target can be asked for
#: (refimpl's exact default, torch's knapsack heuristics through
#: ``activation_memory_budget_solver``), the checkpoint frames and replay, the layout decision
#: and rewrite. Left out: ``exhaustive.py`` (``solver="brute"``, an argument of refimpl's own
#: ``compile`` that no target shares; tests/test_partition_solvers.py checks it),
#: ``lagrangian.py`` (a measured alternative no partitioner calls: benchmarks only) and
#: ``runtime.py`` (timing nodes for the ``profile`` estimator: a mutant there changes
#: timings, which no deterministic verdict sees; tests/test_partition_profile_estimator.py).
MODULES = {
    "flops": ["refimpl/flops/formulas/matmul.py", "refimpl/flops/formulas/conv.py",
              "refimpl/flops/formulas/attention.py", "refimpl/flops/formulas/rnn.py",
              "refimpl/flops/formulas/transformer.py"],
    "cse": ["refimpl/cse/effects.py", "refimpl/cse/keys.py", "refimpl/cse/eliminate.py"],
    "partition": ["refimpl/partition/partitioner.py", "refimpl/partition/mincut.py",
                  "refimpl/partition/candidates.py", "refimpl/partition/cost.py",
                  "refimpl/partition/exact.py", "refimpl/partition/knapsack.py"],
    "checkpoint": ["refimpl/checkpointing/frame.py", "refimpl/checkpointing/replay.py",
                   "refimpl/checkpointing/wrapper.py"],
    "layout": ["refimpl/layout/decision.py", "refimpl/layout/rewrite.py",
               "refimpl/layout/plan.py"],
}

#: Operators left out, and why: replacing + - * / with a bit or shift operator, ** or % almost
#: always raises at once (killed for free, inflating the score); the variable inserter and
#: replacer pick names at random (not repeatable).
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_.*_(Pow|Mod|RShift|LShift|BitOr|BitAnd|BitXor)$",
    r"core/VariableInserter", r"core/VariableReplacer",
]

#: Survivors argued equivalent in docs/oracle-strength.md: "path:line operator occurrence" ->
#: why. Keys carry line numbers of the tree they were measured on (2026-11-23, 08:12-09:35
#: UTC, and 2026-11-25 for the run in docs/oracle-strength.md): re-check them when the code
#: moves. Annotation-only mutants need no entry (``ANNOTATION_ONLY``).
EQUIVALENT: dict[str, str] = {
    "refimpl/cse/effects.py:162 core/ReplaceComparisonOperator_Eq_Is 1":
        "node.op is one of fx's interned literals: `is` and `==` agree",
    "refimpl/cse/effects.py:269 core/ReplaceComparisonOperator_NotEq_Lt 1":
        "call_module never reaches it; no torch Tensor method takes an `inplace` argument",
    "refimpl/layout/decision.py:82 core/NumberReplacer 12":
        "conv FLOPs only enter the decision as a ratio (weighted <= total): scale-invariant",
    "refimpl/checkpointing/frame.py:75 core/ReplaceComparisonOperator_Eq_Is 0":
        "-1 is a cached small int in CPython",
    "refimpl/checkpointing/frame.py:75 core/ReplaceComparisonOperator_Eq_LtE 0":
        "graph task ids are -1 or >= 0: `<= -1` is `== -1`",
    "refimpl/checkpointing/frame.py:92 core/ReplaceBinaryOperator_BitOr_Mul 1":
        "an annotation under `from __future__ import annotations`: never evaluated",
    "refimpl/checkpointing/frame.py:192 core/ReplaceBinaryOperator_BitOr_Add 4":
        "an annotation under `from __future__ import annotations`: never evaluated",
    "refimpl/cse/effects.py:272 core/ReplaceComparisonOperator_Is_Eq 1":
        "`==` on the functions, builtins and descriptors of torch's namespaces is identity "
        "(none defines __eq__; OpOverload targets returned earlier)",
    "refimpl/cse/eliminate.py:95 core/ReplaceComparisonOperator_IsNot_NotEq 0":
        "fx.Node defines no __eq__/__ne__: `!=` is identity",
    "refimpl/cse/eliminate.py:192 core/ReplaceComparisonOperator_IsNot_LtE 3":
        "Node `<=` is graph order, so every new key reads as refused: one extra pass after a "
        "pass that merged, which merges nothing (a pass without refusals is a fixpoint)",
    "refimpl/cse/keys.py:51 core/ReplaceComparisonOperator_Is_Eq 2":
        "`type(v) == list` is identity: type does not override __eq__",
    "refimpl/partition/candidates.py:65 core/ReplaceComparisonOperator_Eq_Is 1":
        "node roles are assigned from the same interned string literals: `is` and `==` agree",
    "refimpl/partition/cost.py:94 core/ReplaceComparisonOperator_NotEq_Lt 0":
        "every other fx op name (call_method, call_module, get_attr, output, placeholder) "
        "sorts after 'call_function', and those nodes' targets are strings, never an "
        "OpOverload: both forms return 0 for exactly the same nodes",
    "refimpl/partition/exact.py:128 core/NumberReplacer 36":
        "the tie tolerance only admits plans within 2e-9 of the optimum instead of 1e-9; "
        "recompute costs are whole FLOPs, so no plan lies in between",
    "refimpl/partition/exact.py:128 core/NumberReplacer 37":
        "a tolerance of 0 where the optimum is 0 (else the same): costs are whole FLOPs and "
        "HiGHS's own feasibility tolerance (1e-7) admits the same plans",
    "refimpl/partition/exact.py:131 core/NumberReplacer 40":
        "`cost > 1` for `cost > 0`: under the flops estimator (the only one a target can "
        "select) every cost is 0 or an even count >= 2 (each FLOP formula is 2 x a product "
        "of sizes), so the same nodes are costly",
    "refimpl/partition/exact.py:149 core/ReplaceUnaryOperator_USub_Not 3":
        "a lower bound of 0 (`not inf`) for -inf on the cap rows: both rows are already >= 0 "
        "at every point the other rows admit (bytes x saved, with saved = a - r >= 0 a row; "
        "costs >= 0 x r, with r >= 0 a bound), so the feasible set and the optima are the same",
    "refimpl/partition/exact.py:165 core/ReplaceComparisonOperator_NotEq_Lt 0":
        "`status < 0` for `!= 0`: scipy's statuses are 0-4, 1 and 2 raise just above, and "
        "scipy's HiGHS wrapper returns x only for an optimum or a limit (status 1), or a "
        "solution limit (an option refimpl never sets): statuses 3 and 4 come with x None",
    "refimpl/partition/cost.py:78 core/ReplaceBinaryOperator_Mul_Div 0":
        "unreachable: value_bytes reads a traced joint graph's values, and no traced graph "
        "holds a tensor whose storage cannot be read (sparse and strided nested inputs "
        "compile no graph; jagged nested tensors fail before the partitioner, "
        "docs/oracle-strength.md)",
    "refimpl/partition/cost.py:78 core/ReplaceBinaryOperator_Mul_FloorDiv 0":
        "the same statement as Mul_Div: unreachable",
    "refimpl/partition/knapsack.py:84 core/ReplaceUnaryOperator_USub_Invert 7":
        "the key of a zero-byte item; solve() passes only items with bytes > 0 "
        "(candidates.items drops the rest), so the branch never runs",
    "refimpl/partition/knapsack.py:87 core/ReplaceComparisonOperator_Gt_NotEq 2":
        "greedy() checks every runtime >= 0 first (_check raises otherwise), and runtimes "
        "are FLOP counts or timings, never NaN: `!= 0` is `> 0`",
    "refimpl/layout/decision.py:95 core/ReplaceComparisonOperator_Eq_GtE 0":
        "LayoutOptions admits only 'auto', 'always' and 'never'; of these only 'never' "
        "sorts at or after 'never'",
    "refimpl/layout/plan.py:63 core/ReplaceComparisonOperator_Eq_Is 2":
        "a fact's kind is one of refimpl.layout.ops's module constants (or None): `is` and "
        "`==` agree",
    "refimpl/checkpointing/replay.py:29 core/ReplaceTrueWithFalse 0":
        "the Autocast record is built once in capture and only read in replayed: frozen or "
        "not, nothing writes or hashes it",
}

#: Survivors in code that runs only on a CUDA device: this machine has none, so they are
#: counted apart (neither killed nor equivalent) and left out of the score, which says so.
#: Each names the device property that should kill it on a GPU, or says none does.
CUDA_ONLY: dict[str, str] = {
    "refimpl/checkpointing/replay.py:55 core/ReplaceComparisonOperator_Eq_GtE 0":
        "which devices' RNG is saved; none: test_checkpoint_device.py uses one CUDA device",
    "refimpl/checkpointing/replay.py:55 core/ReplaceComparisonOperator_Eq_Is 0":
        "the same line; none (differs only with an input on a second GPU)",
    "refimpl/checkpointing/replay.py:55 core/ReplaceComparisonOperator_Eq_LtE 0":
        "the same line; none (differs with a CPU or meta input while CUDA is initialised)",
    "refimpl/checkpointing/replay.py:55 core/ReplaceComparisonOperator_Eq_NotEq 0":
        "the same line; none (as Eq_LtE)",
    "refimpl/checkpointing/replay.py:98 core/ZeroIterationForLoop 1":
        "CUDA generator states restored: test_cuda_rng_restored_on_recompute",
}

#: Survivors whose effect only refimpl's own API shows: no target shares that API, so no
#: target property can see them. Each names the unit test of refimpl's that must kill it and
#: says why no target reaches it. The script applies each such survivor to a fresh copy of the
#: tree and runs that test (:func:`api_verdicts`): killed there, the survivor is counted
#: apart (the ``api`` column, out of the score, as CUDA_ONLY); a unit test that passes on it
#: leaves it a survivor.
SOLVERS_TEST = "tests/test_partition_solvers.py::test_exact_solvers_agree_with_every_subset"
DP_ONLY = ("torch's knapsack `dp`: only refimpl.compile(solver='dp') reaches it; the config "
           "value 'dp' is torch's default and selects refimpl's exact solver in a target")
REFIMPL_API: dict[str, tuple[str, str]] = {
    "refimpl/partition/knapsack.py:55 core/ReplaceComparisonOperator_Gt_IsNot 0":
        (SOLVERS_TEST, DP_ONLY),
    "refimpl/partition/knapsack.py:55 core/ReplaceOrWithAnd 1": (SOLVERS_TEST, DP_ONLY),
    "refimpl/partition/knapsack.py:57 core/ReplaceUnaryOperator_USub_Not 2":
        (SOLVERS_TEST, DP_ONLY),
    "refimpl/partition/mincut.py:97 core/ReplaceComparisonOperator_Gt_LtE 2": (
        "tests/test_partition_errors.py::test_value_neither_savable_nor_recomputable_is_an_error",
        "one augmenting path a phase still ends at a maximum flow, and every maximum flow "
        "leaves the same source side: only the flow total differs, read only to raise "
        "NoFiniteCut, which no traced program triggers (a banned tuple read by the backward)"),
    "refimpl/partition/partitioner.py:89 core/ReplaceComparisonOperator_Eq_Gt 2": (
        "tests/test_partition_api.py::test_explain_lists_saved_activations_and_inputs_apart",
        "which saved names refimpl.explain's Plan lists as inputs: the backend hands the "
        "backward their union either way"),
}

#: What the fork server imports before forking (never refimpl: the children import the mutant).
PRELOADED = ("torch", "torch.fx", "torch._dynamo", "numpy", "scipy")

COPIED = ["refimpl", "conftest.py", "pyproject.toml", "setup.cfg", "benchmarks", "tests"]
#: what the client prints for a mutant no target property executes
NOT_EXECUTED = "no target property executes the mutated statement"
#: what the client prints for a mutant that changed only annotations (never evaluated)
ANNOTATION_ONLY = "equivalent by construction: only an annotation changed"
#: per-test line coverage of the unmutated suite (:mod:`mutation_select`), in the work folder
COVERAGE = "coverage.json"
#: the unmutated copies of the mutated modules, in the work folder
PRISTINE = "pristine"
#: the unit tests' verdicts on the REFIMPL_API survivors (:func:`api_verdicts`), in the work
#: folder: mutant key -> "killed", "survived" or "error: ..."
API_VERDICTS = "api_verdicts.json"


@dataclass(frozen=True)
class Mutant:
    """One sampled mutant and what the killing suite made of it."""

    job_id: str
    path: str
    line: int
    operator: str
    occurrence: int
    outcome: str  # killed, survived, incompetent, pending
    executed: bool = True  # False: no target property executes the mutated statement
    annotation_only: bool = False  # equivalent by construction (ANNOTATION_ONLY)

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line} {self.operator} {self.occurrence}"


@dataclass(frozen=True)
class Score:
    """A component's figures."""

    component: str
    sampled: int
    killed: int
    survived: int
    equivalent: int
    incompetent: int
    seconds: float
    cuda_only: int = 0  # survivors in CUDA-only code (CUDA_ONLY), left out of the score
    api: int = 0  # survivors only refimpl's API shows, killed by its unit test (REFIMPL_API)

    @property
    def score(self) -> float:
        live = self.killed + self.survived - self.equivalent - self.cuda_only - self.api
        return self.killed / live if live else float("nan")


def pytest_collection_modifyitems(config, items):
    """As a pytest plugin (``-p mutation_score``): keep only target properties, the tests
    that take the ``refimpl_backend`` fixture."""
    keep = [item for item in items if "refimpl_backend" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_configure(config):
    """As a pytest plugin: in the baseline run (``MUTATION_TRACE`` names the component),
    trace the lines each test executes (:class:`mutation_select.LineTracer`)."""
    component = os.environ.get("MUTATION_TRACE")
    if component:
        work = Path.cwd()
        config.pluginmanager.register(LineTracer(work, MODULES[component], work / COVERAGE))


def killing_args(work: Path, component: str) -> list[str]:
    """pytest's arguments for the component's killing suite (paths relative to ``work``)."""
    files = sorted(p.relative_to(work).as_posix()
                   for p in (work / "refimpl" / "properties").glob(f"test_{component}*.py"))
    if not files:
        raise SystemExit(f"component={component!r}: no refimpl/properties/test_{component}*.py")
    return ["-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_score",
            "--refimpl-target", "refimpl", *files]


def killing_command(work: Path, component: str, sock: Path, deselect: list[str]) -> str:
    extra = [arg for nodeid in deselect for arg in ("--deselect", nodeid)]
    return (f"{sys.executable} {Path(__file__).resolve()} --client {sock} -- "
            + " ".join(killing_args(work, component) + extra))


def baseline_failures(work: Path, component: str, sock: Path) -> list[str]:
    """Run the killing suite on the unmutated copy, tracing each test's lines into
    ``COVERAGE``; the node ids of the target properties that fail there (a mutant cannot be
    judged by a property that fails without it)."""
    args = [a for a in killing_args(work, component) if a != "-x"] + ["-rf"]
    env = dict(environment(work), MUTATION_TRACE=component)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--client", str(sock),
                          "--", *args], cwd=work, env=env, capture_output=True,
                         text=True).stdout
    failed = sorted({line.split()[1] for line in out.splitlines()
                     if line.startswith(("FAILED ", "ERROR ")) and "::" in line})
    (work / "baseline.txt").write_text(
        (out.strip().splitlines() or ["(no output)"])[-1] + "\n"
        + "".join(f"deselected (fails unmutated): {f}\n" for f in failed))
    return failed


# --- the fork server: torch imported once, refimpl imported fresh per mutant ----------------

def serve(sock: Path) -> None:
    """Accept one request at a time: ``{"cwd", "args", "env", "log"}``; fork; the child runs
    ``pytest.main(args)`` in ``cwd`` with its output in ``log``; reply with its exit code. A
    client that disconnects (cosmic-ray's timeout killed it) gets its child killed."""
    for name in PRELOADED:
        importlib.import_module(name)
    assert not any(name.startswith("refimpl") for name in sys.modules), "refimpl preloaded"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(1)
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile().readline())
            pid = os.fork()
            if pid == 0:
                server.close()
                _run_child(request)
            code = _wait_or_kill(pid, conn)
            if code is not None:
                conn.sendall(f"{code}\n".encode())


def _run_child(request: dict) -> None:
    os.setpgid(0, 0)
    sys.dont_write_bytecode = True
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[:0] = [request["cwd"], os.path.join(request["cwd"], "benchmarks")]
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 3
    try:
        import pytest
        code = int(pytest.main(request["args"]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait_or_kill(pid: int, conn: socket.socket) -> int | None:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) % 256
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and not conn.recv(1):  # the client is gone: stop its suite
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None


def killing_tests(work: Path, args: list[str]) -> list[str] | str | None:
    """The pytest arguments for the mutant now in ``work``: the suite's files replaced by the
    tests that executed the mutated statement (:func:`mutation_select.select_tests`), fastest
    first; None when no test did (it survives without a run); :data:`ANNOTATION_ONLY` when
    only an annotation changed (equivalent by construction). Before the baseline's coverage
    exists (the baseline itself), ``args`` unchanged."""
    coverage_file = work / COVERAGE
    if not coverage_file.exists():
        return args
    coverage = json.loads(coverage_file.read_text())
    mutated = [p.relative_to(work / PRISTINE).as_posix()
               for p in sorted((work / PRISTINE).rglob("*.py"))
               if p.read_text() != (work / p.relative_to(work / PRISTINE)).read_text()]
    if len(mutated) != 1:
        raise SystemExit(f"expected one mutated module in {work}, found {mutated}")
    path = mutated[0]
    pristine, mutant = (work / PRISTINE / path).read_text(), (work / path).read_text()
    if only_annotations(pristine, mutant):
        return ANNOTATION_ONLY
    tests = select_tests(coverage, path, pristine, mutant)
    if tests == [EVERY_TEST]:
        seconds = coverage["seconds"]
        tests = sorted(seconds, key=lambda test: (seconds[test], test))
    if not tests:
        return None
    return [a for a in args if not a.endswith(".py")] + tests


def client(sock: Path, args: list[str]) -> int:
    """The test command cosmic-ray runs: ask the fork server to run pytest here, on the
    tests that can kill the mutant (:func:`killing_tests`)."""
    selected = killing_tests(Path.cwd(), args)
    if selected is None or selected == ANNOTATION_ONLY:
        print(f"{selected or NOT_EXECUTED}: survived without a run")
        return 0
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(sock))
        keep = ("CI", "OMP_NUM_THREADS", "HYPOTHESIS_PROFILE", "REFIMPL_TARGET",
                "MUTATION_TRACE")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        conn.sendall((json.dumps({"cwd": os.getcwd(), "args": selected, "env": env,
                                  "log": log.name}) + "\n").encode())
        reply = conn.makefile().readline()
        print(log.read()[-20000:])
        return int(reply) if reply.strip() else 3


def start_server(work: Path) -> tuple[subprocess.Popen, Path]:
    sock = work / "forkserver.sock"
    sock.unlink(missing_ok=True)
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve",
                               str(sock)], env=environment(work), cwd=work)
    while not sock.exists():
        if server.poll() is not None:
            raise SystemExit(f"the fork server exited with {server.returncode}")
        time.sleep(0.5)
    return server, sock


def copy_tree(work: Path, component: str) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, work / name)
    for path in MODULES[component]:
        (work / PRISTINE / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / path, work / PRISTINE / path)


def write_config(work: Path, component: str, timeout: float, sock: Path,
                 deselect: list[str]) -> Path:
    config = work / f"cosmic-ray-{component}.toml"
    modules = ", ".join(f'"{m}"' for m in MODULES[component])
    excluded = ", ".join(f"'{e}'" for e in EXCLUDED_OPERATORS)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = \"{killing_command(work, component, sock, deselect)}\"\n\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n\n"
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n")
    return config


def environment(work: Path) -> dict[str, str]:
    env = dict(os.environ, CI="true", OMP_NUM_THREADS="1", HYPOTHESIS_PROFILE="ci",
               REFIMPL_TARGET="refimpl")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)  # the server imports no refimpl; its children add the copy
    return env


def cosmic_ray(work: Path, *args: str) -> None:
    exe = Path(sys.executable).with_name("cosmic-ray")
    subprocess.run([str(exe), *args], cwd=work, env=environment(work), check=True)


def stratified(keys: list[str], size: int, seed: int) -> set[int]:
    """Indices of a seeded sample of ``size`` items, each item keyed by its module: every
    module first gets ``size // (2 * modules)`` of its items (at least one), the rest of the
    sample is drawn from all items left. So every module of a component is mutated (a small
    one, such as a solver, is not left to chance) and most of the sample stays uniform.
    Invariant: the same keys, size and seed give the same indices."""
    rng = random.Random(seed)
    modules = sorted(set(keys))
    floor = max(1, size // (2 * len(modules))) if modules else 0
    chosen: set[int] = set()
    for module in modules:
        own = [i for i, key in enumerate(keys) if key == module]
        chosen.update(rng.sample(own, min(floor, len(own), size - len(chosen))))
    rest = [i for i in range(len(keys)) if i not in chosen]
    chosen.update(rng.sample(rest, min(size - len(chosen), len(rest))))
    return chosen


def sample(db_path: Path, size: int, seed: int) -> int:
    """Mark every pending mutant outside the seeded sample (:func:`stratified`, over the
    mutants sorted by file, position and operator) as skipped; the sample's size."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        pending = sorted(db.pending_work_items, key=lambda item: (
            str(item.mutations[0].module_path), item.mutations[0].start_pos,
            item.mutations[0].operator_name, item.mutations[0].occurrence))
        keys = [Path(item.mutations[0].module_path).as_posix() for item in pending]
        chosen = {pending[i].job_id for i in stratified(keys, size, seed)}
        for item in pending:
            if item.job_id not in chosen:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output="not in the sample"))
        return len(chosen)


def _value(outcome) -> str:
    return str(getattr(outcome, "value", outcome))


def mutants(db_path: Path) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db

    found = []
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == "skipped":
                continue
            spec = item.mutations[0]
            found.append(Mutant(item.job_id, Path(spec.module_path).as_posix(),
                                spec.start_pos[0], spec.operator_name, spec.occurrence,
                                _value(result.test_outcome or result.worker_outcome),
                                NOT_EXECUTED not in (result.output or ""),
                                ANNOTATION_ONLY in (result.output or "")))
    return sorted(found, key=lambda m: (m.path, m.line, m.operator, m.occurrence))


def score(component: str, found: list[Mutant], seconds: float,
          verdicts: dict[str, str]) -> Score:
    """The figures of ``found``; ``verdicts``: :func:`api_verdicts`' of the survivors."""
    count = lambda outcome: sum(m.outcome == outcome for m in found)
    equivalent = sum(m.outcome == "survived" and (m.key in EQUIVALENT or m.annotation_only)
                     for m in found)
    cuda_only = sum(m.outcome == "survived" and m.key in CUDA_ONLY for m in found)
    api = sum(m.outcome == "survived" and verdicts.get(m.key) == "killed" for m in found)
    return Score(component, len(found), count("killed"), count("survived"), equivalent,
                 len(found) - count("killed") - count("survived"), seconds, cuda_only, api)


def api_verdicts(work: Path, found: list[Mutant]) -> dict[str, str]:
    """Each survivor of :data:`REFIMPL_API` applied (``cosmic-ray apply``) to a fresh copy
    of the work folder's unmutated tree, and its unit test run there: "killed" when the
    test fails (pytest's exit 1), "survived" when it passes, "error: ..." when it cannot
    judge (it fails unmutated too, or no longer exists). Written to :data:`API_VERDICTS`."""
    verdicts: dict[str, str] = {}
    unmutated: dict[str, int] = {}  # test -> its exit code on the unmutated tree
    for m in found:
        if m.outcome != "survived" or m.key not in REFIMPL_API:
            continue
        test = REFIMPL_API[m.key][0]
        if test not in unmutated:
            unmutated[test] = unit_test_exit(work, test, None)
        code = unit_test_exit(work, test, m) if unmutated[test] == 0 else None
        verdicts[m.key] = ({0: "survived", 1: "killed"}.get(code, f"error: pytest exit {code}")
                           if code is not None
                           else f"error: fails unmutated (pytest exit {unmutated[test]})")
        print(f"[unit test] {m.key}: {verdicts[m.key]} ({test})", flush=True)
    (work / API_VERDICTS).write_text(json.dumps(verdicts, indent=1) + "\n")
    return verdicts


def unit_test_exit(work: Path, test: str, mutant: Mutant | None) -> int:
    """pytest's exit code for ``test`` in a fresh copy of ``work``'s tree, with ``mutant``
    applied (None: unmutated)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        for name in COPIED:
            src = work / name
            if src.is_dir():
                shutil.copytree(src, copy / name)
            elif src.exists():
                shutil.copy2(src, copy / name)
        if mutant is not None:
            cosmic_ray(copy, "apply", mutant.path, mutant.operator, str(mutant.occurrence))
        env = dict(environment(copy), PYTHONPATH=str(copy))
        return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                               "no:cacheprovider", test], cwd=copy, env=env,
                              capture_output=True).returncode


def saved_verdicts(work: Path) -> dict[str, str]:
    path = work / API_VERDICTS
    return json.loads(path.read_text()) if path.exists() else {}


def run_component(component: str, work_root: Path, size: int, seed: int,
                  timeout: float, jobs: int) -> Score:
    work = work_root / component
    copy_tree(work, component)
    start = time.monotonic()
    server, sock = start_server(work)
    try:
        deselect = baseline_failures(work, component, sock)
    finally:
        server.terminate()
        server.wait()
    print(f"[{component}] baseline: {(work / 'baseline.txt').read_text().strip()}",
          flush=True)
    config = write_config(work, component, timeout, sock, deselect)
    db = work / "session.sqlite"
    cosmic_ray(work, "init", config.name, db.name)
    exe = Path(sys.executable).with_name("cr-filter-operators")
    subprocess.run([str(exe), db.name, config.name], cwd=work, check=True)
    print(f"[{component}] {sample(db, size, seed)} mutants sampled (seed {seed}); "
          f"{jobs} shard(s)", flush=True)
    shards = make_shards(work, component, jobs, timeout, deselect)
    with ThreadPoolExecutor(max_workers=len(shards) or 1) as pool:
        list(pool.map(lambda shard: exec_shard(shard, component), shards))
    merge_shards(db, shards)
    for shard in shards:
        shutil.rmtree(shard)
    found = mutants(db)
    verdicts = api_verdicts(work, found)
    seconds = time.monotonic() - start
    (work / "seconds").write_text(f"{seconds:.0f}\n")
    return score(component, found, seconds, verdicts)


def make_shards(work: Path, component: str, jobs: int, timeout: float,
                deselect: list[str]) -> list[Path]:
    """Split the sample's pending mutants into up to ``jobs`` shards, dealt round-robin in
    the session's order: each shard is a copy of the work folder (its own tree, fork server
    and session database) in which the other shards' mutants are marked skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
        pending = sorted(item.job_id for item in db.pending_work_items)
    owned = [pending[i::jobs] for i in range(min(jobs, len(pending)))]
    shards = []
    for i, jobs_of_shard in enumerate(owned):
        shard = work.with_name(f"{work.name}.shard{i}")
        if shard.exists():
            shutil.rmtree(shard)
        shutil.copytree(work, shard, ignore=shutil.ignore_patterns("forkserver.sock"))
        write_config(shard, component, timeout, shard / "forkserver.sock", deselect)
        with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as db:
            for job in set(pending) - set(jobs_of_shard):
                db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                              output="in another shard"))
        shards.append(shard)
    return shards


def exec_shard(shard: Path, component: str) -> None:
    """``cosmic-ray exec`` in one shard, beside its own fork server."""
    server, _ = start_server(shard)
    try:
        cosmic_ray(shard, "exec", f"cosmic-ray-{component}.toml", "session.sqlite")
    finally:
        server.terminate()
        server.wait()


def merge_shards(db_path: Path, shards: list[Path]) -> None:
    """Copy each shard's results for its own mutants into the session at ``db_path``."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for shard in shards:
            with use_db(str(shard / "session.sqlite"), WorkDB.Mode.open) as part:
                for item, result in part.completed_work_items:
                    if result.output != "in another shard" and \
                            result.worker_outcome != "skipped":
                        db.set_result(item.job_id, result)
        left = [item.job_id for item in db.pending_work_items]
    if left:
        raise SystemExit(f"{db_path}: {len(left)} sampled mutants have no result after "
                         f"the shards ran (see the shards' output): {left}")


def report(scores: list[Score], work_root: Path) -> None:
    print(f"\n{'component':<11} {'sampled':>7} {'killed':>6} {'survived':>8} {'equiv':>5} "
          f"{'cuda':>4} {'api':>3} {'incomp':>6} {'score':>6} {'time':>7}")
    for s in scores:
        print(f"{s.component:<11} {s.sampled:>7} {s.killed:>6} {s.survived:>8} "
              f"{s.equivalent:>5} {s.cuda_only:>4} {s.api:>3} {s.incompetent:>6} "
              f"{s.score:>6.0%} {s.seconds:>6.0f}s")
    for s in scores:
        baseline = work_root / s.component / "baseline.txt"
        if baseline.exists():
            print(f"  baseline [{s.component}] " + baseline.read_text().strip().replace(
                "\n", f"\n  baseline [{s.component}] "))
        verdicts = saved_verdicts(work_root / s.component)
        for m in mutants(work_root / s.component / "session.sqlite"):
            if m.outcome == "survived":
                api = verdicts.get(m.key)
                mark = (" (equivalent)" if m.key in EQUIVALENT else "") + (
                    f" (refimpl API: unit test {api})" if api else "") + (
                    " (CUDA-only)" if m.key in CUDA_ONLY else "") + (
                    f" ({ANNOTATION_ONLY})" if m.annotation_only else "") + (
                    "" if m.executed else f" ({NOT_EXECUTED})")
                print(f"  survivor [{s.component}] {m.key}{mark}")


def finished(component: str, work_root: Path) -> Score | None:
    """The figures of a finished session in ``work_root`` (``--report``), or None."""
    work = work_root / component
    if not (work / "session.sqlite").exists():
        print(f"[{component}] no finished session in {work}")
        return None
    seconds_file = work / "seconds"
    seconds = float(seconds_file.read_text()) if seconds_file.exists() else float("nan")
    return score(component, mutants(work / "session.sqlite"), seconds, saved_verdicts(work))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--component", default=",".join(MODULES),
                        help=f"comma-separated, of {', '.join(MODULES)}")
    parser.add_argument("--sample", type=int, default=40, help="mutants per component")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    parser.add_argument("--jobs", type=int, default=1,
                        help="mutants run side by side (the components run one after "
                             "another, each split into this many shards)")
    parser.add_argument("--work", type=Path, default=ROOT / ".mutation",
                        help="work folder (copies of the tree, cosmic-ray sessions)")
    parser.add_argument("--report", action="store_true",
                        help="only print the figures of the finished sessions in --work")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--client", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("pytest_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
    if args.client:
        return client(args.client, args.pytest_args)
    components = [c for c in args.component.split(",") if c]
    unknown = [c for c in components if c not in MODULES]
    if unknown or not components:
        parser.error(f"--component={args.component!r}: each must be one of {', '.join(MODULES)}")
    if args.jobs < 1 or args.sample < 1:
        parser.error(f"--jobs={args.jobs}, --sample={args.sample}: each must be >= 1")
    if args.report:
        scores = [s for s in map(lambda c: finished(c, args.work), components) if s]
    else:
        scores = [run_component(c, args.work, args.sample, args.seed, args.timeout,
                                args.jobs) for c in components]
    report(scores, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
