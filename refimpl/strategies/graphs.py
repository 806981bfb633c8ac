"""Random FX op graphs (``op_graphs``): plain-data specs that build an aten graph.

A :class:`GraphSpec` is plain data: the number of inputs, one :class:`NodeSpec` per op (its
vocabulary name, the indices of the earlier values it reads, its constant parameters), and
the output indices. ``spec.build()`` makes the ``fx.GraphModule``; ``spec.example_inputs()``
makes fresh inputs; ``str(spec)`` prints a runnable-looking listing for a reproducer.

Generation: values are numbered; the inputs are ``(side, side)`` float tensors; each new node
draws its op from the enabled, applicable vocabulary entries and its inputs only from earlier
values whose shapes fit, so every graph is acyclic and runs. Each node may instead repeat an
earlier node (a deliberate duplicate, with its kwargs possibly in the other order). Swarm
testing: each family may be switched off for a whole graph; the switches shrink towards
everything enabled, node counts shrink towards one, inputs towards the first placeholder.

The vocabulary is a table (``VOCABULARY``): add an :class:`OpKind` to extend it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from hypothesis import strategies as st
from torch import fx

aten = torch.ops.aten
Shape = tuple[int, ...]

__all__ = ["CONSTANTS", "FAMILIES", "VOCABULARY", "GraphOptions", "GraphSpec", "NodeSpec",
           "OpKind", "annotate", "op_graphs"]

#: constants whose hashes collide (1, 1.0, True; 0, 0.0, -0.0) or that break ``==`` (NaN).
CONSTANTS: tuple = (1, 1.0, True, 2, 2.0, 0.0, -0.0, math.nan)


@dataclass(frozen=True)
class Value:
    """A value while generating: its shape, and whether it is contiguous (``view`` needs it)."""

    shape: Shape
    contiguous: bool = True
    storage: int = -1  # index of the value that owns the memory (set by the generator)


@dataclass(frozen=True)
class OpKind:
    """One vocabulary entry.

    ``fits(values)`` says whether a prefix of candidate inputs is acceptable; ``params`` maps
    the chosen inputs and the allowed scalar constants to a strategy of parameters; ``emit``
    adds the node(s) and returns the value node; ``result`` gives the output's :class:`Value`.
    """

    name: str
    family: str
    arity: int
    fits: Callable[[list[Value]], bool]
    emit: Callable[[fx.Graph, list[fx.Node], tuple], fx.Node]
    result: Callable[[list[Value], tuple], Value]
    params: Callable[[list[Value], tuple], st.SearchStrategy] = (
        lambda vs, consts: st.just(()))


def _call(target, n_args: int = 0) -> Callable[[fx.Graph, list[fx.Node], tuple], fx.Node]:
    """Emit ``target(*nodes, *params[:n_args], **dict(params[n_args:]))``; a tuple among
    the positional params (kept hashable in the spec) becomes a list, as aten expects."""
    def emit(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
        args = [list(p) if isinstance(p, tuple) else p for p in params[:n_args]]
        return graph.call_function(target, (*nodes, *args), dict(params[n_args:]))
    return emit


def _broadcast(a: Shape, b: Shape) -> Shape | None:
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def _same(vs: list[Value], _p=()) -> Value:
    return Value(vs[0].shape, all(v.contiguous for v in vs))


def _binary_fits(vs: list[Value]) -> bool:
    return len(vs) < 2 or _broadcast(vs[0].shape, vs[1].shape) is not None


def _binary_result(vs: list[Value], _p=()) -> Value:
    return Value(_broadcast(vs[0].shape, vs[1].shape), all(v.contiguous for v in vs))


def _inplace_fits(vs: list[Value]) -> bool:
    """The written value keeps its shape and does not overlap what it reads."""
    return len(vs) < 2 or (_broadcast(vs[0].shape, vs[1].shape) == vs[0].shape
                           and vs[0].storage != vs[1].storage)


def _any(vs: list[Value]) -> bool:
    return True


def _small(vs: list[Value]) -> bool:
    return math.prod(vs[0].shape) <= 64 and (len(vs) < 2 or vs[1].shape == vs[0].shape)


def _kwargs_in_either_order(*pairs: tuple[str, st.SearchStrategy]) -> st.SearchStrategy:
    """kwargs as a tuple of (name, value) pairs, in a drawn order."""
    items = st.tuples(*(st.tuples(st.just(k), s) for k, s in pairs))
    return st.tuples(items, st.booleans()).map(lambda t: t[0][::-1] if t[1] else t[0])


def _dim(vs: list[Value], extra: int = 0) -> st.SearchStrategy:
    return st.integers(0, len(vs[0].shape) - 1 + extra)


def _reduce_result(vs: list[Value], p: tuple) -> Value:
    dims, kwargs = p[0], dict(p[1:])
    shape = [1 if i in dims else s for i, s in enumerate(vs[0].shape)]
    if not kwargs["keepdim"]:
        shape = [s for i, s in enumerate(shape) if i not in dims]
    return Value(tuple(shape), vs[0].contiguous)


def _reduction(name: str, target) -> OpKind:
    return OpKind(
        name, "reduction", 1, lambda vs: len(vs[0].shape) >= 1,
        lambda g, ns, p: g.call_function(target, (ns[0], list(p[0])), dict(p[1:])),
        _reduce_result,
        lambda vs, consts: st.tuples(_dim(vs).map(lambda d: (d,)), st.booleans()).flatmap(
            lambda t: _kwargs_in_either_order(("keepdim", st.just(t[1])),
                                              ("dtype", st.just(None))).map(
                lambda kw: (t[0], *kw))))


def _view_result(fn: Callable[[Shape, tuple], Shape], contiguous: bool):
    return lambda vs, p: Value(fn(vs[0].shape, p), contiguous and vs[0].contiguous)


def _swap(shape: Shape, d0: int, d1: int) -> Shape:
    s = list(shape)
    s[d0], s[d1] = s[d1], s[d0]
    return tuple(s)


def _emit_dropout(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
    pair = graph.call_function(aten.native_dropout.default, (nodes[0], 0.5, True))
    return graph.call_function(operator.getitem, (pair, 0))


def _emit_list(target):
    return lambda g, ns, p: g.call_function(target, (list(ns), p[0]))


def _unary(name, target, family="unary") -> OpKind:
    return OpKind(name, family, 1, _any, _call(target), _same)


def _binary(name, target) -> OpKind:
    return OpKind(name, "binary", 2, _binary_fits, _call(target), _binary_result)


_KINDS = [
    _unary("clone", aten.clone.default), _unary("cos", aten.cos.default),
    _unary("tanh", aten.tanh.default), _unary("gelu", aten.gelu.default),
    _unary("neg", aten.neg.default), _unary("relu", aten.relu.default),
    _binary("add", aten.add.Tensor), _binary("mul", aten.mul.Tensor),
    _binary("sub", aten.sub.Tensor), _binary("maximum", aten.maximum.default),
    OpKind("add_scalar", "constant", 1, _any, _call(aten.add.Tensor, 1), _same,
           lambda vs, consts: st.sampled_from(consts).map(lambda c: (c,))),
    OpKind("mul_scalar", "constant", 1, _any, _call(aten.mul.Tensor, 1), _same,
           lambda vs, consts: st.sampled_from(consts).map(lambda c: (c,))),
    OpKind("clamp", "constant", 1, _any, _call(aten.clamp.default), _same,
           lambda vs, consts: _kwargs_in_either_order(("min", st.sampled_from((-1, -1.0, 0.0))),
                                              ("max", st.sampled_from((1, 1.0, True))))),
    _reduction("sum", aten.sum.dim_IntList), _reduction("mean", aten.mean.dim),
    OpKind("t", "view", 1, lambda vs: len(vs[0].shape) == 2, _call(aten.t.default),
           _view_result(lambda s, p: s[::-1], False)),
    OpKind("transpose", "view", 1, lambda vs: len(vs[0].shape) >= 2,
           _call(aten.transpose.int, 2), _view_result(lambda s, p: _swap(s, *p), False),
           lambda vs, consts: st.tuples(_dim(vs), _dim(vs))),
    OpKind("unsqueeze", "view", 1, lambda vs: len(vs[0].shape) <= 3,
           _call(aten.unsqueeze.default, 1),
           _view_result(lambda s, p: (*s[:p[0]], 1, *s[p[0]:]), True),
           lambda vs, consts: _dim(vs, extra=1).map(lambda d: (d,))),
    OpKind("select", "view", 1, lambda vs: len(vs[0].shape) >= 2,
           _call(aten.select.int, 2),
           _view_result(lambda s, p: s[:p[0]] + s[p[0] + 1:], False),
           lambda vs, consts: _dim(vs).map(lambda d: (d, 0))),
    OpKind("slice", "view", 1, lambda vs: len(vs[0].shape) >= 1,
           _call(aten.slice.Tensor, 4),
           _view_result(lambda s, p: (*s[:p[0]], min(p[2], s[p[0]]), *s[p[0] + 1:]), False),
           lambda vs, consts: _dim(vs).map(lambda d: (d, 0, 2, 1))),
    OpKind("flatten_view", "view", 1, lambda vs: vs[0].contiguous,
           _call(aten.view.default, 1), _view_result(lambda s, p: (math.prod(s),), True),
           lambda vs, consts: st.just(((-1,),))),
    OpKind("reshape", "view", 1, lambda vs: vs[0].contiguous and len(vs[0].shape) >= 2,
           _call(aten.reshape.default, 1),
           _view_result(lambda s, p: (s[0] * s[1], *s[2:]), True),
           lambda vs, consts: st.just(((vs[0].shape[0] * vs[0].shape[1], *vs[0].shape[2:]),))),
    OpKind("cat", "list", 2, _small, _emit_list(aten.cat.default),
           lambda vs, p: Value(tuple(2 * s if i == p[0] else s
                                     for i, s in enumerate(vs[0].shape))),
           lambda vs, consts: _dim(vs).map(lambda d: (d,))),
    OpKind("stack", "list", 2, lambda vs: _small(vs) and len(vs[0].shape) <= 2,
           _emit_list(aten.stack.default),
           lambda vs, p: Value((*vs[0].shape[:p[0]], 2, *vs[0].shape[p[0]:])),
           lambda vs, consts: _dim(vs, extra=1).map(lambda d: (d,))),
    OpKind("mm", "matmul", 2,
           lambda vs: len(vs[-1].shape) == 2 and (
               len(vs) < 2 or vs[1].shape[0] == vs[0].shape[1]),
           _call(aten.mm.default), lambda vs, p: Value((vs[0].shape[0], vs[1].shape[1]))),
    OpKind("bmm", "matmul", 2,
           lambda vs: len(vs[-1].shape) == 3 and (
               len(vs) < 2 or vs[1].shape[:2] == (vs[0].shape[0], vs[0].shape[2])),
           _call(aten.bmm.default),
           lambda vs, p: Value((*vs[0].shape[:2], vs[1].shape[2]))),
    OpKind("add_", "inplace", 2, _inplace_fits, _call(aten.add_.Tensor), _same),
    OpKind("mul_", "inplace", 1, _any, _call(aten.mul_.Tensor, 1), _same,
           lambda vs, consts: st.sampled_from((2, 2.0, 0.5)).map(lambda c: (c,))),
    OpKind("relu_", "inplace", 1, _any, _call(aten.relu_.default), _same),
    OpKind("rand_like", "random", 1, _any, _call(aten.rand_like.default), _same),
    OpKind("randn_like", "random", 1, _any, _call(aten.randn_like.default), _same),
    OpKind("bernoulli", "random", 1, _any, _call(aten.bernoulli.p, 1), _same,
           lambda vs, consts: st.just((0.5,))),
    OpKind("native_dropout", "random", 1, _any, _emit_dropout, _same),
]
#: vocabulary name -> entry. Extend by adding an OpKind (its family switches it on and off).
VOCABULARY: dict[str, OpKind] = {k.name: k for k in _KINDS}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(k.family for k in _KINDS))


@dataclass(frozen=True)
class NodeSpec:
    """One op: its vocabulary name, the earlier values it reads, its constants."""

    op: str
    inputs: tuple[int, ...]
    params: tuple = ()


@dataclass(frozen=True)
class GraphSpec:
    """A generated graph as plain data (see the module docstring)."""

    num_inputs: int
    side: int
    nodes: tuple[NodeSpec, ...]
    outputs: tuple[int, ...]

    def build(self) -> fx.GraphModule:
        """The aten graph: placeholders x0.., one op per NodeSpec, a tuple output."""
        graph = fx.Graph()
        values = [graph.placeholder(f"x{i}") for i in range(self.num_inputs)]
        for spec in self.nodes:
            kind = VOCABULARY[spec.op]
            values.append(kind.emit(graph, [values[i] for i in spec.inputs], spec.params))
        graph.output(tuple(values[i] for i in self.outputs))
        return fx.GraphModule(torch.nn.Module(), graph)

    def example_inputs(self, seed: int = 0) -> list[torch.Tensor]:
        """Fresh inputs (in-place ops may write them); entry [0, 0] of each is -0.0."""
        gen = torch.Generator().manual_seed(seed)
        inputs = [torch.randn(self.side, self.side, generator=gen)
                  for _ in range(self.num_inputs)]
        for x in inputs:
            x[0, 0] = -0.0
        return inputs

    def count(self, family: str) -> int:
        return sum(VOCABULARY[n.op].family == family for n in self.nodes)

    def __str__(self) -> str:
        lines = [f"GraphSpec(num_inputs={self.num_inputs}, side={self.side}, outputs="
                 f"{self.outputs}, nodes=("]
        lines += [f"    {n!r},  # v{self.num_inputs + i}" for i, n in enumerate(self.nodes)]
        return "\n".join([*lines, "))"])


def annotate(gm: fx.GraphModule, inputs: list[torch.Tensor]) -> fx.GraphModule:
    """Run ``gm`` on ``inputs`` and store each node's result in ``node.meta["val"]`` (what
    make_fx records, and what torch's CSE reads to protect outputs); returns ``gm``."""
    class Recorder(fx.Interpreter):
        def run_node(self, node: fx.Node):
            result = super().run_node(node)
            node.meta["val"] = result
            return result

    Recorder(gm).run(*inputs)
    return gm


