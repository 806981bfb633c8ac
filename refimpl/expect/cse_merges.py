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
:data:`PURE_BUILTINS`, and ``torch.sym_*`` arithmetic, each only when the target *is* that
function (a user's function of the same name may do anything: opaque); a ``torch.sym_*``
function that is an aten op (``sym_constrain_range``, a check returning nothing) is read
through its schema.

Arguments are equal when they are the same graph value (after earlier repeats) read at the
same version, or equal constants of the same type, floats by their bits (``0.0`` is not
``-0.0``). A value's version counts the writes to it so far (:func:`written_values`): a read
after a write is another value (``refimpl.strategies.cse_registry`` reads each input before
and after a call of every op of the registry). Writes are counted on the value written, not
on its views: the graphs this expectation judges never read a view of a written value.

Attention kernels (``dropout_p``): F.scaled_dot_product_attention's documentation says
dropout is applied only when ``dropout_p`` is greater than 0.0, which is the only random
step of the kernels that take a ``dropout_p``; so a call of one of them whose ``dropout_p``
is a constant not greater than 0 (given, or its schema's default) draws nothing and is pure
(:func:`draws_no_dropout`).
"""

from __future__ import annotations

import builtins
import math
import struct
from collections import Counter
from collections.abc import Hashable

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from refimpl.expect.cse_soundness import node_kind, writes_by_flag

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
        or (name.startswith("sym_") and getattr(torch, name, None) is target
            and not isinstance(getattr(torch.ops.aten, name, None),
                               torch._ops.OpOverloadPacket)))
    if holds_unbacked_symbol(node):
        return "unbacked"
    if python_function or draws_no_dropout(node):
        return "pure"
    return node_kind(node)


def _given(node: fx.Node, schema, index: int):
    """What a call passes for its schema's argument ``index``: positional where it is given
    positionally, else by keyword; None where neither."""
    arg = schema.arguments[index]
    if not arg.kwarg_only and index < len(node.args):
        return node.args[index]
    return node.kwargs.get(arg.name)


def draws_no_dropout(node: fx.Node) -> bool:
    """An aten attention kernel tagged random whose ``dropout_p`` is a constant number not
    greater than 0 in this call (module docstring)."""
    op = node.target
    if not (isinstance(op, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded in op.tags):
        return False
    names = [a.name for a in op._schema.arguments]
    if "dropout_p" not in names:
        return False
    index = names.index("dropout_p")
    value = _given(node, op._schema, index)
    if value is None:
        value = op._schema.arguments[index].default_value
    return type(value) in (int, float) and not value > 0


def _graph_values(value) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg(value, found.append)
    return found


def written_values(node: fx.Node) -> list[fx.Node]:
    """The graph values a call writes: an aten op, the arguments its schema marks written
    (``Tensor(a!)``); ``operator.setitem`` and the augmented assignments, their first
    argument; a torch function or method that writes (a trailing ``_``, ``inplace=``,
    ``out=``: :func:`refimpl.expect.cse_soundness.node_kind`) or an opaque call, every
    graph value it is given (which one is not known without its overload or its code)."""
    if isinstance(node.target, torch._ops.OpOverload):
        schema = node.target._schema
        return [v for i, a in enumerate(schema.arguments) if a.alias_info is not None
                and a.alias_info.is_write for v in _graph_values(_given(node, schema, i))]
    if node.op == "call_function" and getattr(node.target, "__module__", "") in (
            "_operator", "operator"):
        return _graph_values(node.args[:1]) if node_kind(node) == "mutating" else []
    kind = expected_kind(node)
    if kind in ("mutating", "opaque") or (kind == "random" and _draws_in_place(node)):
        return _graph_values((node.args, node.kwargs))
    return []


def _draws_in_place(node: fx.Node) -> bool:
    """A random torch function or method that writes what it draws into an argument: a
    trailing ``_`` (``x.uniform_()``), ``inplace=True``, ``out=``, or an aten name whose
    every overload writes (``_flash_attention_forward_no_dropout_inplace``)."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    packet = getattr(torch.ops.aten, name, None)
    every_overload_writes = isinstance(packet, torch._ops.OpOverloadPacket) and all(
        getattr(packet, o)._schema.is_mutable for o in packet.overloads())
    return name.endswith("_") or writes_by_flag(node) or every_overload_writes


def holds_unbacked_symbol(node: fx.Node) -> bool:
    """Is the node's recorded value a symbolic number in an unbacked symbol (``u0``,
    ``2*u0``: a size only the data decides)? torch's own ``fx_graph_cse`` means to keep such
    nodes (its comment: merging one can leave later nodes' recorded values naming a symbol
    no kept node computes), and so does the contract here: never merged."""
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(
        free_unbacked_symbols(val))


def _key(value, rep: dict[fx.Node, fx.Node], versions: Counter[fx.Node]) -> Hashable:
    """A structural key: graph values by their representative and its version, constants
    by type and value (floats by their bits)."""
    if isinstance(value, fx.Node):
        return ("node", rep[value].name, versions[rep[value]])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v, rep, versions) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v, rep, versions)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", _key((value.start, value.stop, value.step), rep, versions))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    try:
        hash(value)
    except TypeError:
        return ("identity", id(value))
    return (type(value).__qualname__, value)


def representatives(graph: fx.Graph) -> dict[fx.Node, fx.Node]:
    """Hash-consing in graph order: each pure node whose (op, target, arguments) an earlier
    pure node had, reading its graph values at the same versions, is represented by that
    earlier node; every other node by itself. Then each value a node writes gets a new
    version (:func:`written_values`)."""
    rep: dict[fx.Node, fx.Node] = {}
    first: dict[Hashable, fx.Node] = {}
    versions: Counter[fx.Node] = Counter()
    for node in graph.nodes:
        rep[node] = node
        if expected_kind(node) == "pure":
            key = (node.op, _key(node.target, rep, versions), _key(node.args, rep, versions),
                   _key(node.kwargs, rep, versions))
            rep[node] = first.setdefault(key, node)
        for value in written_values(node):
            versions[rep[value]] += 1
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
