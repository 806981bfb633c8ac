"""Reach of the CSE properties under the ci profile: at least half their examples offer a
merge (to make or to refuse). A lower bound of each property's reach (which also counts
examples where the backend merged), measured on the property's own strategy."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.strategies import GraphOptions, op_graphs

OPTIONS = {  # the strategies of refimpl/properties/test_cse.py
    "default": GraphOptions(),
    "deterministic": GraphOptions(families=("unary", "binary", "constant", "reduction", "list",
                                            "matmul", "view", "inplace")),
    "effects": GraphOptions(families=("unary", "view", "random", "inplace", "inplace_random",
                                      "binary")),
    "constants": GraphOptions(families=("constant", "unary", "binary", "list")),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_at_least_half_the_ci_examples_offer_a_merge(name):
    hits: list[bool] = []
    ci = settings.get_profile("ci")

    @settings(max_examples=ci.max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(op_graphs(OPTIONS[name]))
    def draw(spec):
        hits.append(naive_duplicates(spec.build().graph) > 0)

    draw()
    assert sum(hits) / len(hits) >= 0.5, f"reach {sum(hits)}/{len(hits)} for {name}"
