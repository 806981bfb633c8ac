"""One op computed twice, an in-place write, then a read (``write_between_repeats``): the
smallest graphs where a CSE must decide whether a write separates two equal values.

Shape of every graph (one ``(side, side)`` input ``x0``)::

    base   = x0, or x0.clone()
    first  = op(base)            # the op under test, drawn params
    second = op(base)            # the same call again: a repeat
    write(base | first | second) # in place: mul_, relu_, or an in-place random draw
    read   = pointwise(the other one of first/second)   # the graph's only output

What a merge of ``second`` into ``first`` means, by hand: a view's repeat is the same
value whatever is written later (the write changes both views of one storage), so it may
always go; two fresh results are equal only while neither is written, so the merge is sound
exactly when the write is to ``base`` (after both are computed). A ``reshape`` in
symbolic_trace's dialect (no recorded values) may be a copy, so it is claimed as neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from refimpl.strategies.graph_ops import CONSTANTS, VOCABULARY, Value
from refimpl.strategies.graphs import STYLES, GraphSpec, NodeSpec

__all__ = ["REPEATABLE_OPS", "WriteBetween", "write_between_repeats"]

#: one-input vocabulary ops whose repeat a CSE may merge: pure ops and views.
REPEATABLE_OPS: tuple[str, ...] = tuple(sorted(
    name for name, kind in VOCABULARY.items()
    if kind.arity == 1 and kind.family in ("unary", "constant", "reduction", "view")))
#: one-input in-place writes: plain and random; ``init_uniform_`` is a Python function.
WRITE_OPS: tuple[str, ...] = tuple(sorted(
    name for name, kind in VOCABULARY.items()
    if kind.arity == 1 and kind.family in ("inplace", "inplace_random")))
#: pointwise reads of the value the write did not touch.
READ_OPS = ("cos", "neg", "relu", "tanh")
WRITTEN = ("base", "first", "second")


@dataclass(frozen=True)
class WriteBetween:
    """A drawn graph and what it is made of: the repeated op, which value is written."""

    spec: GraphSpec
    op: str
    written: str

    @property
    def merge_is_sound(self) -> bool:
        """May ``second`` be merged into ``first``? The module docstring's rule, by hand."""
        if VOCABULARY[self.op].family == "view":
            return not (self.op == "reshape" and self.spec.style == "torch")
        return self.written == "base"


def write_between_repeats(op: str, side: int = 3) -> st.SearchStrategy[WriteBetween]:
    """Graphs of the module docstring's shape, repeating vocabulary op ``op`` on
    ``(side, side)`` values."""
    if op not in REPEATABLE_OPS:
        raise ValueError(f"op={op!r}: must be one of {REPEATABLE_OPS}")
    if side < 2:
        raise ValueError(f"side={side!r} must be >= 2 (the views need two dimensions)")
    return _write_between(op, side)


@st.composite
def _write_between(draw, op: str, side: int) -> WriteBetween:
    kind = VOCABULARY[op]
    square = Value((side, side))
    nodes: list[NodeSpec] = [NodeSpec("clone", (0,))] if draw(st.booleans()) else []
    base = len(nodes)  # x0 is value 0, the clone value 1
    params = draw(kind.params([square], CONSTANTS))
    first, second = base + 1, base + 2
    nodes += [NodeSpec(op, (base,), params), NodeSpec(op, (base,), params)]
    written = draw(st.sampled_from(WRITTEN))
    target = {"base": base, "first": first, "second": second}[written]
    writer = VOCABULARY[draw(st.sampled_from(WRITE_OPS))]
    written_value = kind.result([square], params) if target != base else square
    nodes.append(NodeSpec(writer.name, (target,),
                          draw(writer.params([written_value], CONSTANTS))))
    other = first if written == "second" else second
    nodes.append(NodeSpec(draw(st.sampled_from(READ_OPS)), (other,)))
    read = len(nodes)  # values: x0, then one per node
    spec = GraphSpec(1, side, tuple(nodes), (read,), draw(st.sampled_from(STYLES)))
    return WriteBetween(spec, op, written)
