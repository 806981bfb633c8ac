"""Replay one failing example outside pytest: what every reproducer file calls.

Algorithm
    1. Put the campaign's working folder on ``sys.path`` (a target module living there is
       found), import the property's file from the property suite (a folder, or the
       installed ``refimpl.properties`` by its package name) with pytest's assertion
       rewriting (a bare ``assert a == b`` then says what ``a`` and ``b`` were).
    2. Load the target. A property suite or a target that cannot be loaded is exit status 2:
       nothing was reproduced either way.
    3. Rebuild the example by the route the campaign recorded (:mod:`refimpl.fuzz.examples`):
       ``call``: evaluate the printed call (names resolved in the property's module,
       ``refimpl.strategies``, ``torch``, ``math``; the backend printed as ``<... object at
       0x...>`` becomes this run's); ``arguments``: load the pickled arguments;
       ``choices``: run the property (Hypothesis's wrapper) under ``@reproduce_failure``
       with the recorded choices, so its strategies draw exactly the failing example again,
       ``st.data()`` draws included; its other arguments (fixtures, pytest parameters) come
       from the printed call. A call or a pickle that no longer rebuilds the example (a
       pickle left behind) falls back to the choices where the file has them. No route
       reads the example database or depends on pytest's node ids. An example no route can
       rebuild is exit status 2, said plainly: a replay that cannot rebuild the example can
       never show it fixed.
    4. Call it under the campaign's per-example time limit. An exception (a timeout too) means
       the failure reproduces: exit status 1, after printing the expected and the observed
       value (this run's assertion message, and the one the campaign recorded). A return
       means it no longer does: 0.

A property whose setup timed out ran no example: it is replayed whole through pytest (same
rootdir as the campaign's workers, so the same node id), where a pass means fixed.

Nothing is written outside the reproducer's process: Hypothesis's storage goes to a
temporary folder removed at the end, there is no example database, and the pytest replay
loads neither its cache nor pytest-benchmark (no ``.hypothesis/``, ``.pytest_cache/``,
``.benchmarks/`` where it runs, which would make an uploaded ``--out`` refuse ``--force``).

With a time limit, steps 1-4 run in a child process (the reproducer run again, with
``REFIMPL_REPLAY_CHILD`` set) that the parent kills at twice the limit plus a grace: a
backend stuck inside C code, where the SIGALRM of step 4 never lands, still ends as
"reproduced", and so does a replay that dies of a signal.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path

import hypothesis
import pytest
from hypothesis import reproduce_failure, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import DidNotReproduce

from refimpl.fuzz.examples import REPLAY_FIXTURES, build_kwargs, build_some_kwargs, load_arguments
from refimpl.fuzz.suite import properties_folder
from refimpl.oracle import load_backend

CHILD = "REFIMPL_REPLAY_CHILD"
GRACE_SECONDS = 30.0  # the child's own start-up (imports) beyond twice the limit
FIXED, REPRODUCED, CANNOT = 0, 1, 2  # the exit statuses


class CannotRebuild(Exception):
    """The example cannot be rebuilt here: nothing can be said about the failure."""


def _exec_with_rewritten_asserts(module, path: Path) -> None:
    source = path.read_bytes()
    tree = ast.parse(source, filename=str(path))
    try:
        from _pytest.assertion.rewrite import rewrite_asserts

        rewrite_asserts(tree, source, str(path), None)
    except Exception:  # pytest missing or changed: plain asserts still reproduce
        tree = ast.parse(source, filename=str(path))
    exec(compile(tree, str(path), "exec"), vars(module))


def _load(properties: str, nodeid: str):
    """The property's module (its file executed afresh) and its test function (Hypothesis's
    wrapper where it has one); ``properties`` is a folder or the installed suite's name."""
    file_part, _, test_name = nodeid.partition("::")
    properties = properties_folder(properties)
    path = properties / Path(file_part).name
    sys.path.insert(0, str(properties))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses defined in it look their module up here
    _exec_with_rewritten_asserts(module, path)
    return module, getattr(module, test_name.split("[")[0])


def _inner(test):
    """The undecorated property (Hypothesis's ``inner_test``), or ``test`` itself."""
    return getattr(getattr(test, "hypothesis", None), "inner_test", test)


