"""Every generator draws every feature its component lists, in at least 20% of the examples a
ci-profile run of a property draws (``refimpl.strategies.features``).

Each feature's strategy is drawn exactly as a property under the ``ci`` profile draws it
(derandomised, that profile's example count, no database, no shrinking); the share is the
count of draws whose detector says yes over the count drawn. The expected share is a
fixed floor, never read from the generator. A second test checks each feature is documented in
docs/features.md and names a property that exists.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from refimpl.fuzz.profiles import register_profiles
from refimpl.strategies.features import MIN_SHARE, Feature, all_features

ROOT = Path(__file__).resolve().parent.parent
PROPERTIES = ROOT / "properties"
FEATURES = all_features()


def draw_like_ci(strategy: st.SearchStrategy) -> list[Any]:
    """The values a ci-profile property run draws from ``strategy``, in order."""
    register_profiles()
    ci = settings.get_profile("ci")
    drawn: list[Any] = []

    @settings(ci, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def collect(value):
        drawn.append(value)

    collect()
    return drawn


def feature_id(feature: Feature) -> str:
    return f"{feature.component}.{feature.name}"


@pytest.mark.parametrize("feature", FEATURES, ids=feature_id)
def test_the_generator_draws_the_feature(feature: Feature):
    drawn = draw_like_ci(feature.strategy())
    shown = sum(1 for value in drawn if feature.detect(value))
    assert drawn, f"{feature_id(feature)}: the strategy drew nothing"
    share = shown / len(drawn)
    assert share >= MIN_SHARE, (
        f"{feature_id(feature)} ({feature.meaning}): drawn in {shown} of {len(drawn)} "
        f"ci-profile examples ({share:.0%}, expected at least {MIN_SHARE:.0%})")


def property_names() -> set[str]:
    names = set()
    for path in PROPERTIES.glob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(f"{path.name}::{node.name}")
    return names


@pytest.mark.parametrize("feature", FEATURES, ids=feature_id)
def test_the_feature_is_documented_and_used(feature: Feature):
    assert feature.used_by in property_names(), (
        f"{feature_id(feature)}: used_by={feature.used_by!r} names no property")
    page = (ROOT / "docs" / "features.md").read_text()
    assert f"`{feature.component}.{feature.name}`" in page, (
        f"{feature_id(feature)} is not listed in docs/features.md")


def test_every_component_lists_features():
    components = {f.component for f in FEATURES}
    assert components == {"cse", "flops", "partition", "checkpoint", "layout"}, components
    for component in components:
        names = [f.name for f in FEATURES if f.component == component]
        assert len(names) == len(set(names)), f"{component}: a feature name is listed twice"
