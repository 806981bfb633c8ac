"""Twin calls (``twin_graphs``): every op the CSE generators draw, called twice on the same
arguments, for the property that holds the backend's merge decision to an exact expectation.

A :class:`TwinCase` is one catalogue entry (a key of :data:`TWINS`), its dialect and its drawn
parameters; on its own two inputs it emits::

    [prelude]; a = call(...); b = call(...); c = consume(a, b)

where ``call`` may emit several nodes (``F.dropout`` as ``native_dropout`` and ``getitem``),
``consume`` reads both results (nothing, for a call that returns None), and nothing writes
between the two calls but the calls themselves. A :class:`TwinGraph` puts the cases of one
dialect in one graph, each on inputs of its own (no case reads what another writes), returns
every consumer, and may make every node's ``op`` an equal string that is not the interned
literal (``fresh_ops``: a graph deserialised or built from computed strings has such
strings; ``==`` sees no difference, ``is`` does). Its graphs are long (every entry: more
than 256 positions, where CPython's small ints end). A sound and complete CSE removes exactly
the repeats of pure calls (by hand: :mod:`refimpl.expect.cse_merges`) and keeps every other
node, in order, under its name.

The catalogue (each entry in the dialects it exists in):

* every entry of the ``op_graphs`` vocabulary (:data:`refimpl.strategies.graphs.VOCABULARY`)
  that reads ``(3, 3)`` float inputs: pure ops, views, factories, in-place writes, random
  draws, in-place random draws, effectful calls (aten and torch; with symbolic sizes those
  of :data:`SYMBOLIC_VOCABULARY`);
* the maybe-copies and conversions (``reshape_as``, ``flatten``, ``contiguous``, ``to``,
  ``_to_copy``, ``type_as``: ``type_as`` has no alias annotation at all);
* Python on sizes, as dynamo records it (symbolic_trace dialect): builtins (``abs``, ``max``,
  ``min``, ``round``, ``pow``, ``int``, ``float``, ``bool``, ``len``), ``math`` functions,
  ``torch.sym_*``, ``operator`` arithmetic; user functions named like a builtin, a ``math``
  function or a ``torch.sym_*`` function (opaque: not the function their name says);
* ``operator.getitem`` of a tensor and of a tuple of tensors, ``operator.setitem`` and an
  augmented assignment (``iadd``), ``torch.manual_seed``, ``get_attr`` of a buffer and a
  ``call_module``;
* ``_assert_async`` of a sum (aten and torch): it returns nothing, and torch.fx does not
  list it as side-effectful (``Node.is_impure`` is false), so only its empty return shows
  its effect;
* constants of the rarer kinds (aten): one tensor object, a float subclass and an int
  subclass (what numpy's ``float64`` and an ``IntEnum`` member are), each the same in both
  calls;
* ``empty_like`` (aten and torch): uninitialized memory, never one value with another call;
* the size of a ``nonzero`` result (symbolic sizes): ``sym_size.int`` whose value is an
  unbacked symbol ``u0``, which the node that computes it binds (kept).

Generation: each entry's dialect (shrinks to its first) and parameters; ``fresh_ops`` once.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import fx

from refimpl.strategies.graph_ops import CONSTANTS, SYMBOLIC_EMITS, VOCABULARY, Value
from refimpl.strategies.graphs import annotate, annotate_symbolic

aten = torch.ops.aten

__all__ = ["ALL_STYLES", "PART_META", "TWINS", "Twin", "TwinCase", "TwinGraph", "twin_graphs"]

#: the dialects a twin may be drawn in (``op_graphs``' names)
ALL_STYLES = ("aten", "symbolic", "torch")
#: the parameters of an entry that draws none
NO_PARAMS = st.just(())
#: the meta key naming the entry and part of the twin graph a node belongs to
PART_META = "cse_twins_part"


@dataclass(frozen=True)
class Twin:
    """One catalogue entry: ``call(graph, values, params)`` emits one call (one or more nodes)
    and returns its result node; ``prelude(graph, xs)`` emits what both calls read besides
    the inputs (default: the inputs themselves); ``result`` is ``"tensor"``, ``"number"`` or
    ``"none"`` (how the consumer reads it); ``params`` draws the call's constants."""

    call: Callable[[fx.Graph, list, tuple], fx.Node]
    styles: tuple[str, ...]
    result: str = "tensor"
    prelude: Callable[[fx.Graph, list], list] = lambda graph, xs: list(xs)
    params: st.SearchStrategy = NO_PARAMS


