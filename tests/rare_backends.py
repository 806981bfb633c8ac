"""Backends that are wrong rarely and deterministically: the proof that a reproducer replays
the one example that failed, not merely some example of its property.

A backend wrong on every graph fails on the first example, and any replay finds a failure;
one wrong on about one graph in ten fails only on the examples the campaign happened to draw,
so its reproducer must rebuild exactly that example (tests/test_fuzz_reproducers.py).
"""

from __future__ import annotations

import copy
import zlib

from torch import fx

from refimpl.cse import fx_graph_cse

#: one graph in this many is left as it came (checksum modulo this == 0)
RARITY = 10


def graph_checksum(graph: fx.Graph) -> int:
    """CRC-32 of the graph's printed form (its nodes, ops, arguments and names): the same
    graph, rebuilt in another process, has the same checksum."""
    return zlib.crc32(str(graph).encode())


class RarelyLazyCSE:
    """refimpl's CSE, except that on about one graph in :data:`RARITY` (by
    :func:`graph_checksum`) it merges nothing: sound, but it keeps repeats a CSE must merge,
    which the completeness properties (test_cse_strength.py) catch."""

    name = "rare:cse-lazy-one-graph-in-ten"

    def fx_graph_cse(self, graph: fx.Graph) -> fx.Graph:
        if graph_checksum(graph) % RARITY == 0:
            return copy.deepcopy(graph)  # a new graph, as the contract asks, unmerged
        return fx_graph_cse(graph)
