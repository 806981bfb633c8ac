"""Reach of the CSE properties under the ci profile, measured on each property's own
strategy (``refimpl.strategies.graphs``), at least half their examples:

* the soundness properties reach when the backend merged something or a naive CSE would
  have (an example offers a merge to make or to refuse); the share of graphs with a naive
  duplicate is a lower bound of that;
* the properties that record their own case (two calls that differ only in a lookalike
  constant or a keyword, a value returned with its repeat, an effectful call made twice)
  reach exactly when the graph shows it, a fact about the graph alone."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.strategies import graphs

NAIVE = {  # property -> its strategy's options
    "test_cse_is_sound": graphs.SOUNDNESS,
    "test_cse_is_idempotent": graphs.SOUNDNESS,
    "test_cse_is_sound_with_symbolic_sizes": graphs.SYMBOLIC_SIZES,
    "test_deterministic_graphs_give_identical_outputs": graphs.DETERMINISTIC,
    "test_random_and_mutating_nodes_are_never_merged": graphs.EFFECTS,
}
OWN_CASE = {  # property -> (its options, its reach)
    "test_cse_tells_constants_apart_by_type_and_bits": (
        graphs.CONSTANT_LOOKALIKES,
        lambda s: graphs.shows_constant_types(s) or graphs.shows_signed_zero_or_nan(s)),
    "test_cse_tells_calls_apart_by_their_keywords": (
        graphs.KEYWORDS, graphs.shows_kwargs_only_difference),
    "test_cse_keeps_returned_tensors_distinct": (
        graphs.RETURNED, graphs.shows_returned_duplicates),
    "test_effectful_calls_are_never_merged": (
        graphs.EFFECTFUL, lambda s: s.count("effect") >= 2),
}


def ci_share(options, hit) -> float:
    hits: list[bool] = []
    ci = settings.get_profile("ci")

    @settings(max_examples=ci.max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(graphs.op_graphs(options))
    def draw(spec):
        hits.append(hit(spec))

    draw()
    return sum(hits) / len(hits)


@pytest.mark.parametrize("name", sorted(NAIVE))
def test_at_least_half_the_ci_examples_offer_a_merge(name):
    share = ci_share(NAIVE[name], lambda s: naive_duplicates(s.build().graph) > 0)
    assert share >= 0.5, f"{name}: reach at least {share:.0%}"


@pytest.mark.parametrize("name", sorted(OWN_CASE))
def test_at_least_half_the_ci_examples_reach_the_named_case(name):
    options, hit = OWN_CASE[name]
    share = ci_share(options, hit)
    assert share >= 0.5, f"{name}: reach {share:.0%}"
