"""The oracle: the plug for a backend under test, and the built-in backends.

A backend is any object with a ``name`` and some of the component methods of
:class:`Backend`. Properties reach a backend's component through :func:`component`, which
turns a missing method into a visible pytest skip ("<backend> has no <method>"), never a pass.
"""

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

__all__ = [
    "COMPONENTS",
    "Backend",
    "BackendError",
    "MissingExtra",
    "builtin_target_names",
    "component",
    "describe",
    "load_backend",
    "selected_target",
]
