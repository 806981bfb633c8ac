"""The oracle: the plug for a backend under test, and the built-in backends.

A backend is any object with a ``name`` and some of the component methods of
:class:`Backend`. Properties reach a backend's component through :func:`component`, which
turns a missing method into a visible pytest skip ("<backend> has no <method>"), never a pass,
and a backend's own failure (it raised, exited or broke its contract) into
:class:`TargetError`, "the target failed: ...". A backend that declares what it takes
(``accepts``, :mod:`refimpl.oracle.accepts`) never gets an input of another kind.
"""

from refimpl.oracle.accepts import skip_unless_takes
from refimpl.oracle.backend import (
    COMPONENTS,
    Backend,
    BackendError,
    MissingExtra,
    builtin_target_names,
    component,
    describe,
    load_backend,
    selected_target,
)
from refimpl.oracle.blame import TargetError

__all__ = [
    "COMPONENTS",
    "Backend",
    "BackendError",
    "MissingExtra",
    "TargetError",
    "builtin_target_names",
    "component",
    "describe",
    "load_backend",
    "selected_target",
    "skip_unless_takes",
]