def _vocabulary_call(name: str, style: str):
    kind = VOCABULARY[name]
    emit = kind.emit_torch if style == "torch" else (
        SYMBOLIC_EMITS.get(name, kind.emit) if style == "symbolic" else kind.emit)

    def call(graph: fx.Graph, values: list, params: tuple) -> fx.Node:
        return emit(graph, values[:kind.arity], params)
    return call


def _vocabulary() -> dict[str, Callable[[str], Twin]]:
    """The ``op_graphs`` vocabulary entries that read ``(3, 3)`` float inputs."""
    square = Value((3, 3), storage=0)
    other = Value((3, 3), storage=1)
    twins = {}
    for name, kind in VOCABULARY.items():
        inputs = [square, other][:kind.arity]
        if not kind.fits(inputs):
            continue
        result = "none" if kind.family == "effect" else "tensor"
        twins[name] = (kind, inputs, result)
    return twins


def _fn(target, *constants, **kwargs):
    """A call of ``target`` on the first value and ``constants``."""
    return lambda graph, values, params: graph.call_function(target, (values[0], *constants),
                                                             dict(kwargs))


def _method(name, *constants, n_values=1):
    return lambda graph, values, params: graph.call_method(
        name, (*values[:n_values], *constants))


def _size_prelude(graph: fx.Graph, xs: list) -> list:
    """``s = x0.size(0)``: a Python int (3) that the size functions read."""
    return [graph.call_method("size", (xs[0], 0))]


def user_max(a, b):
    """A pure user function whose ``__name__`` is ``max`` (not the builtin)."""
    return a if a >= b else b


def user_sqrt(a):
    """A pure user function whose ``__name__`` is ``sqrt`` (not ``math.sqrt``)."""
    return a ** 0.5


def user_sym_float(a):
    """A pure user function whose ``__name__`` is ``sym_float`` (not ``torch.sym_float``)."""
    return float(a)


user_max.__name__ = "max"
user_sqrt.__name__ = "sqrt"
user_sym_float.__name__ = "sym_float"


def _on_size(target, *constants) -> Twin:
    return Twin(_fn(target, *constants), ("torch",), "number", _size_prelude)


def _tuple_item(graph: fx.Graph, values: list, params: tuple) -> fx.Node:
    return graph.call_function(operator.getitem, ((values[0], values[1]), 1))


def _setitem(graph: fx.Graph, values: list, params: tuple) -> fx.Node:
    return graph.call_function(operator.setitem, (values[0], 0, 2.0))


class FloatLike(float):
    """A float subclass (as numpy's ``float64`` is): a constant of another type, same value."""


class IntLike(int):
    """An int subclass (as an ``IntEnum`` member is)."""


#: one tensor object passed as a constant argument to both calls of a twin
TENSOR_CONSTANT = torch.full((3,), 0.25)


