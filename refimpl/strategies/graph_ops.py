"""The op vocabulary of ``op_graphs``: one :class:`OpKind` per op, in two dialects.

Each entry says which values it may read (``fits``), what constants it draws (``params``),
the shape of its result (``result``), and how to emit it as a graph node in each dialect:

* ``emit``: make_fx's dialect, aten ``OpOverload`` calls (``aten.add.Tensor``);
* ``emit_torch``: ``torch.fx.symbolic_trace``'s dialect, what tracing Python code records:
  ``call_method`` (``x.uniform_()``), ``call_function`` on torch functions (``torch.cos``,
  ``F.relu(x, True)``) and on ``operator`` (``x + y``, ``x[:, 0:2]``).

The families are the effect classes CSE must tell apart: pure (``unary``, ``binary``,
``constant``, ``reduction``, ``list``, ``matmul``), fresh tensors from a constant
(``factory``: ``full((1, 1), c)``, whose dtype is the constant's type: int64, float32 or
bool), views (``view``), in-place writes (``inplace``), random draws (``random``), in-place
random draws (``inplace_random``) and effectful calls that return nothing (``effect``:
``aten._print`` in make_fx's dialect, ``torch._assert`` in symbolic_trace's).

Each value has a dtype (:class:`Value`): float32 inputs, float64 from a reduction's
``dtype=`` keyword, int64 and bool from ``full``. Entries marked ``any_dtype`` read values of
every dtype, the rest only floating ones (:func:`accepts`; a matmul's two of one dtype).
An entry's ``kwarg_options`` lists the keyword values a near-duplicate may swap in:
``gelu(x)`` then ``gelu(x, approximate="tanh")``, ``sum(x, [0], dtype=torch.float64)`` then
``dtype=torch.float32``.
The constants include the ones whose hashes collide (``1``, ``1.0``, ``True``; ``0.0``,
``-0.0``) and those ``==`` gets wrong for CSE (``nan`` and ``-nan``: different bits), and
``inf``; :data:`HASH_TWINS` holds the ints whose hashes collide (-1, -2), used as a dim or a
constant. Extend the vocabulary by adding an OpKind to ``_KINDS``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import fx

aten = torch.ops.aten
Shape = tuple[int, ...]
Emit = Callable[[fx.Graph, list[fx.Node], tuple], fx.Node]

#: constants whose hashes collide (1, 1.0, True; 0, 0.0, -0.0), that break ``==`` (NaN, and
#: NaN with its sign bit set, which ``==``-based keys cannot tell apart), and infinities.
CONSTANTS: tuple = (1, 1.0, True, 2, 2.0, 0.0, -0.0, math.nan, -math.nan, math.inf,
                    -math.inf)
#: ints CPython hashes alike (``hash(-1) == hash(-2)``: -1 is the C error value), as a dim
#: or a constant: a key compared by hash alone merges ``sum(x, [-1])`` and ``sum(x, [-2])``.
HASH_TWINS: tuple[tuple[int, int], ...] = ((-1, -2),)
#: families whose nodes are never merged (random draws, in-place writes, effectful calls).
NEVER_MERGED_FAMILIES = ("random", "inplace", "inplace_random", "effect")
FLOATING = (torch.float32, torch.float64)


@dataclass(frozen=True)
class Value:
    """A value while generating: its shape, whether it is contiguous (``view`` needs it), its
    dtype (None: not a tensor, what an effectful call returns)."""

    shape: Shape
    contiguous: bool = True
    storage: int = -1  # index of the value that owns the memory (set by the generator)
    dtype: torch.dtype | None = torch.float32


def _promoted(vs: list[Value], _p=()) -> torch.dtype:
    """The dtype of an op on ``vs`` by torch's type promotion (scalars do not promote)."""
    dtype = vs[0].dtype
    for v in vs[1:]:
        dtype = torch.promote_types(dtype, v.dtype)
    return dtype


