"""CSE keys arguments by value, not by object (``refimpl.strategies.cse_cases``).

Two calls whose arguments are equal but distinct objects (a string built at run time,
``"".join("tanh")``, is not the interned literal; each ``torch.device("cpu")`` is a new
object) are the same call: ``gelu(x, approximate=s1)`` and ``gelu(x, approximate=s2)``,
``full([3, 3], 2.0, device=d1)`` and ``device=d2``. The backend's result is sound (the judge,
``refimpl.expect.cse_soundness.unsound_reasons``) and removes the repeat.

Reach: the graph holds two equal calls, in every example.
"""

from __future__ import annotations

from hypothesis import given

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.properties.cse_case_check import assert_merged, assert_sound, run_case
from refimpl.properties.reach import reach
from refimpl.strategies.cse_cases import cse_cases


@given(cse_cases(("distinct_equal_leaves",)))
def test_equal_arguments_that_are_distinct_objects_are_one_call(refimpl_backend, case):
    """The repeat of a call with equal (not identical) strings or devices is removed."""
    gm, new_graph = run_case(refimpl_backend, case)
    reach(naive_duplicates(gm.graph) > 0)
    assert_sound(refimpl_backend, case, gm, new_graph)
    assert_merged(refimpl_backend, case, gm, new_graph)
