"""Reach: did this example exercise the property's interesting case?

A property that passes on examples that never reach its interesting case (a budget that does
not bind, a net the layout pass leaves alone, a graph with nothing to merge) proves little.
Every target property in ``properties/`` calls :func:`reach` once per example with
whether the example reached that case. The value is recorded as a Hypothesis event (key
:data:`REACH_EVENT`, payload ``"reached"`` or ``"not reached"``), so it shows in Hypothesis's
statistics (``pytest --hypothesis-show-statistics``) and in the observability stream, from which
``refimpl fuzz`` computes each property's reach: the share of its examples that reached.

Invariant: one call per example, before the property's assertions (so a failing example is
counted too); a second call in the same example overwrites the first. Outside a Hypothesis
test (a reproducer written by ``refimpl fuzz`` calls the property's body directly) there is
no example to describe, and :func:`reach` and :func:`note` record nothing.
"""

from __future__ import annotations

from hypothesis import event
from hypothesis.control import currently_in_test_context

REACH_EVENT = "reach"
REACHED = "reached"
NOT_REACHED = "not reached"


def reach(hit: bool) -> bool:
    """Record whether this example reached the property's interesting case; returns ``hit``."""
    if not isinstance(hit, bool):
        raise TypeError(f"hit={hit!r}: expected a bool (did the example reach the case?)")
    note(REACH_EVENT, REACHED if hit else NOT_REACHED)
    return hit


def note(value: str, payload: str = "") -> None:
    """``hypothesis.event(value, payload)`` inside a Hypothesis test; nothing outside one."""
    if currently_in_test_context():
        event(value, payload)
