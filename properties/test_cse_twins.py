"""The backend's merge decision for every op the CSE generators draw, held to an exact graph.

Each example takes every entry of the twin catalogue (``refimpl.strategies.cse_twins``:
every ``op_graphs`` vocabulary entry, the maybe-copies and conversions, Python on sizes as
dynamo records it, ``operator`` items and writes, ``get_attr``, ``call_module``) in a drawn
dialect, calls it twice on the same arguments with nothing written between, reads both
results (one graph per dialect, each entry on inputs of its own: graphs of more than 256
positions), and compares the backend's graph with the one built by hand
(``refimpl.expect.cse_merges.expected_listing``): the repeat of a pure call is removed and its
reader reads the first call; a random draw, a write, an effectful or opaque call, a
structural node is kept; every kept node keeps its name and its place. So each effect class
is checked both ways (merged exactly when pure), with the node that survives, the rewired
readers and the order. In about half the examples every node's ``op`` is an equal string
that is not the interned literal (``==`` and ``is`` differ on it).

A backend that takes only make_fx graphs (torch's) is given the aten and symbolic-size
dialects only. Reach: every graph holds two equal calls.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refimpl.expect.cse_merges import expected_listing, listing
from refimpl.oracle import component
from refimpl.oracle.accepts import accepted_kinds
from refimpl.properties.reach import reach
from refimpl.strategies.cse_twins import ALL_STYLES, PART_META, twin_graphs


def _styles(backend) -> tuple[str, ...]:
    """The dialects the backend takes: make_fx's (aten, symbolic sizes) where it takes only
    graphs whose values are recorded."""
    kinds = accepted_kinds(backend, "fx_graph_cse")
    return ALL_STYLES if kinds is None or "torch" in kinds else ("aten", "symbolic")


def _difference(graph, got: list[tuple], expected: list[tuple]) -> str:
    """The rows that differ, each with the catalogue entry and part its node comes from."""
    parts = {n.name: n.meta.get(PART_META) for n in graph.nodes}
    extra = [(row[0], parts.get(row[0])) for row in got if row not in expected]
    missing = [(row[0], parts.get(row[0])) for row in expected if row not in got]
    return (f"kept or changed but not expected: {extra}\n"
            f"  expected but removed or changed: {missing}")


@given(st.data())
def test_each_op_twice_is_merged_exactly_when_pure(refimpl_backend, data):
    """Every catalogue entry, twice: the backend's graph is the hand-built one."""
    cse = component(refimpl_backend, "fx_graph_cse")
    reach(True)
    for twins in data.draw(twin_graphs(_styles(refimpl_backend))):
        gm = twins.traced()
        got, expected = listing(cse(gm.graph)), expected_listing(gm.graph)
        assert got == expected, (
            f"{refimpl_backend.name} fx_graph_cse merged otherwise than by hand "
            f"({twins.style}, fresh op strings: {twins.fresh_ops}): "
            f"{_difference(gm.graph, got, expected)}\nreproduce with:\n"
            f"  from refimpl.strategies.cse_twins import TwinCase, TwinGraph\n"
            f"  twins = {twins!r}\n  gm = twins.traced(); new = fx_graph_cse(gm.graph)")