@dataclass(frozen=True)
class GraphOptions:
    """What ``op_graphs`` may generate.

    ``families``: the vocabulary families to draw from (each may still be switched off per
    graph, swarm style); ``max_nodes``: ops per graph; ``max_inputs``: placeholders;
    ``side``: every input is ``(side, side)``; ``duplicates``: allow deliberate repeats;
    ``exclude``: vocabulary names never to use; ``constants``: the scalar constants to use.
    """

    families: tuple[str, ...] = FAMILIES
    max_nodes: int = 20
    max_inputs: int = 3
    side: int = 3
    duplicates: bool = True
    exclude: frozenset[str] = field(default_factory=frozenset)
    constants: tuple = CONSTANTS

    def __post_init__(self) -> None:
        unknown = set(self.families) - set(FAMILIES)
        if unknown or not self.families:
            raise ValueError(f"families={self.families!r}: each must be one of {FAMILIES}")
        if set(self.exclude) - set(VOCABULARY):
            raise ValueError(f"exclude={sorted(self.exclude)!r}: each must be one of "
                             f"{sorted(VOCABULARY)}")
        if not self.constants or not all(type(c) in (bool, int, float)
                                         for c in self.constants):
            raise ValueError(f"constants={self.constants!r}: a non-empty tuple of bool, int "
                             "or float")
        for name, low in (("max_nodes", 1), ("max_inputs", 1), ("side", 2)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= {low}")


def _candidates(kind: OpKind, values: list[Value], chosen: list[Value]) -> list[int]:
    """Indices of values that may be the next input of ``kind`` after ``chosen``; for the
    first input of a binary op, only those with at least one fitting partner."""
    ok = [i for i, v in enumerate(values) if kind.fits([*chosen, v])]
    if kind.arity == 2 and not chosen:
        ok = [i for i in ok if any(kind.fits([values[i], w]) for w in values)]
    return ok


def _draw_node(draw, kinds: list[OpKind], values: list[Value],
               constants: tuple) -> tuple[NodeSpec, Value]:
    applicable = [k for k in kinds if _candidates(k, values, [])]
    kind = draw(st.sampled_from(applicable or [VOCABULARY["clone"]]))
    inputs: list[int] = []
    for _ in range(kind.arity):
        options = _candidates(kind, values, [values[i] for i in inputs])
        inputs.append(draw(st.sampled_from(options)))
    chosen = [values[i] for i in inputs]
    params = draw(kind.params(chosen, constants))
    result = kind.result(chosen, params)
    storage = chosen[0].storage if kind.family in ("view", "inplace") else len(values)
    return NodeSpec(kind.name, tuple(inputs), params), replace(result, storage=storage)


def _repeat(draw, nodes: list[NodeSpec], values: list[Value],
            num_inputs: int) -> tuple[NodeSpec, Value]:
    """A deliberate duplicate of an earlier node; kwargs pairs maybe in the other order."""
    i = draw(st.integers(0, len(nodes) - 1))
    spec, result = nodes[i], values[num_inputs + i]
    if result.storage == num_inputs + i:  # a fresh value: the repeat owns new memory
        result = replace(result, storage=len(values))
    pairs = [p for p in spec.params if isinstance(p, tuple) and len(p) == 2
             and isinstance(p[0], str)]
    if len(pairs) >= 2 and draw(st.booleans()):
        plain = tuple(p for p in spec.params if p not in pairs)
        spec = NodeSpec(spec.op, spec.inputs, plain + tuple(reversed(pairs)))
    return spec, result


@st.composite
def op_graphs(draw, options: GraphOptions | None = None, **overrides) -> GraphSpec:
    """Random acyclic aten graphs as :class:`GraphSpec` (module docstring; options in
    :class:`GraphOptions`, given whole or as keyword overrides)."""
    options = GraphOptions(**overrides) if options is None else options
    off = draw(st.frozensets(st.sampled_from(options.families)))
    families = [f for f in options.families if f not in off] or list(options.families)
    kinds = [k for k in _KINDS if k.family in families and k.name not in options.exclude]
    kinds = kinds or [VOCABULARY["clone"]]
    num_inputs = draw(st.integers(1, options.max_inputs))
    values = [Value((options.side, options.side), storage=i) for i in range(num_inputs)]
    nodes: list[NodeSpec] = []
    for _ in range(draw(st.integers(1, options.max_nodes))):
        if options.duplicates and nodes and draw(st.integers(0, 3)) == 3:
            spec, result = _repeat(draw, nodes, values, num_inputs)
        else:
            spec, result = _draw_node(draw, kinds, values, options.constants)
        nodes.append(spec)
        values.append(result)
    computed = range(num_inputs, len(values))
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    return GraphSpec(num_inputs, options.side, tuple(nodes), tuple(outputs))
