"""Searching a strategy for an example, the same way in every run and every process.

Meta-tests of the strategies ask "can this strategy draw X?" with Hypothesis's ``find``. An
unseeded search is luck: on a loaded machine or an unlucky seed it ends in ``NoSuchExample``
(two such tests failed that way). :func:`find_example` searches derandomised (the same draws
every time, whatever the profile or the pytest-xdist worker), so a search that passes once
passes always, on the same Hypothesis release. ``tests/test_finding.py`` checks that no test
calls ``find`` directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.strategies import SearchStrategy

T = TypeVar("T")


def find_example(strategy: SearchStrategy[T], condition: Callable[[T], object], *,
                 max_examples: int = 2000, shrink: bool = True) -> T:
    """The example of ``strategy`` satisfying ``condition`` that a derandomised search of at
    most ``max_examples`` draws finds (shrunk unless ``shrink=False``); ``NoSuchExample`` if
    none does."""
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    search = settings(derandomize=True, database=None, max_examples=max_examples,
                      phases=phases, deadline=None, suppress_health_check=list(HealthCheck))
    return find(strategy, condition, settings=search)
