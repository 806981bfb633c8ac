"""Random FX op graphs (``op_graphs``): plain-data specs that build make_fx-style (aten, with
static or symbolic sizes) or symbolic_trace-style (torch functions, Tensor methods,
``operator``) graphs.

A :class:`GraphSpec` is plain data: the dialect (``style``: ``"aten"``, ``"symbolic"`` or
``"torch"``), the
number of inputs, one :class:`NodeSpec` per op (its vocabulary name, the indices of the
earlier values it reads, its constant parameters), and the output indices.
``spec.build()`` makes the ``fx.GraphModule`` (each node's vocabulary family in
``node.meta["op_graphs_family"]``); ``spec.traced()`` adds what the dialect's tracer records
(make_fx: ``meta["val"]``, fake tensors whose sizes are symbols in the ``"symbolic"``
dialect, where a size an op reads is an ``aten.sym_size.int`` node);
``spec.example_inputs()`` makes fresh inputs; ``str(spec)``
prints a listing that rebuilds it, for a reproducer.

Generation: values are numbered; the inputs are ``(side, side)`` float tensors; each new node
draws its op from the enabled, applicable vocabulary entries and its inputs only from earlier
values whose shapes fit, so every graph is acyclic and runs. Each node may instead repeat an
earlier node (a deliberate duplicate, with its kwargs possibly in the other order, possibly
reading the repeats of its inputs instead: ``x.clone().uniform_()`` written twice; or a
near-duplicate whose constant is swapped for a lookalike: ``x + 0.0`` then ``x + -0.0``,
``full((1, 1), 1)`` then ``full((1, 1), True)``, ``sum(x, [-1])`` then ``sum(x, [-2])`` (ints
of one hash); or one keyword argument set to another of the entry's ``kwarg_options``:
``gelu(x)`` then ``gelu(x, approximate="tanh")``). The outputs
are one to three computed tensors, and in about half the graphs that hold a repeat, a value
and its repeat both (returned duplicates: two tensors to the caller).
Swarm testing: each family may be switched off for a whole graph; the switches shrink towards
everything enabled, node counts towards two, inputs towards the first placeholder, the dialect
towards aten.

The vocabulary (every effect class CSE must tell apart, in both dialects) is a table in
:mod:`refimpl.strategies.graph_ops`: add an ``OpKind`` there to extend it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field, replace

import torch
from hypothesis import strategies as st
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from refimpl.strategies.features import Feature
from refimpl.strategies.graph_ops import (
    CONSTANTS,
    FAMILIES,
    FLOATING,
    HASH_TWINS,
    NEVER_MERGED_FAMILIES,
    SYMBOLIC_EMITS,
    VOCABULARY,
    OpKind,
    Value,
    accepts,
)

__all__ = ["CONSTANTS", "FAMILIES", "NEVER_MERGED_FAMILIES", "STYLES", "VOCABULARY",
           "GraphOptions", "GraphSpec", "NodeSpec", "OpKind", "annotate", "never_merged_names",
           "op_graphs"]

#: the dialects: make_fx's aten ops (``"symbolic"``: traced with ``tracing_mode="symbolic"``,
#: sizes are symbols and a size an op reads is a SymInt node), symbolic_trace's torch functions
#: and Tensor methods.
STYLES = ("aten", "torch", "symbolic")
#: the dialects ``op_graphs`` draws unless told otherwise (symbolic sizes: the properties that
#: judge them name that dialect)
DEFAULT_STYLES = ("aten", "torch")
#: the meta key under which ``GraphSpec.build`` records each node's vocabulary family.
FAMILY_META = "op_graphs_family"


@dataclass(frozen=True)
class NodeSpec:
    """One op: its vocabulary name, the earlier values it reads, its constants."""

    op: str
    inputs: tuple[int, ...]
    params: tuple = ()

    def __repr__(self) -> str:
        """Runnable, and exact for special floats (``repr(-nan)`` is ``nan``)."""
        return f"NodeSpec(op={self.op!r}, inputs={self.inputs!r}, params={_literal(self.params)})"


def _literal(value) -> str:
    """Python source for ``value``: floats by their bits where repr is ambiguous or not a
    literal (``float('-nan')``, ``float('inf')``)."""
    if isinstance(value, tuple):
        items = [_literal(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, float) and not math.isfinite(value):
        sign = "-" if math.copysign(1.0, value) < 0 else ""
        return f"float('{sign}{'nan' if math.isnan(value) else 'inf'}')"
    return repr(value)


@dataclass(frozen=True)
class GraphSpec:
    """A generated graph as plain data (see the module docstring)."""

    num_inputs: int
    side: int
    nodes: tuple[NodeSpec, ...]
    outputs: tuple[int, ...]
    style: str = "aten"

    def build(self) -> fx.GraphModule:
        """The graph in this spec's dialect: placeholders x0.., one op per NodeSpec (each
        node it emits tagged with the op's family in ``meta[FAMILY_META]``), a tuple output."""
        graph = fx.Graph()
        values = [graph.placeholder(f"x{i}") for i in range(self.num_inputs)]
        for spec in self.nodes:
            kind = VOCABULARY[spec.op]
            emit = (kind.emit_torch if self.style == "torch" else
                    SYMBOLIC_EMITS.get(spec.op, kind.emit) if self.style == "symbolic" else
                    kind.emit)
            last = next(iter(reversed(graph.nodes)))  # a placeholder at least (iter: torch < 2.13)
            values.append(emit(graph, [values[i] for i in spec.inputs], spec.params))
            node = values[-1]
            while node is not last:
                node.meta[FAMILY_META] = kind.family
                node = node.prev
        graph.output(tuple(values[i] for i in self.outputs))
        return fx.GraphModule(torch.nn.Module(), graph)

    def traced(self) -> fx.GraphModule:
        """:meth:`build`, with what the dialect's tracer records: make_fx's ``meta["val"]``
        for aten graphs (torch's CSE reads it to protect outputs), symbolic for
        ``"symbolic"`` (:func:`annotate_symbolic`); nothing for symbolic_trace."""
        gm = self.build()
        if self.style == "symbolic":
            return annotate_symbolic(gm, self.example_inputs())
        return annotate(gm, self.example_inputs()) if self.style == "aten" else gm

    def example_inputs(self, seed: int = 0) -> list[torch.Tensor]:
        """Fresh inputs (in-place ops may write them); entry [0, 0] of each is -0.0."""
        gen = torch.Generator().manual_seed(seed)
        inputs = [torch.randn(self.side, self.side, generator=gen)
                  for _ in range(self.num_inputs)]
        for x in inputs:
            x[0, 0] = -0.0
        return inputs

    def count(self, family: str) -> int:
        """How many of the spec's ops belong to ``family``."""
        return sum(VOCABULARY[n.op].family == family for n in self.nodes)

    def __str__(self) -> str:
        lines = [f"GraphSpec(num_inputs={self.num_inputs}, side={self.side}, outputs="
                 f"{self.outputs}, style={self.style!r}, nodes=("]
        lines += [f"    {n!r},  # v{self.num_inputs + i}" for i, n in enumerate(self.nodes)]
        return "\n".join([*lines, "))"])


