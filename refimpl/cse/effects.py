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
import inspect
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
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
    "empty_quantized", "_empty_affine_quantized", "_empty_per_channel_affine_quantized",
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
    return {node: effect_of(node, summaries) for node in nodes}


def _resolve_copy(node: fx.Node, effect: Effect) -> Effect:
    """A maybe-copy whose inputs' traced values (``meta["val"]``, as make_fx and dynamo record)
    show what it does: a view if, run on tensors of the inputs' sizes, strides and dtypes
    (:func:`_returns_view`; symbolic sizes too), it returns its input or a view; else a
    copy.

    The op is re-run rather than the recorded output's storage compared with its input's:
    after any rewrite (a CSE merge redirects a reader to an equal value) the recorded values
    of a node and its input may come from two different, equal nodes, so storage identity
    is stale while sizes, strides and dtypes stay right.
    """
    if not effect.maybe_copy or len(effect.aliases) != 1:
        return effect
    view = _returns_view(node, effect.aliases[0])
    if view is None:
        return effect
    return replace(effect, maybe_copy=False, aliases=effect.aliases if view else ())


def _returns_view(node: fx.Node, source: fx.Node) -> bool | None:
    """Does ``node`` return ``source`` or a view of it? None: unknown (a value not traced).

    Tensors are blanks of the recorded sizes, strides and dtypes on the meta device; a
    recorded fake tensor (make_fx, dynamo: its sizes may be symbols, ``(s0, s0)``) is used
    itself (it runs the op in its own fake mode, where symbolic strides still say whether
    a view is possible)."""
    blanks: dict[fx.Node, torch.Tensor] = {}

    def to_blank(value):
        if not isinstance(value, fx.Node):
            return value
        val = value.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise LookupError(value)
        if value not in blanks:
            blanks[value] = _blank_like(val)
        return blanks[value]

    try:
        args, kwargs = fx.node.map_aggregate((node.args, node.kwargs), to_blank)
        with torch.no_grad():
            out = node.target(*args, **kwargs)
    except Exception:  # an untraced or non-tensor graph value, two fake modes, no meta kernel
        return None
    return out is blanks[source] or (isinstance(out, torch.Tensor) and out._is_view())


def _blank_like(val: torch.Tensor) -> torch.Tensor:
    """``val`` itself if it is a fake tensor, else an uninitialised meta tensor of its
    sizes, strides and dtype."""
    if getattr(val, "fake_mode", None) is not None:
        return val
    return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="meta")


def effect_of(node: fx.Node, summaries: dict) -> Effect:
    """Classify one node; see the module docstring for the order of the rules.
    ``summaries`` holds the :class:`OpSummary` of each aten op met so far (it fills it)."""
    if node.op in ("placeholder", "get_attr", "output"):
        return Effect("structural")
    inputs = node_inputs((node.args, node.kwargs))
    if node.op == "call_module":
        return Effect("opaque", writes=inputs, aliases=inputs)
    if _defines_unbacked_symbol(node):
        return Effect("unbacked")
    if isinstance(node.target, torch._ops.OpOverload):
        if node.target not in summaries:
            summaries[node.target] = summarize_op(node.target, node)
        return _resolve_copy(node, summaries[node.target].effect(node))
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op == "call_function" and getattr(node.target, "__module__", None) in (
            "_operator", "operator"):
        return _operator_effect(node, name)
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
    #: position of a ``dropout_p`` argument when that optional dropout is the op's only source
    #: of randomness (attention kernels); None otherwise
    dropout_arg: int | None = None

    def effect(self, node: fx.Node) -> Effect:
        """The Effect of one call: argument positions resolved to the graph values there.

        An attention kernel tagged random for its optional dropout is pure in a call whose
        ``dropout_p`` is the constant 0: it then draws nothing."""
        def values(positions: tuple[int, ...]) -> tuple[fx.Node, ...]:
            return tuple(v for i in positions for v in node_inputs(self._argument(node, i)))
        kind = "pure" if self._draws_nothing(node) else self.kind
        return Effect(kind, values(self.written), values(self.aliased), self.inplace_view,
                      self.maybe_copy)

    def _draws_nothing(self, node: fx.Node) -> bool:
        if self.kind != "random" or self.dropout_arg is None:
            return False
        value = self._argument(node, self.dropout_arg)
        if value is None:
            value = self.op._schema.arguments[self.dropout_arg].default_value
        return type(value) in (int, float) and value == 0

    def _argument(self, node: fx.Node, index: int):
        arg = self.op._schema.arguments[index]
        if index < len(node.args) and not arg.kwarg_only:
            return node.args[index]
        return node.kwargs.get(arg.name)


