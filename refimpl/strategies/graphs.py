"""Random FX op graphs (``op_graphs``): plain-data specs that build make_fx-style (aten) or
symbolic_trace-style (torch functions, Tensor methods, ``operator``) graphs.

A :class:`GraphSpec` is plain data: the dialect (``style``: ``"aten"`` or ``"torch"``), the
number of inputs, one :class:`NodeSpec` per op (its vocabulary name, the indices of the
earlier values it reads, its constant parameters), and the output indices.
``spec.build()`` makes the ``fx.GraphModule`` (each node's vocabulary family in
``node.meta["op_graphs_family"]``); ``spec.traced()`` adds what the dialect's tracer records
(make_fx: ``meta["val"]``); ``spec.example_inputs()`` makes fresh inputs; ``str(spec)``
prints a listing that rebuilds it, for a reproducer.

Generation: values are numbered; the inputs are ``(side, side)`` float tensors; each new node
draws its op from the enabled, applicable vocabulary entries and its inputs only from earlier
values whose shapes fit, so every graph is acyclic and runs. Each node may instead repeat an
earlier node (a deliberate duplicate, with its kwargs possibly in the other order, possibly
reading the repeats of its inputs instead: ``x.clone().uniform_()`` written twice; or a
near-duplicate whose constant is swapped for a lookalike: ``x + 0.0`` then ``x + -0.0``).
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

from refimpl.strategies.graph_ops import (
    CONSTANTS,
    FAMILIES,
    NEVER_MERGED_FAMILIES,
    VOCABULARY,
    OpKind,
    Value,
)

__all__ = ["CONSTANTS", "FAMILIES", "NEVER_MERGED_FAMILIES", "STYLES", "VOCABULARY",
           "GraphOptions", "GraphSpec", "NodeSpec", "OpKind", "annotate", "never_merged_names",
           "op_graphs"]

#: the dialects: make_fx's aten ops, symbolic_trace's torch functions and Tensor methods.
STYLES = ("aten", "torch")
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
            emit = kind.emit if self.style == "aten" else kind.emit_torch
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
        for aten graphs (torch's CSE reads it to protect outputs); nothing for symbolic_trace."""
        gm = self.build()
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


@dataclass(frozen=True)
class GraphOptions:
    """What ``op_graphs`` may generate.

    ``families``: the vocabulary families to draw from (each may still be switched off per
    graph, swarm style); ``max_nodes``: ops per graph; ``max_inputs``: placeholders;
    ``side``: every input is ``(side, side)``; ``duplicates``: allow deliberate repeats;
    ``exclude``: vocabulary names never to use; ``constants``: the scalar constants to use;
    ``styles``: the dialects to draw from (:data:`STYLES`).
    """

    families: tuple[str, ...] = FAMILIES
    max_nodes: int = 20
    max_inputs: int = 3
    side: int = 3
    duplicates: bool = True
    exclude: frozenset[str] = field(default_factory=frozenset)
    constants: tuple = CONSTANTS
    styles: tuple[str, ...] = STYLES

    def __post_init__(self) -> None:
        for name, allowed in (("families", FAMILIES), ("styles", STYLES)):
            given = getattr(self, name)
            if not given or set(given) - set(allowed):
                raise ValueError(f"{name}={given!r}: each must be one of {allowed}")
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
        self.values.append(replace(result, storage=storage))


def _candidates(kind: OpKind, values: list[Value], chosen: list[Value]) -> list[int]:
    """Indices of values that may be the next input of ``kind`` after ``chosen``; for the
    first input of a binary op, only those with at least one fitting partner."""
    ok = [i for i, v in enumerate(values) if kind.fits([*chosen, v])]
    if kind.arity == 2 and not chosen:
        ok = [i for i in ok if any(kind.fits([values[i], w]) for w in values)]
    return ok


def _draw_node(draw, kinds: list[OpKind], values: list[Value], constants: tuple) -> NodeSpec:
    applicable = [k for k in kinds if _candidates(k, values, [])]
    kind = draw(st.sampled_from(applicable or [VOCABULARY["clone"]]))
    inputs: list[int] = []
    for _ in range(kind.arity):
        options = _candidates(kind, values, [values[i] for i in inputs])
        inputs.append(draw(st.sampled_from(options)))
    params = draw(kind.params([values[i] for i in inputs], constants))
    return NodeSpec(kind.name, tuple(inputs), params)


def _lookalikes(value, constants: tuple) -> list:
    """The constants ``==`` (or NaN-ness) confuses with ``value`` although their type or bits
    differ: 1, 1.0 and True; 0.0 and -0.0; nan and -nan."""
    def ident(c) -> tuple:
        return type(c), struct.pack(">d", c) if isinstance(c, float) else c
    return [c for c in constants if ident(c) != ident(value)
            and (c == value or (math.isnan(c) and math.isnan(value)))]


def _repeat(draw, drawn: _Drawn, constants: tuple) -> tuple[NodeSpec, int]:
    """A deliberate duplicate of an earlier node (and the value it repeats): its kwargs
    pairs maybe in the other order, its inputs maybe replaced by their latest twins, where
    the op still fits them (the same expression written twice); or a near-duplicate, its
    scalar constant swapped for a lookalike (``x + 0.0`` then ``x + -0.0``)."""
    i = draw(st.integers(0, len(drawn.nodes) - 1))
    spec = drawn.nodes[i]
    if VOCABULARY[spec.op].family == "constant" and len(spec.params) == 1:
        others = _lookalikes(spec.params[0], constants)
        if others and draw(st.booleans()):
            spec = replace(spec, params=(draw(st.sampled_from(others)),))
    pairs = [p for p in spec.params if isinstance(p, tuple) and len(p) == 2
             and isinstance(p[0], str)]
    if len(pairs) >= 2 and draw(st.booleans()):
        plain = tuple(p for p in spec.params if p not in pairs)
        spec = NodeSpec(spec.op, spec.inputs, plain + tuple(reversed(pairs)))
    if any(v in drawn.twins for v in spec.inputs) and draw(st.booleans()):
        inputs = tuple(drawn.twins.get(v, [v])[-1] for v in spec.inputs)
        if VOCABULARY[spec.op].fits([drawn.values[v] for v in inputs]):
            spec = replace(spec, inputs=inputs)
    return spec, drawn.num_inputs + i


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
    num_inputs = draw(st.integers(1, options.max_inputs))
    drawn = _Drawn(num_inputs, [Value((options.side, options.side), storage=i)
                                for i in range(num_inputs)])
    for _ in range(draw(st.integers(min(2, options.max_nodes), options.max_nodes))):
        if options.duplicates and drawn.nodes and draw(st.booleans()):
            drawn.add(*_repeat(draw, drawn, options.constants))
        else:
            drawn.add(_draw_node(draw, kinds, drawn.values, options.constants))
    computed = range(num_inputs, len(drawn.values))
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    return GraphSpec(num_inputs, options.side, tuple(drawn.nodes), tuple(outputs), style)
