"""What one node does besides computing a value: the facts CSE needs, as plain data.

Every node gets an :class:`Effect`:

``kind``
    ``"pure"`` (a candidate for merging) or the reason it is never merged: ``"structural"``
    (placeholder, get_attr, output), ``"random"`` (schema tag ``nondeterministic_seeded`` or
    ``nondeterministic_bitwise``, or a random op family by name), ``"uninitialized"`` (the
    ``empty`` family: its value is whatever memory held), ``"mutating"`` (writes an argument:
    a ``!`` in its schema, an ``out=``, an in-place name), ``"side_effect"`` (returns nothing,
    or fx marks it impure), ``"unbacked"`` (defines an unbacked symbol), ``"opaque"``
    (a module call or a Python function whose behaviour cannot be read off a schema).
``writes``
    the graph values whose storage the node writes (an opaque node may write any input).
``aliases``
    the graph values whose storage its output may share (views, ``out=``, in-place ``self``;
    an opaque node may alias any input).
``inplace_view``
    it changes the metadata (shape/strides) of what it writes, e.g. ``t_``.
``maybe_copy``
    its schema says "view" but it returns a copy when a view is impossible (``reshape``,
    ``contiguous``, ``to``, ...), so two equal calls may be two storages.

Classification order: aten ``OpOverload`` nodes are read from their schema and tags; a torch
Python function or Tensor method is read from the aten op of the same name; operator-module
functions by name; everything else is opaque.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass, replace

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

_RANDOM_TAGS = (torch.Tag.nondeterministic_seeded, torch.Tag.nondeterministic_bitwise)
#: op families that draw random numbers even where a schema forgets to say so.
RANDOM_NAMES = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "bernoulli", "dropout", "native_dropout", "_fused_dropout", "feature_dropout",
    "alpha_dropout", "feature_alpha_dropout", "normal", "multinomial", "poisson",
    "binomial", "rrelu", "rrelu_with_noise", "_standard_gamma", "_sample_dirichlet",
    "uniform", "exponential", "geometric", "cauchy", "log_normal", "random",
    "dropout1d", "dropout2d", "dropout3d", "gumbel_softmax",
})
MAYBE_COPY_NAMES = frozenset({
    "reshape", "reshape_as", "contiguous", "to", "type_as", "flatten", "type", "cpu", "cuda",
    "double", "float", "half", "bfloat16", "int", "long", "short", "bool", "char", "byte",
})
UNINITIALIZED_NAMES = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "empty_permuted",
})
_MUTATING_OPERATORS = frozenset({
    "setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul",
    "imod", "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"})
_TORCH_NAMESPACES = (torch, torch.nn.functional, torch.special, torch.linalg, torch.fft,
                     torch._C._nn, torch._C._VariableFunctions, torch.Tensor)
#: Python functions on numbers (dynamo's SymInt arithmetic) known to have no side effect.
_PURE_BUILTINS = frozenset({"abs", "min", "max", "round", "pow", "divmod", "int", "float",
                            "bool", "len", "getattr", "isinstance"})


@dataclass(frozen=True)
class Effect:
    """The CSE-relevant behaviour of one node (see the module docstring)."""

    kind: str
    writes: tuple[fx.Node, ...] = ()
    aliases: tuple[fx.Node, ...] = ()
    inplace_view: bool = False
    maybe_copy: bool = False


def node_inputs(value) -> tuple[fx.Node, ...]:
    """The graph values inside a (nested) argument, in order."""
    found: list[fx.Node] = []
    _collect(value, found)
    return tuple(found)


def _collect(value, found: list[fx.Node]) -> None:
    if isinstance(value, fx.Node):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, found)
    elif isinstance(value, slice):
        _collect((value.start, value.stop, value.step), found)


def effects_of(nodes) -> dict[fx.Node, Effect]:
    """:func:`effect_of` for every node; what a schema says is read once per op."""
    summaries: dict[torch._ops.OpOverload, OpSummary] = {}
    effects = {}
    for node in nodes:
        op = node.target
        if isinstance(op, torch._ops.OpOverload) and node.op == "call_function" \
                and not _defines_unbacked_symbol(node):
            if op not in summaries:
                summaries[op] = summarize_op(op, node)
            effects[node] = _resolve_copy(node, summaries[op].effect(node))
        else:
            effects[node] = effect_of(node)
    return effects


def _resolve_copy(node: fx.Node, effect: Effect) -> Effect:
    """A maybe-copy whose traced values (``meta["val"]``, as make_fx and dynamo record) show
    what it did: a view if it shares storage with the input it may alias, else a copy."""
    if not effect.maybe_copy or len(effect.aliases) != 1:
        return effect
    out, source = node.meta.get("val"), effect.aliases[0].meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(source, torch.Tensor):
        return effect
    try:
        same = out.untyped_storage()._cdata == source.untyped_storage()._cdata
    except (NotImplementedError, RuntimeError):
        return effect
    return replace(effect, maybe_copy=False, aliases=effect.aliases if same else ())


def effect_of(node: fx.Node) -> Effect:
    """Classify one node; see the module docstring for the order of the rules."""
    if node.op in ("placeholder", "get_attr", "output"):
        return Effect("structural")
    inputs = node_inputs((node.args, node.kwargs))
    if node.op == "call_module":
        return Effect("opaque", writes=inputs, aliases=inputs)
    if _defines_unbacked_symbol(node):
        return Effect("unbacked")
    if isinstance(node.target, torch._ops.OpOverload):
        return _resolve_copy(node, summarize_op(node.target, node).effect(node))
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op == "call_function" and getattr(node.target, "__module__", None) in (
            "_operator", "operator"):
        return _operator_effect(node, name, inputs)
    packet = _aten_packet(node, name)
    if packet is None:
        return _pure_python_effect(node, inputs)
    return _packet_effect(node, name, packet, inputs)


def _defines_unbacked_symbol(node: fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(
        free_unbacked_symbols(val))


@dataclass(frozen=True)
class OpSummary:
    """What an aten op's schema and tags say, whatever its arguments: its kind, and which
    argument positions it writes and its output aliases."""

    op: torch._ops.OpOverload
    kind: str
    written: tuple[int, ...]
    aliased: tuple[int, ...]
    inplace_view: bool
    maybe_copy: bool

    def effect(self, node: fx.Node) -> Effect:
        """The Effect of one call: argument positions resolved to the graph values there."""
        def values(positions: tuple[int, ...]) -> tuple[fx.Node, ...]:
            return tuple(v for i in positions for v in node_inputs(self._argument(node, i)))
        return Effect(self.kind, values(self.written), values(self.aliased), self.inplace_view,
                      self.maybe_copy)

    def _argument(self, node: fx.Node, index: int):
        arg = self.op._schema.arguments[index]
        if index < len(node.args) and not arg.kwarg_only:
            return node.args[index]
        return node.kwargs.get(arg.name)


def summarize_op(op: torch._ops.OpOverload, node: fx.Node) -> OpSummary:
    """Tags and names for randomness; ``!`` annotations for writes; shared alias sets between
    an argument and a return for views; a node of this op for fx's impurity check."""
    schema = op._schema
    name = schema.name.split("::")[-1]
    returned = {s for r in schema.returns if r.alias_info for s in r.alias_info.before_set}
    infos = [(i, a.alias_info) for i, a in enumerate(schema.arguments) if a.alias_info]
    written = tuple(i for i, info in infos if info.is_write)
    aliased = tuple(i for i, info in infos if returned & set(info.before_set))
    if any(t in op.tags for t in _RANDOM_TAGS) or name.rstrip("_") in RANDOM_NAMES:
        kind = "random"
    elif name in UNINITIALIZED_NAMES:
        kind = "uninitialized"
    elif written or schema.is_mutable:
        kind = "mutating"
    elif not schema.returns or node.is_impure():
        kind = "side_effect"
    else:
        kind = "pure"
    return OpSummary(op, kind, written, aliased, torch.Tag.inplace_view in op.tags,
                     name in MAYBE_COPY_NAMES)


