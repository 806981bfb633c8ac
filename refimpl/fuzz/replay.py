"""Replay one failing example outside pytest: what every reproducer file calls.

Algorithm
    1. Put the campaign's working folder on ``sys.path`` (a target module living there is
       found), import the property's file from the property suite (a folder, or the
       installed ``refimpl.properties`` by its package name) with pytest's
       assertion rewriting (a bare ``assert a == b`` then says what ``a`` and ``b`` were), and
       take the undecorated test function (Hypothesis's ``inner_test``).
    2. Load the target. A property suite or a target that cannot be loaded is exit status 2:
       nothing was reproduced either way.
    3. Rebuild the arguments: from the pickled arguments the campaign saved (tensors and
       modules included), else by evaluating the printed call in a namespace that resolves
       names from the property's module, ``refimpl.strategies``, ``torch`` and ``math``
       (fixture values printed as ``<... object at 0x...>`` become the fixture itself), else
       by re-running the property under pytest with the campaign's example database.
    4. Call it under the campaign's per-example time limit. An exception (a timeout too) means
       the failure reproduces: exit status 1, after printing the expected and the observed
       value (this run's assertion message, and the one the campaign recorded). A return
       means it no longer does: 0.

With a time limit, steps 1-4 run in a child process (the reproducer run again, with
``REFIMPL_REPLAY_CHILD`` set) that the parent kills at twice the limit plus a grace: a
backend stuck inside C code, where the SIGALRM of step 4 never lands, still ends as
"reproduced", and so does a replay that dies of a signal.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

import refimpl.expect.precision
import refimpl.strategies
from refimpl.fuzz.suite import properties_folder
from refimpl.oracle import load_backend

CHILD = "REFIMPL_REPLAY_CHILD"
GRACE_SECONDS = 30.0  # the child's own start-up (imports) beyond twice the limit
#: the fixtures a replay supplies itself (a printed example shows them as ``<... object>``)
REPLAY_FIXTURES = ("refimpl_backend",)
_OPAQUE = re.compile(r"^(\s*)(\w+)=<[^\n]*object at 0x[0-9a-f]+>,?$", re.MULTILINE)


class _Names(dict):
    """A lookup namespace: module globals first, then strategies, the plugin's fixture values
    (``Precision``, printed as ``refimpl_precision=Precision(tf32=False)``), torch, math."""

    def __init__(self, module) -> None:
        super().__init__(vars(module))

    def __missing__(self, name: str):
        for source in (refimpl.strategies, refimpl.expect.precision, torch, math):
            try:
                return getattr(source, name)
            except AttributeError:
                continue
        raise KeyError(name)  # lets eval go on to the builtins


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
    """The property's module (its file executed afresh) and its undecorated function;
    ``properties`` is a folder or the installed suite's package name."""
    file_part, _, test_name = nodeid.partition("::")
    properties = properties_folder(properties)
    path = properties / Path(file_part).name
    sys.path.insert(0, str(properties))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses defined in it look their module up here
    _exec_with_rewritten_asserts(module, path)
    test = getattr(module, test_name.split("[")[0])
    return module, getattr(getattr(test, "hypothesis", None), "inner_test", test)


def build_kwargs(call: str, module, fixtures: dict) -> dict:
    """The keyword arguments of a printed call ``name(a=..., b=...)``."""
    args_text = call[call.index("(") + 1: call.rindex(")")]
    args_text = _OPAQUE.sub(lambda m: f"{m.group(1)}{m.group(2)}=__fixture_{m.group(2)},",
                            args_text)
    names = _Names(module)
    names.update({f"__fixture_{k}": v for k, v in fixtures.items()})
    return eval(f"dict({args_text})", {}, names)


def _pytest_fallback(properties: str, nodeid: str, target: str, database: str,
                     timeout: float | None = None) -> int:

    os.environ["REFIMPL_FUZZ_SETTINGS"] = json.dumps({"database": database})
    if timeout:
        os.environ["REFIMPL_FUZZ_TIMEOUT"] = str(timeout)
    os.environ.setdefault("REFIMPL_FUZZ_EVENTS", os.devnull)
    folder = properties_folder(properties)
    node = str(folder / Path(nodeid.split("::")[0]).name) + "::" + nodeid.split("::", 1)[1]
    return int(pytest.main([node, "-q", "-p", "refimpl.fuzz.events", "-p", "no:cacheprovider",
                            "--refimpl-target", target]))


def _rebuild(call: str, module, backend, arguments: str | None) -> dict:
    fixtures = dict.fromkeys(REPLAY_FIXTURES, backend)
    if arguments and Path(arguments).exists():
        # a real cycle: refimpl.fuzz.examples imports REPLAY_FIXTURES and build_kwargs from here
        from refimpl.fuzz.examples import load_arguments

        return {**load_arguments(Path(arguments)), **fixtures}
    return build_kwargs(call, module, fixtures)


class _Timeout(Exception):
    pass


def _call(inner, kwargs: dict, timeout: float | None) -> None:
    def alarm(signum, frame):
        raise _Timeout(f"timed out: the example ran longer than {timeout:g}s")

    if timeout:
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        inner(**kwargs)
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
        print(f"\nREPRODUCED: the example was still running after {limit:g} s, past where the "
              f"{timeout:g} s limit could interrupt it (stuck in C code?); killed")
        return 1
    if done.returncode in (0, 1, 2):
        return done.returncode
    print(f"\nREPRODUCED: the replay died (exit status {done.returncode})")
    return 1


def replay(*, properties: str, nodeid: str, target: str, call: str, database: str,
           arguments: str | None = None, recorded: str = "", timeout: float | None = None,
           cwd: str | None = None) -> int:
    """Re-run one failing example; 1 if it still fails, 0 if it passes now, 2 if the
    property suite or the target cannot be loaded."""
    if timeout and not os.environ.get(CHILD):
        return replay_bounded(timeout)
    if cwd:
        sys.path.insert(0, cwd)
    try:
        module, inner = _load(properties, nodeid)
    except Exception:  # the property suite itself did not load: not a reproduction
        traceback.print_exc()
        print(f"\ncould not load {nodeid} from {properties}")
        return 2

    try:
        backend = load_backend(target)
    except Exception as exc:  # ImportError, a constructor that raises, MissingExtra, ...
        print(f"could not load target {target!r}: {type(exc).__name__}: {exc}")
        return 2
    if not call:  # the property timed out before any example (in its setup)
        print("no example ran (the property's setup timed out); replaying through pytest")
        return _pytest_fallback(properties, nodeid, target, database, timeout)
    try:
        kwargs = _rebuild(call, module, backend, arguments)
    except Exception as exc:  # the printed example is not valid Python: replay via pytest
        print(f"cannot rebuild the example directly ({exc!r}); replaying through pytest")
        return _pytest_fallback(properties, nodeid, target, database, timeout)
    try:
        _call(inner, kwargs, timeout)
    except Exception as exc:
        traceback.print_exc()
        print(f"\nREPRODUCED: {nodeid} fails against {target}")
        print(f"expected vs observed (this run): {type(exc).__name__}: {exc}")
        if recorded:
            print(f"expected vs observed (the campaign): {recorded}")
        return 1
    print(f"not reproduced: {nodeid} passes against {target}")
    return 0
