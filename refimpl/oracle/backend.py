"""The Backend protocol, the registry of built-in backends, and how a target is chosen.

Choosing the backend under test, in order: the ``--refimpl-target`` pytest option, the
``REFIMPL_TARGET`` environment variable, else ``"refimpl"``. A target is ``refimpl``,
``torch``, or ``package.module:attribute`` naming a Backend object, class or factory.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Protocol, runtime_checkable

import pytest
from torch import fx, nn

from refimpl.oracle.accepts import AcceptsError, accepted_kinds, declared, filtered
from refimpl.oracle.blame import blamed
from refimpl.oracle.registry import BUILTIN_TARGETS
from refimpl.user_files import import_attribute, split_spec

#: component name -> the Backend method that provides it.
COMPONENTS: dict[str, str] = {
    "flops": "flop_counter",
    "cse": "fx_graph_cse",
    "partition": "compile",
    "checkpoint": "checkpoint",
    "layout": "optimize_layout",
    "model_flops": "model_flops",
}

#: component -> other methods that provide it, for backends whose work does not fit the
#: first method's form. ``layout_compiler``: a compiler whose layout work is not an FX pass
#: (inductor lowers convolutions channels-last itself); see :class:`Backend`.
ALTERNATIVES: dict[str, tuple[str, ...]] = {"layout": ("layout_compiler",)}


def provided_by(backend: Any, component_name: str) -> str | None:
    """The method through which ``backend`` provides ``component_name`` (the protocol's own
    first, then its alternatives), or None where it provides none of them."""
    for method in (COMPONENTS[component_name], *ALTERNATIVES.get(component_name, ())):
        if getattr(backend, method, None) is not None:
            return method
    return None


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
    # ``optimize_layout`` may take options by keyword (refimpl's: mode, is_inference,
    # max_nodes_per_conv, multipliers); properties/test_layout_options.py checks them where
    # it does, and skips where it takes none.
    def optimize_layout(self, gm: fx.GraphModule, example_inputs: Any,
                        **options: Any) -> fx.GraphModule: ...
    def model_flops(self, model: nn.Module, inputs: tuple) -> Any: ...

    # The layout component may come instead as a compiler (``ALTERNATIVES``): a fresh dynamo
    # backend per call, ``(gm, example_inputs) -> callable``, with an attribute ``decisions``
    # (a list to which it appends, per graph it compiles, whether it converted a layout), and
    # optionally ``layout_devices``, the device types on which it optimises layouts.
    def layout_compiler(self) -> Any: ...


class MissingExtra(BackendError):
    """A built-in target whose optional package is not installed; names the extra."""


def _import_attribute(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _builtin(name: str) -> Any:
    """The built-in target ``name`` (see :mod:`refimpl.oracle.registry`)."""

    entry = BUILTIN_TARGETS[name]
    try:
        factory = _import_attribute(entry.factory)
    except ImportError as exc:
        if entry.extra is None:
            raise
        raise MissingExtra(
            f"target {name!r} needs an optional package that is not installed ({exc}): "
            f"pip install 'refimpl[{entry.extra}]'") from exc
    try:
        return factory()
    except MissingExtra:
        raise
    except ImportError as exc:  # the factory imports its package lazily
        if entry.extra is None:
            raise
        raise MissingExtra(
            f"target {name!r} needs an optional package that is not installed ({exc}): "
            f"pip install 'refimpl[{entry.extra}]'") from exc


def builtin_target_names() -> list[str]:
    """The names ``--target`` accepts besides ``package.module:attribute``."""

    return list(BUILTIN_TARGETS)


def load_backend(target: str | None = None) -> Any:
    """The backend named by ``target`` (None: :func:`selected_target`; an empty name is
    refused, never read as the default)."""
    target = selected_target() if target is None else target
    backend = _builtin(target) if target in builtin_target_names() else _user_target(target)
    try:
        declared(backend)
    except AcceptsError as exc:
        raise BackendError(f"target {target!r}: {exc}") from None
    return backend


def _user_target(target: str) -> Any:
    """The backend a ``package.module:attribute`` target names (an object, class or
    factory), with a string ``name``."""
    try:
        split_spec(target)
    except ValueError:
        raise BackendError(
            f"target {target!r}: expected one of {', '.join(builtin_target_names())} "
            "or 'package.module:attribute'") from None
    try:
        obj = import_attribute(target)
    except Exception as exc:  # whatever its import raises, the target cannot be loaded
        raise BackendError(f"target {target!r} cannot be loaded: "
                           f"{type(exc).__name__}: {exc}") from exc
    try:
        backend = obj() if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "name")) \
            else obj
    except Exception as exc:
        raise BackendError(f"target {target!r}: constructing it raised "
                           f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(getattr(backend, "name", None), str):
        raise BackendError(f"target {target!r} has no string attribute 'name'")
    return backend


def selected_target(option: str | None = None) -> str:
    """The target from a pytest option value, else REFIMPL_TARGET, else 'refimpl'."""
    return option or os.environ.get("REFIMPL_TARGET") or "refimpl"


def component(backend: Any, method: str):
    """``backend.method`` wrapped so that its failures are the target's
    (:func:`refimpl.oracle.blame.blamed`) and inputs of a kind it does not take are not drawn
    for it (:func:`refimpl.oracle.accepts.filtered`), or a pytest skip naming what is missing
    (never a silent pass)."""
    methods = [*COMPONENTS.values(), *(m for ms in ALTERNATIVES.values() for m in ms)]
    if method not in methods:
        raise BackendError(f"method={method!r} is not one of {sorted(methods)}")
    fn = getattr(backend, method, None)
    if fn is None:
        pytest.skip(f"backend {backend.name!r} has no {method}: {skip_reason(backend, method)}")
    return filtered(backend, method, blamed(backend.name, method, fn))


def skip_reason(backend: Any, method: str) -> str:
    """Why ``backend`` lacks ``method``: its own ``skip_reasons[method]`` where it gives one
    (e.g. inductor optimises layouts only on GPU), else "component not provided"."""
    reasons = getattr(backend, "skip_reasons", None) or {}
    for name in (method, *_same_component(method)):
        if name in reasons:
            return reasons[name]
    return "component not provided"


def _same_component(method: str) -> list[str]:
    """The other methods that provide the component ``method`` provides."""
    for comp, first in COMPONENTS.items():
        methods = [first, *ALTERNATIVES.get(comp, ())]
        if method in methods:
            return [m for m in methods if m != method]
    return []


def describe(backend: Any) -> str:
    """One line for a report header: the backend's name, version and components."""
    have = [c for c in COMPONENTS if provided_by(backend, c) is not None]
    version = getattr(backend, "version", "unknown version")
    narrowed = "".join(f"; {method} takes {' and '.join(kinds)} input only"
                       for method, kinds in declared(backend).items()
                       if accepted_kinds(backend, method) is not None)
    return f"{backend.name} ({version}); components: {', '.join(have) or 'none'}{narrowed}"
