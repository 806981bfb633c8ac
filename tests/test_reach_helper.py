"""refimpl.properties.reach: the reach event every target property records."""

import pytest


def test_reach_records_nothing_outside_a_hypothesis_test():
    """A reproducer calls a property's body directly: reach() must not raise there."""
    from refimpl.properties.reach import note, reach

    assert reach(True) is True and reach(False) is False
    note("anything")  # no error outside a test


def test_reach_takes_a_bool():
    from refimpl.properties.reach import reach

    with pytest.raises(TypeError, match="hit="):
        reach(1)