@dataclass(frozen=True)
class OpKind:
    """One vocabulary entry (see the module docstring).

    ``fits(values)`` says whether a prefix of candidate inputs is acceptable; ``params`` maps
    the chosen inputs and the allowed scalar constants to a strategy of parameters; ``emit``
    and ``emit_torch`` add the node(s) and return the value node; ``result`` gives the
    output's shape and contiguity, ``dtype`` its dtype; ``any_dtype``: it reads values of
    every dtype, not only floating ones; ``kwarg_options``: (keyword, values) pairs a
    near-duplicate may set (module docstring).
    """

    name: str
    family: str
    arity: int
    fits: Callable[[list[Value]], bool]
    emit: Emit
    emit_torch: Emit
    result: Callable[[list[Value], tuple], Value]
    params: Callable[[list[Value], tuple], st.SearchStrategy] = (
        lambda vs, consts: st.just(()))
    dtype: Callable[[list[Value], tuple], torch.dtype | None] = _promoted
    any_dtype: bool = False
    kwarg_options: tuple[tuple[str, tuple], ...] = ()


def accepts(kind: OpKind, value: Value) -> bool:
    """May ``kind`` read ``value``? Never a non-tensor; a non-floating one only if the entry
    reads every dtype."""
    return value.dtype is not None and (kind.any_dtype or value.dtype in FLOATING)


def _split(params: tuple, n_args: int) -> tuple[list, dict]:
    """``params[:n_args]`` positional (a tuple, kept hashable in the spec, becomes a list as
    aten expects), the rest ``(name, value)`` pairs of kwargs."""
    args = [list(p) if isinstance(p, tuple) else p for p in params[:n_args]]
    return args, dict(params[n_args:])


