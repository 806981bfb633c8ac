"""A malformed graph is refused with a ``KeyError`` (torch's ``fx_graph_cse`` contract).

The graph is a valid traced case (``refimpl.strategies.cse_cases``) broken one way: a node
moved before an input it reads, an input made to read its reader (a cycle), or a node made
to read a placeholder of another graph. torch's pass raises ``KeyError`` for each (its map
from old to new nodes lacks the input), and code written against it catches that; a backend
must raise it too (a subclass is fine), never return a graph or raise something else.

Reach: every example is a malformed graph.
"""

from __future__ import annotations

from hypothesis import given

from refimpl.oracle import component
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach
from refimpl.strategies.cse_cases import malformed_graphs


@given(malformed_graphs())
def test_a_malformed_graph_raises_key_error(refimpl_backend, bad):
    """Out of order, cyclic or foreign inputs: a ``KeyError``."""
    graph = bad.graph()
    reach(True)
    try:
        component(refimpl_backend, "fx_graph_cse")(graph)
    except TargetError as exc:
        # a wrong error (or a wrong return) is the target's failure: the message says so
        assert isinstance(exc.__cause__, KeyError), (
            f"{exc}, for a malformed graph ({bad.corruption}); expected a KeyError\n"
            f"reproduce with:\n"
            f"  from refimpl.strategies.cse_cases import CseCase, MalformedCase\n"
            f"  bad = {bad!r}\n  fx_graph_cse(bad.graph())")
    else:
        raise AssertionError(
            f"{refimpl_backend.name} fx_graph_cse returned a graph for a malformed graph "
            f"({bad.corruption}), expected a KeyError\n  bad = {bad!r}")
