"""One op computed twice, an in-place write, then a read (``write_between_repeats``): the
smallest graphs where a CSE must decide whether a write separates two equal values.

Shape of every graph (one ``(side, side)`` input ``x0``)::

    base   = x0, or x0.clone()
    first  = op(base)            # the op under test, drawn params
    [write(base)]                # in place, when the write comes between the repeats
    second = op(base)            # the same call again: a repeat
    [write(base | first | second)]  # in place, when the write comes after both
    read   = pointwise(the other one of first/second)   # the graph's only output

The write is ``mul_``, ``relu_`` or an in-place random draw, on the written value itself or
through a view of it (``base.t().mul_(2)``): a write through a view changes its base, so
it separates the repeats as much as a direct one. The base is an input (a write through a
view of an input) or a clone (of an intermediate).

What a merge of ``second`` into ``first`` means, by hand: a view's repeat is the same
value whatever is written before or after (the write changes both views of one storage),
so it may always go; two fresh results are equal only while neither is written and their
base is not written between them, so the merge is sound exactly when the write is to
``base`` after both are computed. A ``reshape`` in symbolic_trace's dialect (no recorded
values) may be a copy, so it is claimed as neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from refimpl.strategies.graph_ops import CONSTANTS, VOCABULARY, Value
from refimpl.strategies.graphs import DEFAULT_STYLES, GraphSpec, NodeSpec

__all__ = ["REPEATABLE_OPS", "WriteBetween", "write_between_repeats"]

#: one-input vocabulary ops whose repeat a CSE may merge: pure ops and views.
REPEATABLE_OPS: tuple[str, ...] = tuple(sorted(
    name for name, kind in VOCABULARY.items()
    if kind.arity == 1 and kind.family in ("unary", "constant", "reduction", "view")))
#: one-input in-place writes: plain and random; ``init_uniform_`` is a Python function.
WRITE_OPS: tuple[str, ...] = tuple(sorted(
    name for name, kind in VOCABULARY.items()
    if kind.arity == 1 and kind.family in ("inplace", "inplace_random")))
#: views a write may go through (each where it fits the written value's shape).
WRITE_VIEWS = ("select", "slice", "t", "transpose")
#: pointwise reads of the value the write did not touch.
READ_OPS = ("cos", "neg", "relu", "tanh")
WRITTEN = ("base", "first", "second")


@dataclass(frozen=True)
class WriteBetween:
    """A drawn graph and what it is made of: the repeated op, which value is written, whether
    the write comes between the repeats (else after both), whether through a view."""

    spec: GraphSpec
    op: str
    written: str
    between: bool = False
    through_view: bool = False

    @property
    def merge_is_sound(self) -> bool:
        """May ``second`` be merged into ``first``? The module docstring's rule, by hand."""
        if VOCABULARY[self.op].family == "view":
            return not (self.op == "reshape" and self.spec.style == "torch")
        return self.written == "base" and not self.between


def write_between_repeats(op: str, side: int = 3) -> st.SearchStrategy[WriteBetween]:
    """Graphs of the module docstring's shape, repeating vocabulary op ``op`` on
    ``(side, side)`` values."""
    if op not in REPEATABLE_OPS:
        raise ValueError(f"op={op!r}: must be one of {REPEATABLE_OPS}")
    if side < 2:
        raise ValueError(f"side={side!r} must be >= 2 (the views need two dimensions)")
    return _write_between(op, side)


def _write(draw, value: Value) -> tuple[list[NodeSpec], bool]:
    """The nodes of an in-place write to a value of shape ``value``, maybe through a view of
    it, and whether it goes through one; their inputs are set by :func:`_place`."""
    views = [VOCABULARY[name] for name in WRITE_VIEWS if VOCABULARY[name].fits([value])]
    nodes: list[NodeSpec] = []
    written = value
    if views and draw(st.booleans()):
        view = draw(st.sampled_from(views))
        params = draw(view.params([value], CONSTANTS))
        nodes.append(NodeSpec(view.name, (), params))
        written = view.result([value], params)
    writer = VOCABULARY[draw(st.sampled_from(WRITE_OPS))]
    write = NodeSpec(writer.name, (), draw(writer.params([written], CONSTANTS)))
    return [*nodes, write], bool(nodes)


def _place(nodes: list[NodeSpec], write: list[NodeSpec], target: int) -> None:
    """Append ``write`` to ``nodes``: the view (if any) reads value ``target``, the writer
    the view or ``target`` itself."""
    *view, writer = write
    nodes += [NodeSpec(v.op, (target,), v.params) for v in view]
    reads = len(nodes) if view else target  # values: x0, then one per node
    nodes.append(NodeSpec(writer.op, (reads,), writer.params))


@st.composite
def _write_between(draw, op: str, side: int) -> WriteBetween:
    kind = VOCABULARY[op]
    square = Value((side, side))
    nodes: list[NodeSpec] = [NodeSpec("clone", (0,))] if draw(st.booleans()) else []
    base = len(nodes)  # x0 is value 0, the clone value 1
    params = draw(kind.params([square], CONSTANTS))
    written = draw(st.sampled_from(WRITTEN))
    between = written == "base" and draw(st.booleans())
    nodes.append(NodeSpec(op, (base,), params))
    first = len(nodes)
    target_value = kind.result([square], params) if written != "base" else square
    write, through_view = _write(draw, target_value)
    if between:
        _place(nodes, write, base)
    nodes.append(NodeSpec(op, (base,), params))
    second = len(nodes)
    if not between:
        _place(nodes, write, {"base": base, "first": first, "second": second}[written])
    other = first if written == "second" else second
    nodes.append(NodeSpec(draw(st.sampled_from(READ_OPS)), (other,)))
    spec = GraphSpec(1, side, tuple(nodes), (len(nodes),), draw(st.sampled_from(DEFAULT_STYLES)))
    return WriteBetween(spec, op, written, between, through_view)
