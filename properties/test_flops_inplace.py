"""In-place ops are counted as their out-of-place ops: a counter that keys its rules by op
name must read ``cumsum_`` as ``cumsum``, ``index_fill_`` as ``index_fill``, and so on.

Each example runs every step of :data:`refimpl.strategies.flop_programs.INPLACE_STEPS` once,
in a drawn order (elementwise ops, also as ``_foreach_`` kernels and inside a profiler
range, scans, masked and indexed writes, triangle masks), each in place or out of place as
drawn, then optionally a backward. None of them is a matrix product, so by torch's
counter's convention the program costs 0 FLOPs whichever variants run: the counts are empty, and a
counter that reports the ops it could not count (``uncounted_ops()``, refimpl's extension
of torch's API) reports none. torch's counter has no ``uncounted_ops()``: there the counts
alone are checked.

Reach: some step ran in place.
"""

from __future__ import annotations

from hypothesis import given

from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.flop_programs import InplaceProgram, inplace_programs


@given(inplace_programs())
def test_inplace_ops_count_as_their_out_of_place_ops(refimpl_backend,
                                                     program: InplaceProgram):
    reach(any(in_place for _, in_place in program.steps))
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        program.run()
    counts = counter.get_flop_counts().get("Global", {})
    assert counts == {} and counter.get_total_flops() == 0, (
        f"{refimpl_backend.name}: {program!r} counted {counts}, expected nothing")
    uncounted = counter.uncounted_ops() if hasattr(counter, "uncounted_ops") else {}
    assert uncounted == {}, (f"{refimpl_backend.name}: {program!r}: reported as uncounted "
                             f"(no formula, not free): {uncounted}")
