"""Is a CSE result sound? The judge the properties use, with a reproducer for its message.

``unsound_reasons(gm, new_graph, make_inputs)`` runs the original and the rewritten graph on
equal fresh inputs and lists what differs:

* the new graph fails ``lint`` or has more nodes;
* it has fewer random, mutating, side-effecting, uninitialized or opaque nodes (those are
  never merged);
* an output, an input after the run (in-place writes), or the value any surviving node had
  right after it ran, is not bit-identical (NaN and -0.0 compared by bits; nodes matched by
  name, as both passes keep names). Both runs start from the same RNG seed: random nodes are
  kept in order, so they draw the same numbers, and graphs with random ops are compared too;
* which outputs share storage with which outputs and inputs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Hashable

import torch
from torch import fx

from refimpl.cse.effects import effects_of

KEPT_KINDS = ("random", "mutating", "side_effect", "uninitialized", "opaque")


def bitwise_equal(a, b) -> bool:
    """Same structure and, for tensors, the same dtype, shape and bits (NaN and -0.0 too)."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(bitwise_equal, a, b))
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(_bits(a), _bits(b)))
    return a == b


def _bits(t: torch.Tensor) -> torch.Tensor:
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.reshape(-1))
    return flat.view(torch.uint8)


def kept_counts(graph: fx.Graph) -> Counter[str]:
    """How many nodes of each never-merged kind the graph has."""
    return Counter(e.kind for e in effects_of(graph.nodes).values() if e.kind in KEPT_KINDS)


def _snapshot(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def run_recording(gm: fx.GraphModule, inputs: list,
                  seed: int = 0) -> tuple[object, dict[str, object]]:
    """Run ``gm`` from RNG seed ``seed`` (the caller's RNG state is restored afterwards);
    return its output and a copy of every node's value right after it ran."""
    values: dict[str, object] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node: fx.Node):
            result = super().run_node(node)
            values[node.name] = _snapshot(result)
            return result

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Recorder(gm).run(*inputs), values


def storage_pattern(outputs, inputs) -> list[list[bool]]:
    """For each output tensor: does it share storage with each output and input tensor?"""
    flat = [t for t in (*_leaves(outputs), *inputs) if isinstance(t, torch.Tensor)]
    ptrs = [t.untyped_storage().data_ptr() for t in flat]
    n_out = len([t for t in _leaves(outputs) if isinstance(t, torch.Tensor)])
    return [[p == q for q in ptrs] for p in ptrs[:n_out]]


def _leaves(value) -> list:
    return [v for x in value for v in _leaves(x)] if isinstance(value, (list, tuple)) \
        else [value]


def unsound_reasons(gm: fx.GraphModule, new_graph: fx.Graph, make_inputs: Callable[[], list],
                    must_keep: Collection[str] | None = None) -> list[str]:
    """Everything that shows ``new_graph`` does not compute what ``gm.graph`` computes.

    ``must_keep``: names of nodes that must survive (random draws, writes), as the caller
    knows them independently (e.g. a generator's record); by default the never-merged
    counts of refimpl's own effect rules (:func:`kept_counts`) are compared.
    """
    try:
        new_graph.lint()
    except Exception as exc:  # lint raises RuntimeError or AssertionError
        return [f"lint failed: {exc}"]
    reasons = []
    if len(new_graph.nodes) > len(gm.graph.nodes):
        reasons.append(f"node count grew: {len(gm.graph.nodes)} -> {len(new_graph.nodes)}")
    if must_keep is not None:
        lost = sorted(set(must_keep) - {n.name for n in new_graph.nodes})
        if lost:
            reasons.append(f"never-merged nodes removed: {lost}")
    elif kept_counts(gm.graph) != kept_counts(new_graph):
        reasons.append(f"never-merged nodes changed: {dict(kept_counts(gm.graph))} -> "
                       f"{dict(kept_counts(new_graph))}")
    old_in, new_in = make_inputs(), make_inputs()
    old_out, old_values = run_recording(gm, old_in)
    new_out, new_values = run_recording(fx.GraphModule(gm, new_graph), new_in)
    if not bitwise_equal(old_out, new_out):
        reasons.append("outputs differ")
    if not bitwise_equal(old_in, new_in):
        reasons.append("inputs differ after the run (in-place writes)")
    changed = [name for name, v in new_values.items() if name != "output"
               and name in old_values and not bitwise_equal(old_values[name], v)]
    if changed:
        reasons.append(f"values of surviving nodes differ: {changed}")
    if storage_pattern(old_out, old_in) != storage_pattern(new_out, new_in):
        reasons.append("outputs share storage differently (with each other or the inputs)")
    return reasons


def naive_duplicates(graph: fx.Graph) -> int:
    """How many nodes a naive CSE would drop: one that ignores effects (random draws, writes,
    aliasing) and compares constants with ``==`` (``0.0 == -0.0``; here NaN equals NaN too).
    A graph with none offers no merge to make or to refuse; the properties' reach reads it.

    Algorithm: hash-consing in graph order; a node's key is (op, target, its arguments with
    each graph value replaced by its naive representative), kwargs as a sorted mapping.
    """
    first: dict[Hashable, fx.Node] = {}
    rep: dict[fx.Node, fx.Node] = {}
    dropped = 0
    for node in graph.nodes:
        rep[node] = node
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        try:
            key = (node.op, node.target, _naive(node.args, rep),
                   tuple(sorted((k, _naive(v, rep)) for k, v in node.kwargs.items())))
            hash(key)
        except TypeError:  # an unhashable target or constant: never a naive duplicate
            continue
        if key in first:
            rep[node] = first[key]
            dropped += 1
        else:
            first[key] = node
    return dropped


def _naive(value, rep: dict[fx.Node, fx.Node]):
    if isinstance(value, fx.Node):
        return ("node", rep[value])
    if isinstance(value, (list, tuple)):
        return tuple(_naive(v, rep) for v in value)
    if isinstance(value, slice):
        return ("slice", _naive((value.start, value.stop, value.step), rep))
    if isinstance(value, float) and value != value:
        return "nan"
    return value