def never_merged_names(graph: fx.Graph) -> frozenset[str]:
    """Names of the nodes a built spec tagged with a never-merged family (random draws,
    in-place writes): read from the generator's own record, not from any CSE's rules."""
    return frozenset(n.name for n in graph.nodes
                     if n.meta.get(FAMILY_META) in NEVER_MERGED_FAMILIES)


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


def annotate_symbolic(gm: fx.GraphModule, inputs: list[torch.Tensor]) -> fx.GraphModule:
    """Store in each node's ``meta["val"]`` what make_fx's ``tracing_mode="symbolic"`` records:
    the node run on fake tensors whose sizes are symbols (one ShapeEnv, each input's sizes
    dynamic: ``(s0, s0)``), a SymInt for a size; returns ``gm``."""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [mode.from_tensor(x, static_shapes=False) for x in inputs]
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
    return gm


@dataclass(frozen=True)
class GraphOptions:
    """What ``op_graphs`` may generate.

    ``families``: the vocabulary families to draw from (each may still be switched off per
    graph, swarm style); ``max_nodes``: ops per graph; ``max_inputs``: placeholders;
    ``side``: every input is ``(side, side)``; ``duplicates``: allow deliberate repeats;
    ``exclude``: vocabulary names never to use; ``constants``: the scalar constants to use;
    ``styles``: the dialects to draw from (:data:`STYLES`; :data:`DEFAULT_STYLES` unless
    given); ``return_repeats``: return a
    value and its repeat whenever the graph has one (else in about half those graphs);
    ``patterns``: the names of the :data:`PATTERNS` it may plan (none by default; the CSE
    properties' options name those their features need).
    """

    families: tuple[str, ...] = FAMILIES
    max_nodes: int = 20
    max_inputs: int = 3
    side: int = 3
    duplicates: bool = True
    exclude: frozenset[str] = field(default_factory=frozenset)
    constants: tuple = CONSTANTS
    styles: tuple[str, ...] = DEFAULT_STYLES
    return_repeats: bool = False
    patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, allowed in (("families", FAMILIES), ("styles", STYLES)):
            given = getattr(self, name)
            if not given or set(given) - set(allowed):
                raise ValueError(f"{name}={given!r}: each must be one of {allowed}")
        known = [p.name for p in PATTERNS]
        if isinstance(self.patterns, str) or set(self.patterns) - set(known):
            raise ValueError(f"patterns={self.patterns!r}: each must be one of {known}")
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


