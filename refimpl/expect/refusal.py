"""A refusal by name: how a property tells a backend's clear "not supported" from a crash.

A backend may decline an input it does not handle, provided it says so: it raises a
``NotImplementedError`` (or a subclass naming the case). dynamo wraps a backend's error
(``BackendCompilerFailed``, the original in ``inner_exception`` and ``__cause__``), so the
refusal is looked for along the whole chain of causes and contexts. Any other error (an
``AttributeError`` deep in a pass, autograd's in-place error at backward time) is a failure.
"""

from __future__ import annotations

__all__ = ["error_chain", "is_refusal"]


def error_chain(error: BaseException) -> list[BaseException]:
    """``error``, its causes and contexts, and dynamo's ``inner_exception`` s, each once."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [error]
    while pending:
        e = pending.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        pending += [e.__cause__, e.__context__, getattr(e, "inner_exception", None)]
    return seen


def is_refusal(error: BaseException) -> bool:
    """Whether ``error``'s chain holds a ``NotImplementedError`` (module docstring)."""
    return any(isinstance(e, NotImplementedError) for e in error_chain(error))