class _Holder(torch.nn.Module):
    """The root of the twin graphs: a buffer for ``get_attr``, a module for ``call_module``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.full((3, 3), 0.5))
        self.act = torch.nn.ReLU()


def _extras() -> dict[str, Twin]:
    aten_styles = ("aten", "symbolic")
    extras = {
        "type_as": Twin(lambda g, v, p: g.call_function(aten.type_as.default, (v[0], v[1])),
                        aten_styles),
        "aten_reshape_as": Twin(lambda g, v, p: g.call_function(aten.reshape_as.default,
                                                                (v[0], v[1])), aten_styles),
        "aten_contiguous": Twin(_fn(aten.contiguous.default), aten_styles),
        "aten_flatten": Twin(_fn(aten.flatten.using_ints), aten_styles),
        "aten_to_dtype": Twin(_fn(aten.to.dtype, torch.float64), aten_styles),
        "aten_to_copy": Twin(_fn(aten._to_copy.default, dtype=torch.float64), aten_styles),
        "method_contiguous": Twin(_method("contiguous"), ("torch",)),
        "method_to": Twin(_method("to", torch.float64), ("torch",)),
        "method_reshape_as": Twin(_method("reshape_as", n_values=2), ("torch",)),
        "method_type_as": Twin(_method("type_as", n_values=2), ("torch",)),
        "method_size": Twin(_method("size", 0), ("torch",), "number"),
        "method_dim": Twin(_method("dim"), ("torch",), "number"),
        "tensor_item": Twin(_fn(operator.getitem, 0), ("torch",)),
        "tuple_item": Twin(_tuple_item, ("torch",)),
        "setitem": Twin(_setitem, ("torch",), "none"),
        "iadd": Twin(_fn(operator.iadd, 1.0), ("torch",)),
        "size_mul": _on_size(operator.mul, 2),
        "size_floordiv": _on_size(operator.floordiv, 2),
        "len": Twin(_fn(builtins.len), ("torch",), "number"),
        "manual_seed": Twin(lambda g, v, p: g.call_function(torch.manual_seed, (0,)),
                            ("torch",), "none"),
        "aten_assert_async": Twin(_fn(aten._assert_async.default), ("aten",), "none",
                                  lambda g, xs: [g.call_function(aten.sum.default, (xs[0],))]),
        "torch_assert_async": Twin(_fn(torch._assert_async), ("torch",), "none",
                                   lambda g, xs: [g.call_function(torch.sum, (xs[0],))]),
        "tensor_constant": Twin(_fn(aten.add.Tensor, TENSOR_CONSTANT), ("aten",)),
        "float_subclass_constant": Twin(_fn(aten.mul.Tensor, FloatLike(2.5)), ("aten",)),
        "int_subclass_constant": Twin(_fn(aten.add.Tensor, IntLike(3)), ("aten",)),
        "aten_empty_like": Twin(_fn(aten.empty_like.default), aten_styles),
        "torch_empty_like": Twin(_fn(torch.empty_like), ("torch",)),
        "unbacked_size": Twin(lambda g, v, p: g.call_function(aten.sym_size.int, (v[0], 0)),
                              ("symbolic",), "number",
                              lambda g, xs: [g.call_function(aten.nonzero.default, (xs[0],))]),
        "get_attr": Twin(lambda g, v, p: g.get_attr("w"), ("aten", "torch")),
        "call_module": Twin(lambda g, v, p: g.call_module("act", (v[0],)), ("torch",)),
        "user_max": _on_size(user_max, 2),
        "user_sqrt": _on_size(user_sqrt),
        "user_sym_float": _on_size(user_sym_float),
    }
    for name, constants in (("abs", ()), ("max", (2,)), ("min", (2,)), ("round", ()),
                            ("pow", (2,)), ("int", ()), ("float", ()), ("bool", ())):
        extras[f"builtin_{name}"] = _on_size(getattr(builtins, name), *constants)
    for name, constants in (("sqrt", ()), ("floor", ()), ("exp", ()), ("log", ())):
        extras[f"math_{name}"] = _on_size(getattr(math, name), *constants)
    for name, constants in (("sym_float", ()), ("sym_max", (2,)), ("sym_min", (2,)),
                            ("sym_int", ())):
        if hasattr(torch, name):
            extras[f"torch_{name}"] = _on_size(getattr(torch, name), *constants)
    return extras


#: vocabulary entries drawn with symbolic sizes too: those make_fx records otherwise there
#: (a size as a SymInt node), and the views whose strides become symbols (the rest read
#: alike in both make_fx dialects; symbolic tracing is slow)
SYMBOLIC_VOCABULARY = frozenset({*SYMBOLIC_EMITS, "reshape", "flatten_view", "t", "clone"})


def _vocabulary_twins() -> dict[str, Twin]:
    twins = {}
    for name, (kind, inputs, result) in _vocabulary().items():
        styles = ALL_STYLES if name in SYMBOLIC_VOCABULARY else ("aten", "torch")
        twins[name] = Twin(name, styles, result, params=kind.params(inputs, CONSTANTS))
    return twins


#: entry name -> Twin. A vocabulary entry's ``call`` is its name (emitted per dialect).
TWINS: dict[str, Twin] = {**_vocabulary_twins(), **_extras()}


def _fresh(text: str) -> str:
    """An equal string that is a new object (not the interned literal)."""
    return "".join(list(text))


@dataclass(frozen=True)
class TwinCase:
    """One entry called twice (module docstring), with its drawn dialect and parameters."""

    entry: str
    style: str
    params: tuple

    def emit(self, graph: fx.Graph, xs: list[fx.Node]) -> list[fx.Node]:
        """The prelude, the two calls and the consumer on inputs ``xs`` (two of them); each
        node tagged with the entry and its part in ``meta[PART_META]``; the graph values to
        return (the consumer, or none)."""
        twin = TWINS[self.entry]
        values = self._part(graph, "prelude", lambda: twin.prelude(graph, xs))
        results = [self._part(graph, part, lambda: [self._call(graph, values)])[0]
                   for part in ("first", "second")]
        if twin.result == "none":
            return []
        return self._part(graph, "consumer", lambda: [self._consume(graph, results)])

    def _part(self, graph: fx.Graph, part: str, emit: Callable[[], list]) -> list:
        last = next(iter(reversed(graph.nodes)))
        made = emit()
        node = next(iter(reversed(graph.nodes)))
        while node is not last:
            node.meta[PART_META] = (self.entry, part)
            node = node.prev
        return made

    def _call(self, graph: fx.Graph, values: list) -> fx.Node:
        call = TWINS[self.entry].call
        if isinstance(call, str):
            return _vocabulary_call(call, self.style)(graph, values, self.params)
        return call(graph, values, self.params)

    def _consume(self, graph: fx.Graph, results: list) -> fx.Node:
        if TWINS[self.entry].result == "number" or self.style == "torch":
            return graph.call_function(operator.add, tuple(results))
        return graph.call_function(aten.add.Tensor, tuple(results))


@dataclass(frozen=True)
class TwinGraph:
    """Twin cases of one dialect in one graph, each on its own two inputs (so no case reads
    what another writes), and whether every node's ``op`` is a fresh string."""

    style: str
    cases: tuple[TwinCase, ...]
    fresh_ops: bool = False

    def build(self) -> fx.GraphModule:
        graph = fx.Graph()
        xs = [graph.placeholder(f"x{i}") for i in range(2 * len(self.cases))]
        outputs = [out for i, case in enumerate(self.cases)
                   for out in case.emit(graph, xs[2 * i:2 * i + 2])]
        graph.output(tuple(outputs) or (xs[0],))
        return fx.GraphModule(_Holder(), graph)

    def traced(self) -> fx.GraphModule:
        """:meth:`build`, with make_fx's ``meta["val"]`` (aten), fake values of symbolic sizes
        (symbolic) or nothing (torch); then the fresh ``op`` strings, if drawn."""
        gm = self.build()
        if self.style == "symbolic":
            annotate_symbolic(gm, self.example_inputs())
        elif self.style == "aten":
            annotate(gm, self.example_inputs())
        if self.fresh_ops:
            for node in gm.graph.nodes:
                node.op = _fresh(node.op)
        return gm

    def example_inputs(self, seed: int = 0) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(3, 3, generator=gen) for _ in range(2 * len(self.cases))]


@st.composite
def twin_graphs(draw, styles: tuple[str, ...] = ALL_STYLES) -> list[TwinGraph]:
    """Every catalogue entry twice, each in one of its dialects among ``styles`` (entries with
    none are left out), grouped into one :class:`TwinGraph` per dialect."""
    by_style: dict[str, list[TwinCase]] = {}
    for entry, twin in TWINS.items():
        usable = [s for s in twin.styles if s in styles]
        if usable:
            style = draw(st.sampled_from(usable), label=entry)
            by_style.setdefault(style, []).append(TwinCase(entry, style, draw(twin.params)))
    fresh = draw(st.booleans())
    return [TwinGraph(style, tuple(cases), fresh) for style, cases in by_style.items()]
