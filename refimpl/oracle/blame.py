"""Blame where it belongs: a backend that raises, exits or breaks its contract is the target's
failure, said as one.

Every property reaches the backend under test through :func:`refimpl.oracle.component`,
which hands out the backend's method wrapped by :func:`blamed`. The wrapper turns

- an exception raised inside the backend's method (``SystemExit`` included: a backend that
  calls ``sys.exit`` has not "passed"), and
- a return value its component's contract does not allow (``fx_graph_cse`` returning None, a
  ``flop_counter`` that is no context manager)

into :class:`TargetError`, "the target failed: ...", chained to the original. So a report
tells a backend's own failure from a wrong answer (an assertion of the property) and from a
harness defect. Invariant: the wrapper changes nothing the backend returns and lets every
BaseException the harness itself uses (time limits, interrupts) through untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import fx, nn


class TargetError(Exception):
    """The backend under test failed: it raised, exited, or broke its component's contract."""


def _is_context_manager(value: Any) -> bool:
    return hasattr(value, "__enter__") and hasattr(value, "__exit__")


#: method -> (the check its return value must pass, what the contract promises).
CONTRACTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "fx_graph_cse": (lambda v: isinstance(v, fx.Graph), "a torch.fx.Graph"),
    "optimize_layout": (lambda v: isinstance(v, fx.GraphModule), "a torch.fx.GraphModule"),
    "layout_compiler": (lambda v: callable(v) and isinstance(getattr(v, "decisions", None),
                                                             list),
                        "a dynamo backend with a list attribute 'decisions'"),
    "checkpoint": (lambda v: isinstance(v, nn.Module), "an nn.Module"),
    "compile": (callable, "a callable"),
    "flop_counter": (_is_context_manager, "a context manager (FlopCounterMode-like)"),
    "model_flops": (lambda v: v is not None, "a FLOP count"),
}


def blamed(backend_name: str, method: str, fn: Callable) -> Callable:
    """``fn`` (the backend's ``method``), whose failures are :class:`TargetError`."""
    check, promise = CONTRACTS[method]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except (Exception, SystemExit) as exc:
            raise TargetError(f"the target failed: {backend_name}.{method} raised "
                              f"{type(exc).__name__}: {exc}") from exc
        if not check(result):
            raise TargetError(f"the target failed: {backend_name}.{method} returned "
                              f"{type(result).__name__}, expected {promise}")
        return result

    return call