@dataclass
class _Drawn:
    """The graph so far, while generating: each value's :class:`Value`, the ops, and for each
    value the later values that repeat it (its twins)."""

    num_inputs: int
    values: list[Value]
    nodes: list[NodeSpec] = field(default_factory=list)
    twins: dict[int, list[int]] = field(default_factory=dict)

    def add(self, spec: NodeSpec, repeats: int | None = None) -> None:
        """Append ``spec`` (a repeat of value ``repeats``, if given), and its result."""
        kind = VOCABULARY[spec.op]
        chosen = [self.values[i] for i in spec.inputs]
        result = kind.result(chosen, spec.params)
        owns = kind.family not in ("view", "inplace", "inplace_random")
        storage = len(self.values) if owns else chosen[0].storage
        if repeats is not None:
            self.twins.setdefault(repeats, []).append(len(self.values))
        self.nodes.append(spec)
        self.values.append(replace(result, storage=storage,
                                   dtype=kind.dtype(chosen, spec.params)))

    def fits(self, kind: OpKind, inputs: tuple[int, ...]) -> bool:
        """May ``kind`` read these values (shapes and dtypes)?"""
        chosen = [self.values[i] for i in inputs]
        return kind.fits(chosen) and all(accepts(kind, v) for v in chosen)


def _candidates(kind: OpKind, values: list[Value], chosen: list[Value]) -> list[int]:
    """Indices of values that may be the next input of ``kind`` after ``chosen``; for the
    first input of a binary op, only those with at least one fitting partner."""
    ok = [i for i, v in enumerate(values) if accepts(kind, v) and kind.fits([*chosen, v])]
    if kind.arity == 2 and not chosen:
        ok = [i for i in ok if any(accepts(kind, w) and kind.fits([values[i], w])
                                   for w in values)]
    return ok


def _draw_node(draw, kinds: list[OpKind], values: list[Value], constants: tuple) -> NodeSpec:
    applicable = [k for k in kinds if k.arity == 0 or _candidates(k, values, [])]
    kind = draw(st.sampled_from(applicable or [VOCABULARY["clone"]]))
    inputs: list[int] = []
    for _ in range(kind.arity):
        options = _candidates(kind, values, [values[i] for i in inputs])
        inputs.append(draw(st.sampled_from(options)))
    params = draw(kind.params([values[i] for i in inputs], constants))
    return NodeSpec(kind.name, tuple(inputs), params)


def _lookalikes(value, constants: tuple) -> list:
    """The constants ``==`` (or NaN-ness) confuses with ``value`` although their type or bits
    differ: 1, 1.0 and True; 0.0 and -0.0; nan and -nan; and the other ints of its hash
    (-1 and -2: CPython hashes -1 as -2)."""
    return [c for c in constants if _identity(c) != _identity(value)
            and (c == value or (math.isnan(c) and math.isnan(value))
                 or _hash_twins(c, value))]


def _hash_twins(a, b) -> bool:
    """Two different ints of one hash (``hash(-1) == hash(-2)``)."""
    return type(a) is type(b) is int and a != b and hash(a) == hash(b)


def _identity(value) -> tuple:
    """A constant by its type and bits (``1``, ``1.0``, ``True``, ``0.0``, ``-0.0`` differ)."""
    return type(value), struct.pack(">d", value) if isinstance(value, float) else value


def _with_other_kwarg(draw, spec: NodeSpec) -> NodeSpec:
    """``spec`` with one of its entry's ``kwarg_options`` keywords set to another value."""
    name, values = draw(st.sampled_from(VOCABULARY[spec.op].kwarg_options))
    given = dict(p for p in spec.params if isinstance(p, tuple) and len(p) == 2
                 and isinstance(p[0], str))
    others = [v for v in values if name not in given or _identity(v) != _identity(given[name])]
    value = draw(st.sampled_from(others))
    if name not in given:
        return replace(spec, params=(*spec.params, (name, value)))
    return replace(spec, params=tuple((name, value) if isinstance(p, tuple) and p[:1] == (name,)
                                      else p for p in spec.params))


def _repeat(draw, drawn: _Drawn, constants: tuple) -> tuple[NodeSpec, int | None]:
    """A deliberate duplicate of an earlier node (and the value it repeats): its kwargs
    pairs maybe in the other order, its inputs maybe replaced by their latest twins, where
    the op still fits them (the same expression written twice); or a near-duplicate, its
    scalar constant swapped for a lookalike (``x + 0.0`` then ``x + -0.0``), or one keyword
    set to another of its ``kwarg_options`` (``gelu(x)`` then ``approximate="tanh"``): that
    one repeats nothing (None), so no later repeat reads it in place of the original (a
    ``keepdim`` changed its shape)."""
    i = draw(st.integers(0, len(drawn.nodes) - 1))
    spec = drawn.nodes[i]
    kind = VOCABULARY[spec.op]
    if kind.family in ("constant", "factory") and spec.params \
            and type(spec.params[-1]) in (bool, int, float):
        others = _lookalikes(spec.params[-1], constants)
        if others and draw(st.booleans()):
            spec = replace(spec, params=(*spec.params[:-1], draw(st.sampled_from(others))))
    if kind.kwarg_options and draw(st.booleans()):
        spec = _with_other_kwarg(draw, spec)
    pairs = [p for p in spec.params if isinstance(p, tuple) and len(p) == 2
             and isinstance(p[0], str)]
    if len(pairs) >= 2 and draw(st.booleans()):
        plain = tuple(p for p in spec.params if p not in pairs)
        spec = NodeSpec(spec.op, spec.inputs, plain + tuple(reversed(pairs)))
    if any(v in drawn.twins for v in spec.inputs) and draw(st.booleans()):
        inputs = tuple(drawn.twins.get(v, [v])[-1] for v in spec.inputs)
        if drawn.fits(kind, inputs):
            spec = replace(spec, inputs=inputs)
    same = _canonical(spec.params) == _canonical(drawn.nodes[i].params)
    return spec, drawn.num_inputs + i if same else None


