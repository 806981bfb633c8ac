"""Replay one failing example outside pytest: what every reproducer file calls.

Algorithm
    1. Import the property's file from the property suite folder and take the undecorated
       test function (Hypothesis's ``inner_test``).
    2. Rebuild the keyword arguments from the call Hypothesis printed, evaluating it in a
       namespace that resolves names from the property's module, ``refimpl.strategies``,
       ``torch`` and ``math``; fixture values printed as ``<... object at 0x...>`` are
       replaced by the fixture itself (``refimpl_backend`` = the target backend).
    3. Call it. An exception means the failure reproduces (exit status 1); a return means it
       no longer does (0); a property suite that cannot be loaded is exit status 2. If the
       printed call cannot be evaluated (an object without a Python-literal repr), fall back
       to re-running the property under pytest with the campaign's example database, which
       replays the stored failing example first.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sys
import traceback
from pathlib import Path

import torch

_OPAQUE = re.compile(r"^(\s*)(\w+)=<[^\n]*object at 0x[0-9a-f]+>,?$", re.MULTILINE)


class _Names(dict):
    """A lookup namespace: module globals first, then strategies, torch, math."""

    def __init__(self, module) -> None:
        super().__init__(vars(module))

    def __missing__(self, name: str):
        import refimpl.strategies

        for source in (refimpl.strategies, torch, math):
            try:
                return getattr(source, name)
            except AttributeError:
                continue
        raise KeyError(name)  # lets eval go on to the builtins


def _load(properties: Path, nodeid: str):
    file_part, _, test_name = nodeid.partition("::")
    path = properties / Path(file_part).name
    sys.path.insert(0, str(properties))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses defined in it look their module up here
    spec.loader.exec_module(module)
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


def _pytest_fallback(properties: Path, nodeid: str, target: str, database: str) -> int:
    import pytest

    os.environ["REFIMPL_FUZZ_SETTINGS"] = json.dumps({"database": database})
    os.environ.setdefault("REFIMPL_FUZZ_EVENTS", os.devnull)
    node = str(properties / Path(nodeid.split("::")[0]).name) + "::" + nodeid.split("::", 1)[1]
    return int(pytest.main([node, "-q", "-p", "refimpl.fuzz.events", "-p", "no:cacheprovider",
                            "--refimpl-target", target]))


def replay(*, properties: str, nodeid: str, target: str, call: str, database: str) -> int:
    """Re-run one failing example; 1 if it still fails, 0 if it passes now."""
    from refimpl.oracle import load_backend

    try:
        module, inner = _load(Path(properties), nodeid)
    except Exception:  # the property suite itself did not load: not a reproduction
        traceback.print_exc()
        print(f"\ncould not load {nodeid} from {properties}")
        return 2
    try:
        kwargs = build_kwargs(call, module, {"refimpl_backend": load_backend(target)})
    except Exception as exc:  # the printed example is not valid Python: replay via pytest
        print(f"cannot rebuild the example directly ({exc!r}); replaying through pytest")
        return _pytest_fallback(Path(properties), nodeid, target, database)
    try:
        inner(**kwargs)
    except Exception:
        traceback.print_exc()
        print(f"\nREPRODUCED: {nodeid} fails against {target}")
        return 1
    print(f"not reproduced: {nodeid} passes against {target}")
    return 0