def summarize_op(op: torch._ops.OpOverload, node: fx.Node) -> OpSummary:
    """Tags and names for randomness; ``!`` annotations for writes; views: the alias sets an
    argument shares with a return, or ``a -> *`` (a list of views); a node for fx's impurity."""
    schema = op._schema
    name = schema.name.split("::")[-1]
    returned = {s for r in schema.returns if r.alias_info for s in r.alias_info.before_set}
    infos = [(i, a.alias_info) for i, a in enumerate(schema.arguments) if a.alias_info]
    written = tuple(i for i, info in infos if info.is_write)
    aliased = tuple(i for i, info in infos if returned & info.before_set or "*" in info.after_set)
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
                     name in MAYBE_COPY_NAMES, _optional_dropout(op, name))


def _optional_dropout(op: torch._ops.OpOverload, name: str) -> int | None:
    """The ``dropout_p`` position of an op whose only randomness is that optional dropout:
    tagged ``nondeterministic_seeded`` alone (not bitwise-nondeterministic, not a random op
    by name), with a ``dropout_p`` argument."""
    if (torch.Tag.nondeterministic_seeded not in op.tags
            or torch.Tag.nondeterministic_bitwise in op.tags
            or name.rstrip("_") in RANDOM_NAMES):
        return None
    names = [a.name for a in op._schema.arguments]
    return names.index("dropout_p") if "dropout_p" in names else None


def _operator_effect(node: fx.Node, name: str) -> Effect:
    """``operator.*``: ``setitem``/``iadd``... write their first argument when it is a graph
    value; ``getitem`` returns an element of its first argument or a view of it, so it may
    alias every graph value in there (a tensor, a list of views, or a tuple of values:
    ``getitem((x, y), 1)`` is ``y`` itself); the rest compute fresh values."""
    first = tuple(v for v in node.args[:1] if isinstance(v, fx.Node))
    if name in _MUTATING_OPERATORS:
        return Effect("mutating", writes=first, aliases=first)
    container = node_inputs(node.args[:1])
    return Effect("pure", aliases=container if name == "getitem" else ())


def _aten_packet(node: fx.Node, name: str):
    """The aten op family a torch function or Tensor method of this name stands for (an
    operator method such as ``__and__`` has one too); None where the name is no aten op or
    names another attribute of ``torch.ops.aten`` (``__doc__``, ``__class__``)."""
    if node.op == "call_function" and not any(
            getattr(ns, name, None) is node.target for ns in _TORCH_NAMESPACES):
        return None
    found = getattr(torch.ops.aten, name, None) or getattr(torch.ops.aten, "_" + name, None)
    return found if isinstance(found, torch._ops.OpOverloadPacket) else None


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


def _inplace_argument(node: fx.Node) -> bool:
    """A Python function's ``inplace`` parameter (``F.relu(x, True)``, ``F.dropout(x,
    inplace=True)``), given by keyword or by position: the functions test it with ``if
    inplace:``, so a constant writes when it is true (``None`` and ``0`` do not); a graph
    value there may be true."""
    if node.op != "call_function":
        return False
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)
        flag = bound.arguments.get("inplace", False)
    except (TypeError, ValueError):  # no signature, or arguments it does not take
        flag = node.kwargs.get("inplace", False)
    return isinstance(flag, fx.Node) or bool(flag)


def _packet_effect(node, name: str, packet, inputs: tuple[fx.Node, ...]) -> Effect:
    """A torch function/method read through its aten family. Views are assumed to alias
    every input (which one is not known without the overload)."""
    overloads = [getattr(packet, o) for o in packet.overloads()]
    plain = [op for op in overloads if not op._schema.is_mutable] or overloads
    writes = name.endswith("_") or node.kwargs.get("out") is not None or \
        _inplace_argument(node) or any(op._schema.is_mutable for op in plain)
    written = inputs if writes else ()
    if name in RANDOM_NAMES or name.rstrip("_") in RANDOM_NAMES or any(
            t in op.tags for op in plain for t in _RANDOM_TAGS):
        return Effect("random", writes=written, aliases=written)  # x.uniform_() writes x
    if writes:
        return Effect("mutating", writes=inputs, aliases=inputs,
                      inplace_view=any(torch.Tag.inplace_view in op.tags for op in overloads))
    if name in UNINITIALIZED_NAMES:
        return Effect("uninitialized")
    if node.is_impure() or not any(op._schema.returns for op in plain):
        return Effect("side_effect")
    views = any(r.alias_info for op in plain for r in op._schema.returns)
    return Effect("pure", aliases=inputs if views else (),
                  maybe_copy=views and name in MAYBE_COPY_NAMES)