def _operator_effect(node: fx.Node, name: str, inputs: tuple[fx.Node, ...]) -> Effect:
    """``operator.*``: ``setitem``/``iadd``... write their first argument; ``getitem`` may
    return a view of it; the rest compute fresh values."""
    first = inputs[:1] if node.args and isinstance(node.args[0], fx.Node) else ()
    if name in _MUTATING_OPERATORS:
        return Effect("mutating", writes=first, aliases=first)
    return Effect("pure", aliases=first if name == "getitem" else ())


def _aten_packet(node: fx.Node, name: str):
    """The aten op family a torch function or Tensor method of this name stands for."""
    if node.op == "call_function" and not any(
            getattr(ns, name, None) is node.target for ns in _TORCH_NAMESPACES):
        return None
    if not name or name.startswith("__"):
        return None
    return getattr(torch.ops.aten, name, None) or getattr(torch.ops.aten, "_" + name, None)


def _pure_python_effect(node: fx.Node, inputs: tuple[fx.Node, ...]) -> Effect:
    """``math`` functions, a few builtins and ``torch.sym_*`` (arithmetic on Python and
    symbolic numbers) are pure; anything else is opaque."""
    target = node.target
    name = getattr(target, "__name__", "")
    pure = node.op == "call_function" and (
        getattr(math, name, None) is target
        or (name in _PURE_BUILTINS and getattr(builtins, name, None) is target)
        or (name.startswith("sym_") and getattr(torch, name, None) is target))
    if pure and not node.is_impure():
        return Effect("pure")
    return Effect("opaque", writes=inputs, aliases=inputs)


def _packet_effect(node, name: str, packet, inputs: tuple[fx.Node, ...]) -> Effect:
    """A torch function/method read through its aten family. Views are assumed to alias
    every input (which one is not known without the overload)."""
    overloads = [getattr(packet, o) for o in packet.overloads()]
    plain = [op for op in overloads if not op._schema.is_mutable] or overloads
    if name in RANDOM_NAMES or name.rstrip("_") in RANDOM_NAMES or any(
            t in op.tags for op in plain for t in _RANDOM_TAGS):
        return Effect("random")
    if name.endswith("_") or node.kwargs.get("out") is not None or \
            node.kwargs.get("inplace") is True or any(op._schema.is_mutable for op in plain):
        return Effect("mutating", writes=inputs, aliases=inputs,
                      inplace_view=any(torch.Tag.inplace_view in op.tags for op in overloads))
    if name in UNINITIALIZED_NAMES:
        return Effect("uninitialized")
    if node.is_impure():
        return Effect("side_effect")
    views = any(r.alias_info for op in plain for r in op._schema.returns)
    return Effect("pure", aliases=inputs if views else (),
                  maybe_copy=views and name in MAYBE_COPY_NAMES)
