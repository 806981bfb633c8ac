"""Model-level FLOP properties of the backend under test's ``model_flops``.

Each example draws a random model of one matmul-class layer family
(:mod:`refimpl.strategies.flop_models`: linear (modules, and F.linear in custom modules),
conv, transposed conv with groups and output_padding, attention through SDPA,
MultiheadAttention (also in eval mode under inference_mode: its fused fast path), LSTM,
GRU) and compares the backend's forward count with an independent hand derivation
(:mod:`refimpl.expect.flops`), adjusted by the backend's stated conventions
(``flop_conventions``: unit, bias, families counted or ignored; refimpl's and torch's: every
matrix product, nothing else). A family the backend does not count comparably is skipped,
visibly, with its stated reason; a disagreement beyond the stated conventions fails.

Run against a peer: ``pytest properties/test_model_flops.py --refimpl-target thop``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.flops import assert_model_flops, derive
from refimpl.oracle import component
from refimpl.oracle.targets.flop_peers import conventions_of
from refimpl.properties.reach import reach
from refimpl.strategies.flop_models import FLOP_MODEL_FAMILIES, flop_models


@pytest.fixture(scope="module")
def counter(refimpl_backend, family):
    """The backend's model_flops and conventions; a visible skip where they do not cover
    ``family`` comparably."""
    count = component(refimpl_backend, "model_flops")
    conventions = conventions_of(refimpl_backend)
    if not conventions.covers(family):
        how = ("ignores it" if family in conventions.ignored else
               "counts it with its own extra arithmetic" if family in conventions.estimated
               else "does not state it counts it")
        pytest.skip(f"{refimpl_backend.name} {how} ({family}): {conventions.notes}")
    return count, conventions


@pytest.mark.parametrize("family", FLOP_MODEL_FAMILIES, scope="module")
@given(data=st.data())
def test_model_flops_match_the_hand_derivation(refimpl_backend, counter, family, data):
    count, conventions = counter
    drawn = data.draw(flop_models(family), label="model")
    model, inputs = drawn.build(), drawn.inputs()
    with drawn.context():  # inference_mode for a model drawn with inference=True
        derivation = derive(model, inputs)
        reach(family in derivation.ran() and conventions.comparable(derivation))
        observed = count(model, inputs)
    assert_model_flops(observed, conventions.expected(derivation),
                       f"{drawn!r}; m = _.build(); with _.context(): "
                       f"load_backend({refimpl_backend.name!r}).model_flops(m, _.inputs())")