def _pytest_replay(properties: str, nodeid: str, target: str, timeout: float | None,
                   home: Path) -> int:
    """Run the whole property through pytest, as a campaign worker does (same rootdir, so
    the same node id), with an empty example database under ``home``."""
    os.environ["REFIMPL_FUZZ_SETTINGS"] = json.dumps({"database": str(home / "examples")})
    if timeout:
        os.environ["REFIMPL_FUZZ_TIMEOUT"] = str(timeout)
    os.environ.setdefault("REFIMPL_FUZZ_EVENTS", os.devnull)
    folder = properties_folder(properties).resolve()
    node = str(folder / Path(nodeid.split("::")[0]).name) + "::" + nodeid.split("::", 1)[1]
    return int(pytest.main([node, "-q", "-p", "refimpl.fuzz.events", "-p", "no:cacheprovider",
                            "-p", "no:benchmark", "-o", "addopts=", "--rootdir",
                            str(folder.parent), "--refimpl-target", target]))


def _with_choices(test, call: str, module, backend, choices) -> Callable[[], None]:
    """``test`` (Hypothesis's wrapper) set to replay exactly ``choices`` (``(release, blob)``
    of ``@reproduce_failure``), no database, no deadline; its other arguments (fixtures,
    pytest parameters) from the printed ``call``."""
    release, blob = choices
    if release != hypothesis.__version__:
        raise CannotRebuild(f"its choices were recorded by Hypothesis {release}; this is "
                            f"{hypothesis.__version__} (pip install hypothesis=={release})")
    needed = [name for name in inspect.signature(test).parameters
              if name not in REPLAY_FIXTURES]
    try:
        kwargs = build_some_kwargs(call, module, {}, needed)
    except Exception as exc:
        raise CannotRebuild(f"the printed call does not give {needed}: {exc!r}") from exc
    kwargs.update({name: backend for name in REPLAY_FIXTURES
                   if name in inspect.signature(test).parameters})
    # the attribute @settings sets; the decorator itself refuses a second @settings
    test._hypothesis_internal_use_settings = settings(
        test._hypothesis_internal_use_settings, database=None, deadline=None, print_blob=False)
    replayed = reproduce_failure(release, blob.encode("ascii"))(test)

    def run() -> None:
        try:
            replayed(**kwargs)
        except DidNotReproduce as exc:
            if "completed successfully" in str(exc):
                return  # the example ran and passed: fixed
            raise CannotRebuild(f"Hypothesis could not replay the choices: {exc}") from exc
    return run


def _direct(route: str, call: str, module, test, backend,
            arguments: str | None) -> Callable[[], None]:
    """The example rebuilt from its printed call or its pickled arguments, by ``route``."""
    fixtures = dict.fromkeys(REPLAY_FIXTURES, backend)
    if route == "arguments" and not (arguments and Path(arguments).exists()):
        raise CannotRebuild(f"its pickled arguments ({arguments}) are missing")
    if route not in ("call", "arguments"):
        raise CannotRebuild("the campaign kept nothing that rebuilds it: its printed call is "
                            "not code, its arguments do not pickle, and Hypothesis gave no "
                            "choices")
    try:
        kwargs = (build_kwargs(call, module, fixtures) if route == "call"
                  else {**load_arguments(Path(arguments)), **fixtures})
    except Exception as exc:  # a changed suite, a class that moved: not the target's failure
        raise CannotRebuild(f"its {route} no longer rebuilds it: {exc!r}") from exc
    return lambda: _inner(test)(**kwargs)


def _example(route: str, call: str, module, test, backend, arguments: str | None,
             choices) -> Callable[[], None]:
    """The failing example, rebuilt by ``route`` (else from its choices, where it has
    them), as a call that runs it; :class:`CannotRebuild` where nothing rebuilds it."""
    if route == "choices" and choices:
        return _with_choices(test, call, module, backend, choices)
    try:
        return _direct(route, call, module, test, backend, arguments)
    except CannotRebuild:
        if not choices:
            raise
        return _with_choices(test, call, module, backend, choices)


#: the verdict's lines fit this many columns (a terminal, a bug report).
WIDTH = 100


