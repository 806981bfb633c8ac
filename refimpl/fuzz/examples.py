"""One example's arguments, kept so that a reproducer can rebuild it without the database.

Two forms, both written by the worker:

- the printed call (``name(a=..., b=...)``, Hypothesis's pretty printer), for people and for
  examples whose values have a Python-literal repr;
- the arguments themselves, pickled with ``torch.save`` (tensors, modules, the property
  module's own dataclasses), one file per property under ``<out>/examples/``. The worker
  overwrites it at every failing call, so after shrinking it holds the minimal example
  (Hypothesis replays the minimal failing example last).

Values that cannot be pickled (a lambda, ``st.data()``) leave no file; the reproducer then
evaluates the printed call, and failing that replays from the example database.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from hypothesis.vendor.pretty import pretty


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


def save_arguments(folder: Path, nodeid: str, arguments: dict[str, Any]) -> Path | None:
    """Pickle ``arguments``; None (and no file) when they cannot be pickled."""
    import torch

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
    import torch

    return torch.load(path, weights_only=False)
