"""The Backend protocol, the registry of built-in backends, and how a target is chosen.

Choosing the backend under test, in order: the ``--refimpl-target`` pytest option, the
``REFIMPL_TARGET`` environment variable, else ``"refimpl"``. A target is ``refimpl``,
``torch``, or ``package.module:attribute`` naming a Backend object, class or factory.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Protocol, runtime_checkable

from torch import fx, nn

#: component name -> the Backend method that provides it.
COMPONENTS: dict[str, str] = {
    "flops": "flop_counter",
    "cse": "fx_graph_cse",
    "partition": "compile",
    "checkpoint": "checkpoint",
    "layout": "optimize_layout",
}


class BackendError(ValueError):
    """A target that cannot be loaded, or that lacks what a property needs."""


@runtime_checkable
class Backend(Protocol):
    """What a backend under test may provide; any method may be left out (then: skipped)."""

    name: str

    def fx_graph_cse(self, graph: fx.Graph) -> fx.Graph: ...
    def flop_counter(self, **kwargs: Any) -> Any: ...
    def compile(self, fn: Any, *, memory_budget: float | None = None) -> Any: ...
    def checkpoint(self, module: nn.Module) -> nn.Module: ...
    def optimize_layout(self, gm: fx.GraphModule, example_inputs: Any) -> fx.GraphModule: ...


def _builtin(name: str):
    from refimpl.oracle import builtin

    return {"refimpl": builtin.RefimplBackend, "torch": builtin.TorchBackend}[name]()


def load_backend(target: str | None = None) -> Any:
    """The backend named by ``target`` (default: :func:`selected_target`)."""
    target = target or selected_target()
    if target in ("refimpl", "torch"):
        return _builtin(target)
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise BackendError(
            f"target {target!r}: expected 'refimpl', 'torch' or 'package.module:attribute'")
    try:
        obj = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise BackendError(f"target {target!r} cannot be loaded: {exc}") from exc
    backend = obj() if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "name")) \
        else obj
    if not isinstance(getattr(backend, "name", None), str):
        raise BackendError(f"target {target!r} has no string attribute 'name'")
    return backend


def selected_target(option: str | None = None) -> str:
    """The target from a pytest option value, else REFIMPL_TARGET, else 'refimpl'."""
    return option or os.environ.get("REFIMPL_TARGET") or "refimpl"


def component(backend: Any, method: str):
    """``backend.method``, or a pytest skip naming what is missing (never a silent pass)."""
    if method not in COMPONENTS.values():
        raise BackendError(f"method={method!r} is not one of {sorted(COMPONENTS.values())}")
    fn = getattr(backend, method, None)
    if fn is None:
        import pytest

        pytest.skip(f"backend {backend.name!r} has no {method}: component not provided")
    return fn


def describe(backend: Any) -> str:
    """One line for a report header: the backend's name, version and components."""
    have = [c for c, m in COMPONENTS.items() if getattr(backend, m, None) is not None]
    version = getattr(backend, "version", "unknown version")
    return f"{backend.name} ({version}); components: {', '.join(have) or 'none'}"
