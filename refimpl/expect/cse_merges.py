"""The exact result of a CSE on a graph where nothing is written between equal pure calls.

On such a graph (``refimpl.strategies.cse_twins``: one call twice on the same arguments, then
a node reading both) a CSE that is sound and complete removes exactly the repeats of pure
calls, and nothing else: :func:`expected_listing` is that graph, built by hand, and
:func:`listing` is what a backend returned, in the same form (each node's name, op, target,
and its arguments with graph values as the names of the nodes they now are), so the two
compare with ``==``: which nodes go, which node stays (the first of two equal calls), whom
each reader now reads, and the order of the nodes, all at once.

What is pure is :func:`expected_kind`, this module's own reading of torch's documented
semantics (no CSE's rules): :func:`refimpl.expect.cse_soundness.node_kind` (schemas, tags,
``Node.is_impure``, ``inplace=``, ``operator``'s in-place functions); a node whose value is
an unbacked symbol is kept (:func:`holds_unbacked_symbol`); and, for the Python
functions that dynamo records on sizes, the ones the Python and torch documentation define
as functions of their arguments alone: a function of the ``math`` module, the builtins
:data:`PURE_BUILTINS`, and ``torch.sym_*``, each only when the target *is* that function (a
user's function of the same name may do anything: opaque).

Arguments are equal when they are the same graph value (after earlier repeats) or equal
constants of the same type, floats by their bits (``0.0`` is not ``-0.0``).
"""

from __future__ import annotations

import builtins
import math
import struct
from collections.abc import Hashable

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from refimpl.expect.cse_soundness import node_kind

#: builtins that compute a value from their arguments alone (Python's documentation)
PURE_BUILTINS = frozenset({"abs", "min", "max", "round", "pow", "divmod", "int", "float",
                           "bool", "len"})


def expected_kind(node: fx.Node) -> str:
    """``"pure"``, ``"structural"`` or a never-merged kind (module docstring)."""
    target = node.target
    name = getattr(target, "__name__", "")
    python_function = node.op == "call_function" and not node.is_impure() and (
        getattr(math, name, None) is target
        or (name in PURE_BUILTINS and getattr(builtins, name, None) is target)
        or (name.startswith("sym_") and getattr(torch, name, None) is target))
    if holds_unbacked_symbol(node):
        return "unbacked"
    return "pure" if python_function else node_kind(node)


def holds_unbacked_symbol(node: fx.Node) -> bool:
    """Is the node's recorded value a symbolic number in an unbacked symbol (``u0``,
    ``2*u0``: a size only the data decides)? torch's own ``fx_graph_cse`` means to keep such
    nodes (its comment: merging one can leave later nodes' recorded values naming a symbol
    no kept node computes), and so does the contract here: never merged."""
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(
        free_unbacked_symbols(val))


def _key(value, rep: dict[fx.Node, fx.Node]) -> Hashable:
    """A structural key: graph values by their representative, constants by type and value
    (floats by their bits)."""
    if isinstance(value, fx.Node):
        return ("node", rep[value].name)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v, rep) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v, rep)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", _key((value.start, value.stop, value.step), rep))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    try:
        hash(value)
    except TypeError:
        return ("identity", id(value))
    return (type(value).__qualname__, value)


def representatives(graph: fx.Graph) -> dict[fx.Node, fx.Node]:
    """Hash-consing in graph order: each pure node whose (op, target, arguments) an earlier
    pure node had is represented by that earlier node; every other node by itself."""
    rep: dict[fx.Node, fx.Node] = {}
    first: dict[Hashable, fx.Node] = {}
    for node in graph.nodes:
        rep[node] = node
        if expected_kind(node) != "pure":
            continue
        key = (node.op, _key(node.target, rep), _key(node.args, rep), _key(node.kwargs, rep))
        rep[node] = first.setdefault(key, node)
    return rep


def _names(value, rename) -> object:
    return fx.node.map_aggregate(value, lambda v: ("node", rename(v))
                                 if isinstance(v, fx.Node) else v)


def listing(graph: fx.Graph) -> list[tuple]:
    """Each node as (name, op, target, args, kwargs), graph values by name."""
    return [(n.name, n.op, n.target, _names(n.args, lambda v: v.name),
             _names(n.kwargs, lambda v: v.name)) for n in graph.nodes]


def expected_listing(graph: fx.Graph) -> list[tuple]:
    """:func:`listing` of ``graph`` with every repeat of a pure call removed and its readers
    reading the first call instead (module docstring)."""
    rep = representatives(graph)
    return [(n.name, n.op, n.target, _names(n.args, lambda v: rep[v].name),
             _names(n.kwargs, lambda v: rep[v].name)) for n in graph.nodes if rep[n] is n]