def _call(target, n_args: int = 0) -> Emit:
    """Emit ``target(*nodes, *params[:n_args], **dict(params[n_args:]))``."""
    def emit(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
        args, kwargs = _split(params, n_args)
        return graph.call_function(target, (*nodes, *args), kwargs)
    return emit


def _method(name: str, n_args: int = 0) -> Emit:
    """Emit ``nodes[0].name(*nodes[1:], *params[:n_args], **kwargs)`` (a call_method)."""
    def emit(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
        args, kwargs = _split(params, n_args)
        return graph.call_method(name, (*nodes, *args), kwargs)
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


def _constant(vs: list[Value], consts: tuple) -> st.SearchStrategy:
    return st.sampled_from(consts).map(lambda c: (c,))


#: a reduction's ``dtype=`` keyword: the input's dtype, or either floating dtype.
REDUCTION_DTYPES = (None, torch.float64, torch.float32)


def _reduce_dtype(vs: list[Value], p: tuple) -> torch.dtype:
    return dict(p[1:])["dtype"] or vs[0].dtype


def _reduce_result(vs: list[Value], p: tuple) -> Value:
    kwargs = dict(p[1:])
    dims = [d % len(vs[0].shape) for d in p[0]]  # a negative dim counts from the end
    shape = [1 if i in dims else s for i, s in enumerate(vs[0].shape)]
    if not kwargs["keepdim"]:
        shape = [s for i, s in enumerate(shape) if i not in dims]
    return Value(tuple(shape), vs[0].contiguous)


def _reduction(name: str, target, emit_torch: Emit) -> OpKind:
    return OpKind(
        name, "reduction", 1, lambda vs: len(vs[0].shape) >= 1, _call(target, 1), emit_torch,
        _reduce_result,
        lambda vs, consts: st.tuples(_dim(vs).map(lambda d: (d,)), st.booleans()).flatmap(
            lambda t: _kwargs_in_either_order(("keepdim", st.just(t[1])),
                                              ("dtype", st.sampled_from(REDUCTION_DTYPES))).map(
                lambda kw: (t[0], *kw))),
        dtype=_reduce_dtype,
        kwarg_options=(("dtype", REDUCTION_DTYPES), ("keepdim", (False, True))))


def _view_result(fn: Callable[[Shape, tuple], Shape], contiguous: bool):
    return lambda vs, p: Value(fn(vs[0].shape, p), contiguous and vs[0].contiguous)


def _swap(shape: Shape, d0: int, d1: int) -> Shape:
    s = list(shape)
    s[d0], s[d1] = s[d1], s[d0]
    return tuple(s)


def _emit_dropout(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
    pair = graph.call_function(aten.native_dropout.default, (nodes[0], 0.5, True))
    return graph.call_function(operator.getitem, (pair, 0))


def _emit_slice_torch(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
    """``x[:, ..., start:stop:step]`` as symbolic_trace records it: getitem of slices."""
    dim, start, stop, step = params
    index = (*([slice(None)] * dim), slice(start, stop, step))
    return graph.call_function(operator.getitem, (nodes[0], index))


def _emit_scale_by_size_torch(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
    """``x * float(x.size(0))`` as dynamo-style tracing records it: a ``size`` call, the
    Python-number function ``torch.sym_float`` on its result, an ``operator.mul``."""
    size = graph.call_method("size", (nodes[0], 0))
    scale = graph.call_function(torch.sym_float, (size,))
    return graph.call_function(operator.mul, (nodes[0], scale))


def _emit_scale_by_size_symbolic(graph: fx.Graph, nodes: list[fx.Node],
                                 params: tuple) -> fx.Node:
    """``x * x.size(0)`` as make_fx's ``tracing_mode="symbolic"`` records it: the size is a
    node (``aten.sym_size.int``, a SymInt), read by the ``mul``."""
    size = graph.call_function(aten.sym_size.int, (nodes[0], 0))
    return graph.call_function(aten.mul.Tensor, (nodes[0], size))


def _emit_effect_torch(graph: fx.Graph, nodes: list[fx.Node], params: tuple) -> fx.Node:
    """``torch._assert(True, message)``: the call symbolic_trace records for an assert on a
    traced condition (here a constant one, so that it always holds)."""
    return graph.call_function(torch._assert, (True, *params))


def _full_dtype(vs: list[Value], p: tuple) -> torch.dtype:
    """``full``'s dtype is inferred from its fill value: bool, int64 or the default float."""
    return {bool: torch.bool, int: torch.int64}.get(type(p[1]), torch.float32)


def _emit_list(target) -> Emit:
    return lambda g, ns, p: g.call_function(target, (list(ns), p[0]))


def _unary(name, target, emit_torch: Emit, any_dtype=False) -> OpKind:
    return OpKind(name, "unary", 1, _any, _call(target), emit_torch, _same,
                  any_dtype=any_dtype)


def _binary(name, target, emit_torch: Emit, any_dtype=False) -> OpKind:
    return OpKind(name, "binary", 2, _binary_fits, _call(target), emit_torch, _binary_result,
                  any_dtype=any_dtype)


#: F.relu's ``inplace`` keyword left out or given a false constant: never a write
RELU_NOT_INPLACE = ((), (("inplace", False),), (("inplace", 0),), (("inplace", None),))
#: gelu's ``approximate`` keyword: left out (its default, ``"none"``) or given.
GELU_APPROXIMATE = ("none", "tanh")


def _inplace_random(name, target, emit_torch: Emit, params=()) -> OpKind:
    return OpKind(name, "inplace_random", 1, _any, _call(target, len(params)), emit_torch,
                  _same, lambda vs, consts: st.just(params))


_PURE = [
    _unary("clone", aten.clone.default, _method("clone"), any_dtype=True),
    _unary("cos", aten.cos.default, _call(torch.cos)),
    _unary("tanh", aten.tanh.default, _method("tanh")),
    OpKind("gelu", "unary", 1, _any, _call(aten.gelu.default), _call(F.gelu), _same,
           lambda vs, consts: st.sampled_from(GELU_APPROXIMATE).map(
               lambda a: (("approximate", a),)) | st.just(()),
           kwarg_options=(("approximate", GELU_APPROXIMATE),)),
    _unary("neg", aten.neg.default, _call(operator.neg)),
    _unary("relu", aten.relu.default, _call(torch.relu)),
    # F.relu is a Python function whose ``inplace`` parameter defaults to False: not a write,
    # left out or given a false constant of any type (False, 0, None: ``if inplace:``)
    OpKind("relu_fn", "unary", 1, _any,
           lambda g, ns, p: g.call_function(aten.relu.default, (ns[0],)), _call(F.relu), _same,
           lambda vs, consts: st.sampled_from(RELU_NOT_INPLACE)),
    # make_fx records the size as a constant (a SymInt node when it traces symbolically:
    # SYMBOLIC_EMITS); symbolic_trace a size call and sym_float
    OpKind("scale_by_size", "unary", 1, _any, _call(aten.mul.Tensor, 1),
           _emit_scale_by_size_torch, _same,
           lambda vs, consts: st.just((float(vs[0].shape[0]),))),
    _binary("add", aten.add.Tensor, _call(operator.add), any_dtype=True),
    _binary("mul", aten.mul.Tensor, _method("mul"), any_dtype=True),
    _binary("sub", aten.sub.Tensor, _call(torch.sub)),
    _binary("maximum", aten.maximum.default, _call(torch.maximum)),
    OpKind("add_scalar", "constant", 1, _any, _call(aten.add.Tensor, 1),
           _call(operator.add, 1), _same, _constant),
    OpKind("mul_scalar", "constant", 1, _any, _call(aten.mul.Tensor, 1), _method("mul", 1),
           _same, _constant),
    OpKind("full_like", "constant", 1, _any, _call(aten.full_like.default, 1),
           _call(torch.full_like, 1), _same, _constant),
    OpKind("clamp", "constant", 1, _any, _call(aten.clamp.default), _method("clamp"), _same,
           lambda vs, consts: _kwargs_in_either_order(("min", st.sampled_from((-1, -1.0, 0.0))),
                                                      ("max", st.sampled_from((1, 1.0, True))))),
    _reduction("sum", aten.sum.dim_IntList, _method("sum", 1)),
    _reduction("mean", aten.mean.dim, _call(torch.mean, 1)),
    OpKind("cat", "list", 2, lambda vs: _small(vs) and len(vs[0].shape) >= 1,
           _emit_list(aten.cat.default), _emit_list(torch.cat),
           lambda vs, p: Value(tuple(2 * s if i == p[0] else s
                                     for i, s in enumerate(vs[0].shape))),
           lambda vs, consts: _dim(vs).map(lambda d: (d,)), any_dtype=True),
    OpKind("stack", "list", 2, lambda vs: _small(vs) and len(vs[0].shape) <= 2,
           _emit_list(aten.stack.default), _emit_list(torch.stack),
           lambda vs, p: Value((*vs[0].shape[:p[0]], 2, *vs[0].shape[p[0]:])),
           lambda vs, consts: _dim(vs, extra=1).map(lambda d: (d,)), any_dtype=True),
    OpKind("mm", "matmul", 2,
           lambda vs: len(vs[-1].shape) == 2 and (
               len(vs) < 2 or (vs[1].shape[0] == vs[0].shape[1]
                               and vs[1].dtype == vs[0].dtype)),
           _call(aten.mm.default), _call(torch.mm),
           lambda vs, p: Value((vs[0].shape[0], vs[1].shape[1]))),
    OpKind("bmm", "matmul", 2,
           lambda vs: len(vs[-1].shape) == 3 and (
               len(vs) < 2 or (vs[1].shape[:2] == (vs[0].shape[0], vs[0].shape[2])
                               and vs[1].dtype == vs[0].dtype)),
           _call(aten.bmm.default), _method("bmm"),
           lambda vs, p: Value((*vs[0].shape[:2], vs[1].shape[2]))),
    # a fresh tensor from a constant (dtype by its type); in-place writes may target it
    OpKind("full", "factory", 0, _any, _call(aten.full.default, 2), _call(torch.full, 2),
           lambda vs, p: Value(p[0]),
           lambda vs, consts: _constant(vs, consts).map(lambda c: ((1, 1), *c)),
           dtype=_full_dtype),
]
_VIEWS = [
    OpKind("t", "view", 1, lambda vs: len(vs[0].shape) == 2, _call(aten.t.default),
           _method("t"), _view_result(lambda s, p: s[::-1], False)),
    OpKind("transpose", "view", 1, lambda vs: len(vs[0].shape) >= 2,
           _call(aten.transpose.int, 2), _call(torch.transpose, 2),
           _view_result(lambda s, p: _swap(s, *p), False),
           lambda vs, consts: st.tuples(_dim(vs), _dim(vs))),
    OpKind("unsqueeze", "view", 1, lambda vs: len(vs[0].shape) <= 3,
           _call(aten.unsqueeze.default, 1), _method("unsqueeze", 1),
           _view_result(lambda s, p: (*s[:p[0]], 1, *s[p[0]:]), True),
           lambda vs, consts: _dim(vs, extra=1).map(lambda d: (d,))),
    OpKind("select", "view", 1, lambda vs: len(vs[0].shape) >= 2,
           _call(aten.select.int, 2), _method("select", 2),
           _view_result(lambda s, p: s[:p[0]] + s[p[0] + 1:], False),
           lambda vs, consts: _dim(vs).map(lambda d: (d, 0))),
    OpKind("slice", "view", 1, lambda vs: len(vs[0].shape) >= 1,
           _call(aten.slice.Tensor, 4), _emit_slice_torch,
           _view_result(lambda s, p: (*s[:p[0]], min(p[2], s[p[0]]), *s[p[0] + 1:]), False),
           lambda vs, consts: _dim(vs).map(lambda d: (d, 0, 2, 1))),
    OpKind("flatten_view", "view", 1, lambda vs: vs[0].contiguous,
           _call(aten.view.default, 1), _method("view", 1),
           _view_result(lambda s, p: (math.prod(s),), True),
           lambda vs, consts: st.just(((-1,),))),
    OpKind("reshape", "view", 1, lambda vs: vs[0].contiguous and len(vs[0].shape) >= 2,
           _call(aten.reshape.default, 1), _call(torch.reshape, 1),
           _view_result(lambda s, p: (s[0] * s[1], *s[2:]), True),
           lambda vs, consts: st.just(((vs[0].shape[0] * vs[0].shape[1], *vs[0].shape[2:]),))),
]
_EFFECTS = [
    OpKind("add_", "inplace", 2, _inplace_fits, _call(aten.add_.Tensor), _method("add_"),
           _same),
    OpKind("mul_", "inplace", 1, _any, _call(aten.mul_.Tensor, 1), _method("mul_", 1), _same,
           lambda vs, consts: st.sampled_from((2, 2.0, 0.5)).map(lambda c: (c,))),
    OpKind("relu_", "inplace", 1, _any, lambda g, ns, p: g.call_function(aten.relu_.default,
                                                                           (ns[0],)),
           _call(F.relu, 1), _same,
           lambda vs, consts: st.just((True,))),  # F.relu(x, True): in place by position
    OpKind("rand_like", "random", 1, _any, _call(aten.rand_like.default),
           _call(torch.rand_like), _same),
    OpKind("randn_like", "random", 1, _any, _call(aten.randn_like.default),
           _call(torch.randn_like), _same),
    OpKind("randint_like", "random", 1, _any, _call(aten.randint_like.default, 1),
           _call(torch.randint_like, 1), _same, lambda vs, consts: st.just((4,))),
    OpKind("bernoulli", "random", 1, _any, _call(aten.bernoulli.p, 1), _call(torch.bernoulli, 1),
           _same, lambda vs, consts: st.just((0.5,))),
    OpKind("native_dropout", "random", 1, _any, _emit_dropout, _call(F.dropout, 2), _same,
           lambda vs, consts: st.just((0.5, True))),
    _inplace_random("uniform_", aten.uniform_.default, _method("uniform_")),
    _inplace_random("normal_", aten.normal_.default, _method("normal_")),
    _inplace_random("bernoulli_", aten.bernoulli_.float, _method("bernoulli_", 1), (0.5,)),
    _inplace_random("exponential_", aten.exponential_.default, _method("exponential_")),
    _inplace_random("random_", aten.random_.to, _method("random_", 1), (4,)),
    # a Python function outside torch's op namespaces (no schema to read): opaque
    _inplace_random("init_uniform_", aten.uniform_.default, _call(torch.nn.init.uniform_)),
]
_VIEWS = [replace(kind, any_dtype=True) for kind in _VIEWS]
_EFFECTS += [
    # returns nothing, prints: never merged, never read
    OpKind("print", "effect", 0, _any, _call(aten._print.default, 1), _emit_effect_torch,
           lambda vs, p: Value(()), lambda vs, consts: st.just(("refimpl op_graphs effect",)),
           dtype=lambda vs, p: None),
]
_KINDS = [*_PURE, *_VIEWS, *_EFFECTS]
#: vocabulary name -> entry. Extend by adding an OpKind (its family switches it on and off).
VOCABULARY: dict[str, OpKind] = {k.name: k for k in _KINDS}
#: the entries that make_fx's symbolic tracing records otherwise than its static tracing
#: (a size read as a SymInt node, not a constant): vocabulary name -> its emit there.
SYMBOLIC_EMITS: dict[str, Emit] = {"scale_by_size": _emit_scale_by_size_symbolic}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(k.family for k in _KINDS))
