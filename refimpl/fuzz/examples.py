"""One example's arguments, kept so that a reproducer can rebuild it without the database.

Two forms, both written by the worker:

- the printed call (``name(a=..., b=...)``, Hypothesis's pretty printer): always, for people,
  and as the reproducer's code where it rebuilds the example exactly;
- the arguments themselves, pickled with ``torch.save``, one file per property under
  ``<out>/examples/``, only where the printed call does not rebuild them exactly
  (:func:`rebuilds_exactly`: a tensor whose repr is cut with ``...``, a module whose weights
  no repr holds). The worker decides at every failing call, so after shrinking the file
  matches the minimal example (Hypothesis replays the minimal failing example last).

So a reproducer is self-contained (code only, a file that can be pasted into a bug report)
wherever the example prints as code. Values that can neither be printed as code nor pickled
(a lambda, ``st.data()``) leave no file; the reproducer then replays from the example
database.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from hypothesis.vendor.pretty import pretty
from torch import nn

from refimpl.fuzz.replay import REPLAY_FIXTURES, build_kwargs


def describe_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(\\n    a=...,\\n)``: the call as Hypothesis prints a falsifying example."""
    body = "".join(f"    {k}={_pretty(v)},\n" for k, v in arguments.items())
    return f"{name}(\n{body})"


def _pretty(value: Any) -> str:
    try:
        return pretty(value).replace("\n", "\n    ")
    except Exception as exc:  # a broken __repr__ must not end the example
        return f"<unprintable {type(value).__name__}: {exc!r}>"


def examples_file(folder: Path, nodeid: str) -> Path:
    """Where the failing arguments of ``nodeid`` are kept (a stable, file-safe name)."""
    digest = hashlib.sha1(nodeid.encode()).hexdigest()[:16]
    return folder / f"{digest}.pt"


def same_value(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same example value, strictly: same type, tensors equal in dtype,
    shape, strides and every element (NaN included), floats equal bit for bit in sign (0.0 is
    not -0.0), containers and dataclasses field by field. A module is never the same (its
    weights are not in its repr); an object without ``__eq__`` of its own only as itself."""
    if type(a) is not type(b) or isinstance(a, nn.Module):
        return False
    if isinstance(a, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
                and a.device == b.device and bool(torch.equal(a.isnan(), b.isnan()))
                and bool(torch.equal(a.nan_to_num(), b.nan_to_num())))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same_value(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    return bool(a == b)


def rebuilds_exactly(call: str, arguments: dict[str, Any], module: ModuleType) -> bool:
    """The printed ``call`` evaluated in the property's namespace (the reproducer's way,
    :func:`refimpl.fuzz.replay.build_kwargs`) gives back ``arguments`` (:func:`same_value`);
    the fixtures a replay supplies itself (the backend) stand in for their printed form."""
    fixtures = {name: arguments[name] for name in REPLAY_FIXTURES if name in arguments}
    try:
        rebuilt = build_kwargs(call, module, fixtures)
    except Exception:  # not valid Python (a cut tensor repr), or a name no namespace holds
        return False
    return same_value(rebuilt, arguments)


def keep_arguments(folder: Path, nodeid: str, arguments: dict[str, Any], call: str,
                   module: ModuleType | None) -> Path | None:
    """Where the reproducer will find ``arguments``: no file when ``call`` rebuilds them
    exactly (a stale file of an earlier failing call is removed), else their pickle."""
    if module is not None and rebuilds_exactly(call, arguments, module):
        examples_file(folder, nodeid).unlink(missing_ok=True)
        return None
    return save_arguments(folder, nodeid, arguments)


def save_arguments(folder: Path, nodeid: str, arguments: dict[str, Any]) -> Path | None:
    """Pickle ``arguments``; None (and no file) when they cannot be pickled."""
    path = examples_file(folder, nodeid)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(arguments, path)
    except Exception:
        path.unlink(missing_ok=True)
        return None
    return path


def load_arguments(path: Path) -> dict[str, Any]:
    """The arguments :func:`save_arguments` wrote (a trusted file of this campaign's)."""
    return torch.load(path, weights_only=False)