def _one_input_writers(kinds: list[OpKind]) -> list[OpKind]:
    return [k for k in kinds if k.family in ("inplace", "inplace_random") and k.arity == 1]


def _add_writes_through_views(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """A write through a view of an input, and one through a view of an intermediate."""
    for of_input in (True, False):
        _add_write_through_view(draw, drawn, kinds, options, of_input)


def _add_write_through_view(draw, drawn: _Drawn, kinds: list[OpKind], options,
                            of_input: bool) -> None:
    """``x.t().mul_(2)``: a view of (a value in the storage of) an input or a computed
    value, written in place."""
    tensors = [i for i, v in enumerate(drawn.values) if v.dtype in FLOATING]
    if of_input:
        target = draw(st.sampled_from([i for i in tensors
                                       if drawn.values[i].storage < drawn.num_inputs]))
    else:  # of an intermediate: a clone of an input if there is none yet
        computed = [i for i in tensors if drawn.values[i].storage >= drawn.num_inputs]
        if not computed:
            drawn.add(NodeSpec("clone", (draw(st.integers(0, drawn.num_inputs - 1)),)))
            computed = [len(drawn.values) - 1]
        target = draw(st.sampled_from(computed))
    views = [k for k in kinds if k.family == "view" and drawn.fits(k, (target,))]
    if not views:
        return
    view = draw(st.sampled_from(views))
    drawn.add(NodeSpec(view.name, (target,), draw(view.params([drawn.values[target]],
                                                               options.constants))))
    writer = draw(st.sampled_from(_one_input_writers(kinds)))
    written = len(drawn.values) - 1
    drawn.add(NodeSpec(writer.name, (written,),
                       draw(writer.params([drawn.values[written]], options.constants))))


def _add_mutated_factory(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """``a = full((1, 1), c)``, ``a.mul_(2)`` and the same ``full`` call again (before or
    after the write): a merge would hand the write to both."""
    floats = [c for c in options.constants if type(c) is float]
    full = VOCABULARY["full"]
    params = ((1, 1), draw(st.sampled_from(floats)))
    writer = draw(st.sampled_from(_one_input_writers(kinds)))
    first = len(drawn.values)
    drawn.add(NodeSpec("full", (), params))
    again_first = draw(st.booleans())
    if again_first:
        drawn.add(NodeSpec("full", (), params), repeats=first)
    drawn.add(NodeSpec(writer.name, (first,),
                       draw(writer.params([full.result([], params)], options.constants))))
    if not again_first:
        drawn.add(NodeSpec("full", (), params), repeats=first)


def _add_keyword_pair(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """A call and, right after it, the same call with one keyword set to another of its
    entry's ``kwarg_options`` (``gelu(x)``, ``gelu(x, approximate="tanh")``)."""
    spec = _draw_node(draw, [k for k in kinds if k.kwarg_options], drawn.values,
                      options.constants)
    drawn.add(spec)
    if VOCABULARY[spec.op].kwarg_options:  # not the fallback clone
        drawn.add(_with_other_kwarg(draw, spec))


def _scalar_kinds(kinds: list[OpKind]) -> list[OpKind]:
    """Entries whose last parameter is one scalar constant (``x + c``, ``full((1, 1), c)``)."""
    return [k for k in kinds if k.family in ("constant", "factory") and k.name != "clamp"]


def _add_lookalike_pairs(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """A pair that differs in a constant's type (1, 1.0), and one in its bits (0.0, -0.0)."""
    for same_type in (False, True):
        _lookalike_pair(same_type)(draw, drawn, kinds, options)


def _lookalike_pair(same_type: bool):
    def add(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
        """A call with a constant and, right after it, the same call with a lookalike: of
        another type (1, 1.0, True) or, if ``same_type``, of other bits (0.0, -0.0)."""
        pairs = [(c, d) for c in options.constants for d in _lookalikes(c, options.constants)
                 if (type(c) is type(d)) == same_type]
        if not pairs:
            return
        constant, lookalike = draw(st.sampled_from(pairs))
        spec = _draw_node(draw, _scalar_kinds(kinds), drawn.values, (constant,))
        if spec.op == "clone":  # the fallback: nothing fits
            return
        drawn.add(spec)
        drawn.add(replace(spec, params=(*spec.params[:-1], lookalike)))
    return add


def _add_hash_twin_pair(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """A call with an int and, right after it, the same call with its hash twin
    (:data:`HASH_TWINS`: -1, -2): as a scalar constant (``x + -1``, ``full((1, 1), -1)``)
    or as a reduction's dim over a value of two or more dims (``sum(x, [-1])``)."""
    pool = tuple(c for pair in HASH_TWINS for c in pair)
    constant, twin = draw(st.sampled_from([(c, d) for c in pool for d in _lookalikes(c, pool)]))
    reductions = [k for k in kinds if k.family == "reduction"]
    scalars = _scalar_kinds(kinds)
    if reductions and (not scalars or draw(st.booleans())):
        kind = draw(st.sampled_from(reductions))
        matrices = [i for i, v in enumerate(drawn.values)
                    if len(v.shape) >= 2 and drawn.fits(kind, (i,))]
        if not matrices:
            return
        target = draw(st.sampled_from(matrices))
        params = draw(kind.params([drawn.values[target]], options.constants))
        first = NodeSpec(kind.name, (target,), ((constant,), *params[1:]))
        second = replace(first, params=((twin,), *params[1:]))
    else:
        first = _draw_node(draw, scalars, drawn.values, (constant,))
        if first.op == "clone":  # the fallback: nothing fits
            return
        second = replace(first, params=(*first.params[:-1], twin))
    drawn.add(first)
    drawn.add(second)


def _add_size_twice(draw, drawn: _Drawn, kinds: list[OpKind], options) -> None:
    """``x * x.size(0)`` twice on one value (the second a repeat): in the symbolic dialect
    each reads its own ``sym_size`` node, so the repeat is a SymInt node and the op that
    reads it, both pure."""
    kind = VOCABULARY["scale_by_size"]
    tensors = [i for i, v in enumerate(drawn.values)
               if v.shape and drawn.fits(kind, (i,))]
    if not tensors:
        return
    target = draw(st.sampled_from(tensors))
    spec = NodeSpec(kind.name, (target,), draw(kind.params([drawn.values[target]],
                                                           options.constants)))
    first = len(drawn.values)
    drawn.add(spec)
    drawn.add(spec, repeats=first)


def _twice(family: str):
    return lambda draw, drawn, kinds, options: _add_twice(draw, drawn, kinds, options, family)


def _add_twice(draw, drawn: _Drawn, kinds: list[OpKind], options, family: str) -> None:
    """The same never-merged call of ``family`` twice: a random draw, an in-place random
    draw, an effectful call (two prints are two lines of output)."""
    spec = _draw_node(draw, [k for k in kinds if k.family == family], drawn.values,
                      options.constants)
    first = len(drawn.values)
    drawn.add(spec)
    drawn.add(spec, repeats=first)


@dataclass(frozen=True)
class Pattern:
    """A few nodes drawn together, for a feature that independent draws rarely make: when
    the graph's enabled kinds allow it (``applies``), ``add`` appends them. ``op_graphs``
    plans each pattern its options name and allow (whatever the swarm switched off) in about
    three graphs in four (every graph, if ``always`` or if it is the only pattern the options
    name: then it is their property's case), after a drawn step
    (:func:`_pattern_step`), in the graphs of its ``styles``."""

    name: str
    applies: object  # (kinds, options) -> bool
    add: object  # (draw, drawn, kinds, options) -> None
    styles: tuple[str, ...] = STYLES
    always: bool = False


def _writes_views(kinds: list[OpKind], options) -> bool:
    return bool(_one_input_writers(kinds)) and any(k.family == "view" for k in kinds)


def _has(family: str):
    return lambda kinds, options: any(k.family == family for k in kinds)


PATTERNS = (
    Pattern("writes_through_views", _writes_views, _add_writes_through_views),
    Pattern("mutated_factory", lambda ks, o: bool(_one_input_writers(ks)) and any(
        k.name == "full" for k in ks) and any(type(c) is float for c in o.constants),
        _add_mutated_factory),
    Pattern("keyword_pair", lambda ks, o: any(k.kwarg_options for k in ks),
            _add_keyword_pair),
    Pattern("lookalike_pairs", lambda ks, o: bool(_scalar_kinds(ks)), _add_lookalike_pairs),
    Pattern("hash_twin_pair", lambda ks, o: bool(_scalar_kinds(ks)) or _has("reduction")(ks, o),
            _add_hash_twin_pair),
    *(Pattern(f"{family}_twice", _has(family), _twice(family))
      for family in ("random", "inplace_random", "effect")),
    Pattern("size_twice", lambda ks, o: any(k.name == "scale_by_size" for k in ks),
            _add_size_twice, styles=("symbolic",), always=True),
)


def _pattern_step(steps: int, options: GraphOptions,
                  always: bool = False) -> st.SearchStrategy[int | None]:
    """After which step a pattern goes, or None (in about one graph in four, unless
    ``always``). Both choices are always drawn, and the step from a range fixed by the
    options (the last step if beyond): so the shrinker can drop a pattern, or drop steps,
    without shifting the rest."""
    return st.tuples(st.integers(0, 3), st.integers(0, options.max_nodes - 1)).map(
        lambda t: min(t[1], steps - 1) if t[0] > 0 or always else None)


@st.composite
def op_graphs(draw, options: GraphOptions | None = None, **overrides) -> GraphSpec:
    """Random acyclic graphs as :class:`GraphSpec` (module docstring; options in
    :class:`GraphOptions`, given whole or as keyword overrides)."""
    options = GraphOptions(**overrides) if options is None else options
    style = draw(st.sampled_from(options.styles))
    off = draw(st.frozensets(st.sampled_from(options.families)))
    families = [f for f in options.families if f not in off] or list(options.families)
    kinds = [k for k in VOCABULARY.values()
             if k.family in families and k.name not in options.exclude]
    kinds = kinds or [VOCABULARY["clone"]]
    allowed = [k for k in VOCABULARY.values()
               if k.family in options.families and k.name not in options.exclude]
    num_inputs = draw(st.integers(1, options.max_inputs))
    drawn = _Drawn(num_inputs, [Value((options.side, options.side), storage=i)
                                for i in range(num_inputs)])
    steps = draw(st.integers(min(2, options.max_nodes), options.max_nodes))
    def only(pattern: Pattern) -> bool:  # the options' one pattern: their property's case
        return options.patterns == (pattern.name,)

    planned = [(at, p) for p in PATTERNS if p.applies(allowed, options)
               and p.name in options.patterns
               for at in [draw(_pattern_step(steps, options, p.always or only(p)))]
               if at is not None and style in p.styles]
    for step in range(steps):
        if options.duplicates and drawn.nodes and draw(st.booleans()):
            drawn.add(*_repeat(draw, drawn, options.constants))
        else:
            drawn.add(_draw_node(draw, kinds, drawn.values, options.constants))
        for pattern in (p for at, p in planned if at == step):
            pattern.add(draw, drawn, allowed, options)
    outputs = draw(_outputs(drawn, options.return_repeats))
    return GraphSpec(num_inputs, options.side, tuple(drawn.nodes), tuple(outputs), style)


def _outputs(drawn: _Drawn, always: bool) -> st.SearchStrategy[list[int]]:
    """One to three computed tensors (an input where nothing computed is a tensor); in about
    half the graphs with a repeated tensor (all, if ``always``), that value and its repeat
    (the same call, not a near-duplicate)."""
    tensors = [i for i in range(len(drawn.values)) if drawn.values[i].dtype is not None]
    computed = [i for i in tensors if i >= drawn.num_inputs] or tensors
    chosen = st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True)
    rep = _repeats(GraphSpec(drawn.num_inputs, 2, tuple(drawn.nodes), ()))
    pairs = [(v, t) for v, twins in drawn.twins.items() for t in twins
             if drawn.values[v].dtype is not None and rep[t] == rep[v]]
    if not pairs:
        return chosen
    both = st.tuples(st.just(True) if always else st.booleans(), st.sampled_from(pairs))
    return st.tuples(chosen, both).map(
        lambda t: list(dict.fromkeys([*t[0], *t[1][1]])) if t[1][0] else t[0])


# --- the features op_graphs must draw (refimpl.strategies.features; docs/features.md) ---

def _leaf_key(value) -> tuple:
    """A parameter by type and bits, through tuples (a kwargs pair is a tuple too)."""
    if isinstance(value, tuple):
        return ("tuple", tuple(_leaf_key(v) for v in value))
    return _identity(value) if type(value) in (bool, int, float) else (type(value), value)


def _is_kwarg(param) -> bool:
    return isinstance(param, tuple) and len(param) == 2 and isinstance(param[0], str)


def _storages(spec: GraphSpec) -> list[int]:
    """For each value, the value that owns its memory (views and writes share their input's)."""
    owner = list(range(spec.num_inputs))
    for i, node in enumerate(spec.nodes):
        shares = VOCABULARY[node.op].family in ("view", "inplace", "inplace_random")
        owner.append(owner[node.inputs[0]] if shares else spec.num_inputs + i)
    return owner


def _ordered(params: tuple) -> tuple:
    """Positional parameters, then the keyword pairs sorted by name (their order is no
    difference)."""
    keywords = sorted((p for p in params if _is_kwarg(p)), key=lambda p: p[0])
    return (*(p for p in params if not _is_kwarg(p)), *keywords)


def _canonical(params: tuple) -> tuple:
    """Parameters by type and bits, keywords in name order."""
    return _leaf_key(_ordered(params))


def _repeats(spec: GraphSpec) -> list[int]:
    """For each value, the first value that is the same call (op, inputs up to repeats,
    parameters by type and bits, keywords in any order); itself if none."""
    rep = list(range(spec.num_inputs))
    first: dict = {}
    for i, node in enumerate(spec.nodes):
        key = (node.op, tuple(rep[v] for v in node.inputs), _canonical(node.params))
        rep.append(first.setdefault(key, spec.num_inputs + i))
    return rep


def _near_pairs(spec: GraphSpec) -> list[tuple[NodeSpec, NodeSpec]]:
    """Pairs of distinct calls of one op on the same inputs (up to repeats)."""
    rep = _repeats(spec)
    calls = [(n.op, tuple(rep[v] for v in n.inputs), n) for n in spec.nodes]
    return [(a, b) for i, (op, ins, a) in enumerate(calls) for op2, ins2, b in calls[i + 1:]
            if op == op2 and ins == ins2 and _canonical(a.params) != _canonical(b.params)]


def _differ_only_in_kwargs(a: NodeSpec, b: NodeSpec) -> bool:
    positional = [tuple(p for p in n.params if not _is_kwarg(p)) for n in (a, b)]
    return _leaf_key(positional[0]) == _leaf_key(positional[1])


def _differing_constants(a: NodeSpec, b: NodeSpec) -> list[tuple]:
    """The scalar constants at which two calls' parameters differ, where their structure is
    the same; [] when they differ anywhere else."""
    def leaves(value) -> list:
        return [x for v in value for x in leaves(v)] if isinstance(value, tuple) else [value]
    la, lb = leaves(_ordered(a.params)), leaves(_ordered(b.params))
    if len(la) != len(lb):
        return []
    pairs = [(x, y) for x, y in zip(la, lb) if _leaf_key(x) != _leaf_key(y)]
    scalar = (bool, int, float)
    return pairs if all(type(x) in scalar and type(y) in scalar for x, y in pairs) else []


def shows_kwargs_only_difference(spec: GraphSpec) -> bool:
    return any(_differ_only_in_kwargs(a, b) for a, b in _near_pairs(spec))


def shows_constant_types(spec: GraphSpec) -> bool:
    """Two calls that differ only in constants that are ``==`` but of another type."""
    return any((pairs := _differing_constants(a, b))
               and all(x == y and type(x) is not type(y) for x, y in pairs)
               for a, b in _near_pairs(spec))


def shows_signed_zero_or_nan(spec: GraphSpec) -> bool:
    """Two calls that differ only in floats of other bits: 0.0/-0.0, nan/-nan."""
    return any((pairs := _differing_constants(a, b))
               and all(type(x) is type(y) is float and (x == y or (x != x and y != y))
                       for x, y in pairs)
               for a, b in _near_pairs(spec))


def shows_int_hash_twins(spec: GraphSpec) -> bool:
    """Two calls that differ only in ints of one hash: -1 and -2 (a dim, a constant)."""
    return any((pairs := _differing_constants(a, b))
               and all(_hash_twins(x, y) for x, y in pairs)
               for a, b in _near_pairs(spec))


def _writes_through_view(spec: GraphSpec, of_input: bool) -> bool:
    owner = _storages(spec)
    return any(VOCABULARY[n.op].family in ("inplace", "inplace_random")
               and n.inputs[0] >= spec.num_inputs
               and VOCABULARY[spec.nodes[n.inputs[0] - spec.num_inputs].op].family == "view"
               and (owner[n.inputs[0]] < spec.num_inputs) == of_input
               for n in spec.nodes)


def shows_returned_duplicates(spec: GraphSpec) -> bool:
    """Two returned values that are the same pure call or view."""
    rep = _repeats(spec)
    def mergeable(v: int) -> bool:
        return VOCABULARY[spec.nodes[v - spec.num_inputs].op].family not in \
            NEVER_MERGED_FAMILIES
    outs = [rep[v] for v in spec.outputs if v >= spec.num_inputs and mergeable(v)]
    return len(set(outs)) < len(outs)


def _repeated(spec: GraphSpec, family: str) -> bool:
    """Some call of ``family`` appears twice (inputs up to repeats)."""
    rep = _repeats(spec)
    calls = [rep[spec.num_inputs + i] for i, n in enumerate(spec.nodes)
             if VOCABULARY[n.op].family == family]
    return len(set(calls)) < len(calls)


def shows_mutated_factory(spec: GraphSpec) -> bool:
    """A ``full`` written in place (directly or through a view) that another equal ``full``
    repeats: a merge would hand the write to both."""
    owner, rep = _storages(spec), _repeats(spec)
    written = {owner[n.inputs[0]] for n in spec.nodes
               if VOCABULARY[n.op].family in ("inplace", "inplace_random")}
    fulls = [spec.num_inputs + i for i, n in enumerate(spec.nodes) if n.op == "full"]
    return any(f in written and any(g != f and rep[g] == rep[f] for g in fulls) for f in fulls)


def shows_symbolic_size_repeat(spec: GraphSpec) -> bool:
    """A graph with symbolic sizes that reads one size twice (``x * x.size(0)`` twice on one
    value, inputs up to repeats): two ``sym_size`` nodes and two ops reading them."""
    rep = _repeats(spec)
    sizes = [tuple(rep[v] for v in n.inputs) for n in spec.nodes if n.op == "scale_by_size"]
    return spec.style == "symbolic" and len(set(sizes)) < len(sizes)


def _feature(name: str, meaning: str, options: GraphOptions, detect, used_by: str) -> Feature:
    return Feature("cse", name, meaning, lambda: op_graphs(options), detect,
                   f"test_cse.py::{used_by}")


#: the strategies of the CSE properties (properties/test_cse.py), by what they judge
SOUNDNESS = GraphOptions(patterns=("writes_through_views", "mutated_factory", "keyword_pair",
                                   "effect_twice", "hash_twin_pair"))
#: make_fx graphs traced with symbolic sizes, every one reading a size twice
SYMBOLIC_SIZES = GraphOptions(styles=("symbolic",),
                              patterns=("writes_through_views", "mutated_factory",
                                        "keyword_pair", "effect_twice", "size_twice"))
DETERMINISTIC = GraphOptions(
    families=tuple(f for f in FAMILIES if f not in ("random", "inplace_random")),
    patterns=("writes_through_views", "mutated_factory", "keyword_pair", "lookalike_pairs"))
EFFECTS = GraphOptions(families=("unary", "view", "random", "inplace", "inplace_random",
                                 "binary"),
                       patterns=("random_twice", "inplace_random_twice",
                                 "writes_through_views"))
#: effectful calls that return nothing (prints, asserts), among pure ops
EFFECTFUL = GraphOptions(families=("effect", "unary"), max_nodes=8,
                         patterns=("effect_twice",))
#: constants and what reads them, no keyword arguments (``gelu``, ``clamp`` left out):
#: where ``x + 0.0`` meets ``x + -0.0``, nan meets -nan, ``full((1, 1), 1)`` meets ``True``.
CONSTANT_LOOKALIKES = GraphOptions(families=("constant", "factory", "unary", "binary", "list"),
                                   exclude=frozenset({"gelu", "clamp"}),
                                   patterns=("lookalike_pairs",))
#: the ops with keyword options (gelu's ``approximate``, a reduction's ``dtype``, ``keepdim``)
KEYWORDS = GraphOptions(families=("reduction", "unary"), max_nodes=8,
                        patterns=("keyword_pair",))
#: values returned with their repeats
RETURNED = GraphOptions(families=("unary", "binary", "constant", "factory", "view"),
                        return_repeats=True)

FEATURES: tuple[Feature, ...] = (
    _feature("kwargs_only", "two calls that differ only in a keyword argument (gelu(x), "
             "gelu(x, approximate='tanh'); sum(x, [0], dtype=float64), dtype=float32)",
             KEYWORDS, shows_kwargs_only_difference,
             "test_cse_tells_calls_apart_by_their_keywords"),
    _feature("constant_types", "two calls that differ only in a constant of another type: "
             "1, 1.0, True (full((1, 1), True) is a bool tensor)", CONSTANT_LOOKALIKES,
             shows_constant_types, "test_cse_tells_constants_apart_by_type_and_bits"),
    _feature("signed_zero_nan", "two calls that differ only in 0.0 and -0.0, or nan and -nan",
             CONSTANT_LOOKALIKES, shows_signed_zero_or_nan,
             "test_cse_tells_constants_apart_by_type_and_bits"),
    _feature("write_view_of_intermediate", "an in-place write through a view of a computed "
             "value", SOUNDNESS, lambda s: _writes_through_view(s, of_input=False),
             "test_cse_is_sound"),
    _feature("write_view_of_input", "an in-place write through a view of a graph input",
             SOUNDNESS, lambda s: _writes_through_view(s, of_input=True), "test_cse_is_sound"),
    _feature("returned_duplicates", "two returned values that are the same call (two "
             "clones of x, two x.t())", RETURNED, shows_returned_duplicates,
             "test_cse_keeps_returned_tensors_distinct"),
    _feature("random", "a random op called twice on the same input (rand_like, randint_like, "
             "dropout)",
             EFFECTS, lambda s: _repeated(s, "random"),
             "test_random_and_mutating_nodes_are_never_merged"),
    _feature("inplace_random", "an in-place random draw written twice (x.clone().uniform_())",
             EFFECTS, lambda s: _repeated(s, "inplace_random"),
             "test_random_and_mutating_nodes_are_never_merged"),
    _feature("effectful", "an effectful call that returns nothing, twice (aten._print, "
             "torch._assert)", EFFECTFUL, lambda s: _repeated(s, "effect"),
             "test_effectful_calls_are_never_merged"),
    _feature("mutated_factory", "a full((1, 1), c) written in place, and an equal full call",
             SOUNDNESS, shows_mutated_factory, "test_cse_is_sound"),
    _feature("int_hash_twins", "two calls that differ only in -1 and -2, ints of one hash "
             "(sum(x, [-1]) and sum(x, [-2]); x + -1 and x + -2)", SOUNDNESS,
             shows_int_hash_twins, "test_cse_is_sound"),
    _feature("symbolic_sizes", "a graph traced with symbolic sizes (make_fx "
             "tracing_mode='symbolic': fake values of sizes s0, a size read as an "
             "aten.sym_size.int node) that reads one size twice (x * x.size(0), twice)",
             SYMBOLIC_SIZES, shows_symbolic_size_repeat,
             "test_cse_is_sound_with_symbolic_sizes"),
)
