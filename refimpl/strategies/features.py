"""The features each generator draws, as a table a test measures.

A property catches a bug only in the examples its generator draws: a CSE that ignores kwargs
passes every property whose graphs never hold two calls that differ only in their kwargs. So
each component states the features a backend can get wrong (:class:`Feature`: a name, what
it means, the strategy whose draws show it, and a detector that reads one drawn value) and
``tests/test_features.py`` holds each at a minimum share (:data:`MIN_SHARE`) of the
examples a ci-profile run draws. docs/features.md lists them for users.

Measurement (in that test): the strategy is drawn exactly as a property under the ``ci``
profile draws it (derandomised, that profile's example count, no database, generation phase
only), and the share is the count of drawn values whose detector says yes over the count
drawn. Detectors read the drawn plain data (a spec, a config), never run a system under
test, so a feature is a fact about the generator alone.

Invariant: a feature's strategy is the one a property of its component draws from (the
feature's ``used_by`` names that property; the test checks the name exists).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = ["Feature", "all_features"]

#: the least share of drawn examples that must show each feature (issue: "held at >= 20%")
MIN_SHARE = 0.2


@dataclass(frozen=True)
class Feature:
    """One thing a generator must draw often enough for a property to judge it.

    ``component`` is one of cse, flops, partition, checkpoint, layout; ``name`` a short
    identifier, unique within the component; ``meaning`` one line for the docs;
    ``strategy`` a zero-argument callable returning the Hypothesis strategy (called lazily,
    so building the table is cheap); ``detect`` reads one drawn value and says whether it
    shows the feature; ``used_by`` is ``file.py::test_name`` of a property that draws from
    that strategy."""

    component: str
    name: str
    meaning: str
    strategy: Callable[[], st.SearchStrategy]
    detect: Callable[[Any], bool]
    used_by: str


#: where each component's feature table lives: ``module:NAME`` (a tuple of Feature)
TABLES = {
    "cse": "refimpl.strategies.graphs:FEATURES",
    "flops": "refimpl.strategies.flop_models:FEATURES",
    "partition": "refimpl.strategies.programs:FEATURES",
    "checkpoint": "refimpl.strategies.modules:FEATURES",
    "layout": "refimpl.strategies.nets:FEATURES",
}


def all_features() -> tuple[Feature, ...]:
    """Every component's table, in TABLES order; a missing table is an error, not a skip."""
    found: list[Feature] = []
    for component, where in TABLES.items():
        module_name, attribute = where.split(":")
        table = getattr(importlib.import_module(module_name), attribute)
        wrong = [f.name for f in table if f.component != component]
        if wrong:
            raise ValueError(f"{where} lists features of another component: {wrong}")
        found.extend(table)
    return tuple(found)