def fold(text: str, width: int = WIDTH) -> str:
    """``text`` with every line longer than ``width`` broken between words, its
    continuations indented two spaces more than the line; a word longer than a line is
    broken too. Every word is kept, in order, so the first words (``REPRODUCED:``, the
    error's kind) still start the first line."""
    folded = []
    for line in text.splitlines() or [""]:
        indent = line[:len(line) - len(line.lstrip())]
        folded += textwrap.wrap(line.strip(), width=width, initial_indent=indent,
                                subsequent_indent=indent + "  ", break_on_hyphens=False) or [""]
    return "\n".join(folded)


class _Timeout(Exception):
    pass


def _call(run: Callable[[], None], timeout: float | None) -> None:
    def alarm(signum, frame):
        raise _Timeout(f"timed out: the example ran longer than {timeout:g}s")

    if timeout:
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        run()
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)


def replay_bounded(timeout: float) -> int:
    """Run this reproducer again as a child and wait at most ``2 * timeout + GRACE_SECONDS``;
    its exit status, or 1 (reproduced) if it had to be killed or died of a signal."""
    limit = 2 * timeout + GRACE_SECONDS
    try:
        done = subprocess.run([sys.executable, *sys.argv], env=dict(os.environ, **{CHILD: "1"}),
                              timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        print("\n" + fold(f"REPRODUCED: the example was still running after {limit:g} s, "
                          f"past where the {timeout:g} s limit could interrupt it (stuck in C "
                          "code?); killed"))
        return REPRODUCED
    if done.returncode in (FIXED, REPRODUCED, CANNOT):
        return done.returncode
    print(f"\nREPRODUCED: the replay died (exit status {done.returncode})")
    return REPRODUCED


def replay(*, properties: str, nodeid: str, target: str, call: str, recorded: str = "",
           timeout: float | None = None, route: str = "call", arguments: str | None = None,
           choices: tuple[str, str] | None = None, cwd: str | None = None) -> int:
    """Re-run one failing example; 1 if it still fails, 0 if it passes now, 2 if the
    property suite or the target cannot be loaded, or the example cannot be rebuilt."""
    if timeout and not os.environ.get(CHILD):
        return replay_bounded(timeout)
    if cwd:
        sys.path.insert(0, cwd)
    with tempfile.TemporaryDirectory(prefix="refimpl-replay-") as home:
        set_hypothesis_home_dir(home)  # Hypothesis's own files: gone when the replay ends
        try:
            return _replay(properties, nodeid, target, call, recorded, timeout, route,
                           arguments, choices, Path(home))
        finally:
            set_hypothesis_home_dir(None)


def _replay(properties: str, nodeid: str, target: str, call: str, recorded: str,
            timeout: float | None, route: str, arguments: str | None,
            choices: tuple[str, str] | None, home: Path) -> int:
    try:
        module, test = _load(properties, nodeid)
    except Exception:  # the property suite itself did not load: not a reproduction
        traceback.print_exc()
        print(f"\ncould not load {nodeid} from {properties}")
        return CANNOT
    try:
        backend = load_backend(target)
    except Exception as exc:  # ImportError, a constructor that raises, MissingExtra, ...
        print(fold(f"could not load target {target!r}: {type(exc).__name__}: {exc}"))
        return CANNOT
    if not call:  # the property timed out before any example (in its setup)
        print("no example ran (the property's setup timed out); replaying it through pytest")
        return _pytest_replay(properties, nodeid, target, timeout, home)
    try:
        _call(_example(route, call, module, test, backend, arguments, choices), timeout)
    except CannotRebuild as exc:
        print("\n" + fold(f"CANNOT TELL: this reproducer cannot rebuild the failing example "
                          f"of {nodeid}: {exc}.\nIt neither reproduces the failure nor shows "
                          "it fixed; see the example the campaign recorded (CALL) and run "
                          "the campaign again."))
        return CANNOT
    except Exception as exc:
        traceback.print_exc()
        print("\n" + fold(f"REPRODUCED: {nodeid} fails against {target}"))
        print(fold(f"expected vs observed (this run): {type(exc).__name__}: {exc}"))
        if recorded:
            print(fold(f"expected vs observed (the campaign): {recorded}"))
        return REPRODUCED
    print(fold(f"not reproduced: {nodeid} passes against {target}"))
    return FIXED
