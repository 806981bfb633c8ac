"""Large deterministic aten graphs for CSE's scaling checks (benchmarks and work counts).

:func:`aten_graph` scales the CSE seed's random program up: unary, binary and scalar aten
ops, each reading values among the last 64, and a quarter of the nodes deliberate
duplicates of a recent node. The same ``(num_nodes, seed)`` gives the same graph.
"""

from __future__ import annotations

import random

import torch
from torch import fx

aten = torch.ops.aten
UNARY = (aten.cos.default, aten.tanh.default, aten.clone.default, aten.gelu.default)
BINARY = (aten.add.Tensor, aten.mul.Tensor)
WINDOW = 64  # how far back a node's arguments reach
DUPLICATE_SHARE = 0.25


def aten_graph(num_nodes: int, seed: int = 0) -> fx.Graph:
    """A graph of ``num_nodes`` nodes (two placeholders and the output included)."""
    if not isinstance(num_nodes, int) or num_nodes < 4:
        raise ValueError(f"num_nodes={num_nodes!r}: expected an int >= 4")
    rng = random.Random(seed)
    graph = fx.Graph()
    values = [graph.placeholder("x"), graph.placeholder("y")]
    made: list[tuple] = []
    for _ in range(num_nodes - 3):
        if made and rng.random() < DUPLICATE_SHARE:
            target, args = made[rng.randrange(max(0, len(made) - WINDOW), len(made))]
        else:
            target, args = _fresh_call(rng, values[-WINDOW:])
        made.append((target, args))
        values.append(graph.call_function(target, args))
    graph.output((values[-1],))
    return graph


def _fresh_call(rng: random.Random, window: list[fx.Node]) -> tuple:
    """A new (target, args): a unary op, a binary op, or an add of a Python scalar."""
    kind = rng.randrange(3)
    if kind == 0:
        return rng.choice(UNARY), (rng.choice(window),)
    if kind == 1:
        return rng.choice(BINARY), (rng.choice(window), rng.choice(window))
    return aten.add.Tensor, (rng.choice(window), rng.choice((1, 1.0, 2)))
