"""Meta-tests of ``refimpl.strategies.op_graphs``, the generator behind the CSE properties.

It must draw every vocabulary op in both dialects, every effect class, the constants that
differ only in their bits, deliberate duplicates (also of whole expressions, reading the
repeats of their inputs), and shrink a failure to a few nodes.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings

from refimpl.strategies import (
    CONSTANTS,
    FAMILIES,
    NEVER_MERGED_FAMILIES,
    STYLES,
    VOCABULARY,
    GraphOptions,
    NodeSpec,
    graphs,
    never_merged_names,
    op_graphs,
)
from refimpl.strategies.write_between import WRITTEN, write_between_repeats
from tests.finding import find_example

_QUICK = {"max_examples": 500, "shrink": False}


@given(op_graphs())
def test_generated_graphs_are_acyclic_valid_and_run(spec):
    for position, node in enumerate(spec.nodes):
        assert all(i < spec.num_inputs + position for i in node.inputs), spec
    gm = spec.traced()
    gm.graph.lint()
    assert len(gm(*spec.example_inputs())) == len(spec.outputs)


@pytest.mark.parametrize("options", ["SOUNDNESS", "KEYWORDS", "CONSTANT_LOOKALIKES",
                                     "RETURNED", "EFFECTFUL", "EFFECTS"])
def test_every_property_strategy_draws_graphs_that_run(options):
    """Each CSE property's strategy (near-duplicates whose keyword changed a shape, dtypes
    from reductions and ``full``, patterns) draws graphs that build and run in both
    dialects."""
    @settings(max_examples=60, deadline=None, database=None)
    @given(op_graphs(getattr(graphs, options)))
    def runs(spec):
        spec.traced()(*spec.example_inputs())
    runs()


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("name", sorted(VOCABULARY))
def test_generator_reaches_every_op_in_both_dialects(name, style):
    """Every vocabulary entry is generated (with the families that make its inputs), and
    its graph builds and runs in each dialect."""
    families = tuple(dict.fromkeys((VOCABULARY[name].family, "list", "view")))
    spec = find_example(op_graphs(families=families, max_nodes=12, styles=(style,)),
                lambda s: any(n.op == name for n in s.nodes), **_QUICK)
    assert spec.style == style
    spec.traced()(*spec.example_inputs())


def _bits(c) -> bytes:
    return struct.pack(">d", c) if isinstance(c, float) else repr(c).encode()


def test_constants_hold_every_special_float():
    bits = {_bits(c) for c in CONSTANTS}
    for special in (0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf):
        assert _bits(special) in bits, special
    assert {repr(c) for c in (1, 1.0, True)} <= {repr(c) for c in CONSTANTS}


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("family", NEVER_MERGED_FAMILIES)
def test_never_merged_nodes_are_recorded(family, style):
    spec = find_example(op_graphs(families=(family,), max_nodes=3, styles=(style,)),
                lambda s: s.count(family) >= 1, **_QUICK)
    assert len(never_merged_names(spec.build().graph)) >= spec.count(family)


@pytest.mark.parametrize("style", STYLES)
def test_generator_writes_one_expression_twice(style):
    """``x.clone().uniform_()`` twice (any in-place draw): a repeat that reads the repeat of
    its input."""
    def twice(s) -> bool:
        ops = {i + s.num_inputs: n for i, n in enumerate(s.nodes)}
        return any(VOCABULARY[a.op].family == "inplace_random" and a.op == b.op
                   and a.inputs != b.inputs
                   and ops.get(a.inputs[0]) == ops.get(b.inputs[0]) is not None
                   for a in s.nodes for b in s.nodes)
    find_example(op_graphs(families=("unary", "inplace_random"), styles=(style,), max_nodes=8),
         twice, **_QUICK)


@pytest.mark.parametrize("style", STYLES)
def test_generator_writes_to_viewed_values(style):
    """A view of a value, then an in-place write to that value, then a read of the view."""
    def viewed(s) -> bool:
        for i, n in enumerate(s.nodes):
            if VOCABULARY[n.op].family != "view":
                continue
            view = s.num_inputs + i
            later = s.nodes[i + 1:]
            writes = [j for j, m in enumerate(later) if VOCABULARY[m.op].family in (
                "inplace", "inplace_random") and m.inputs[0] == n.inputs[0]]
            if writes and any(view in m.inputs for m in later[writes[0] + 1:]):
                return True
        return False
    find_example(op_graphs(styles=(style,)), viewed, **_QUICK)


def test_generator_emits_kwargs_in_both_orders_and_duplicates():
    for first in ("min", "max"):
        find_example(op_graphs(max_nodes=6), lambda s, k=first: any(
            n.op == "clamp" and n.params[0][0] == k for n in s.nodes), **_QUICK)
    spec = find_example(op_graphs(), lambda s: len(set(s.nodes)) < len(s.nodes), **_QUICK)
    assert len(set(spec.nodes)) < len(spec.nodes)


@pytest.mark.slow
def test_failures_shrink_to_a_few_nodes():
    """A failure needing an in-place op and a duplicated node shrinks from up to 20 nodes to a
    handful (derandomised, so the shrink is repeatable in every profile)."""
    spec = find_example(op_graphs(), lambda s: s.count("inplace") >= 1 and len(set(s.nodes)) <
                        len(s.nodes), max_examples=300)
    assert len(spec.nodes) <= 5, spec


def test_options_reject_bad_values():
    with pytest.raises(ValueError, match="families"):
        GraphOptions(families=("nope",))
    with pytest.raises(ValueError, match="styles"):
        GraphOptions(styles=("make_fx",))
    with pytest.raises(ValueError, match="exclude"):
        GraphOptions(exclude=frozenset({"nope"}))
    with pytest.raises(ValueError, match="max_nodes"):
        GraphOptions(max_nodes=0)
    assert set(FAMILIES) >= set(NEVER_MERGED_FAMILIES)


def test_write_between_rejects_an_op_it_cannot_repeat():
    with pytest.raises(ValueError, match="add_"):
        write_between_repeats("add_")
    with pytest.raises(ValueError, match="side=1"):
        write_between_repeats("cos", side=1)


@pytest.mark.parametrize("written", WRITTEN)
def test_write_between_writes_each_value_then_reads_the_other(written):
    """The write lands on the drawn value (base, first or second repeat) after both repeats,
    and the read (the only output) reads a repeat that was not written."""
    drawn = find_example(write_between_repeats("transpose"),
                         lambda d: d.written == written and not d.through_view, **_QUICK)
    assert not drawn.between
    nodes = drawn.spec.nodes
    base = 1 if nodes[0].op == "clone" else 0
    first, second = base + 1, base + 2
    write, read = nodes[-2], nodes[-1]
    assert nodes[first - 1] == nodes[second - 1] and nodes[first - 1].op == "transpose"
    assert write.inputs == ({"base": base, "first": first, "second": second}[written],)
    assert read.inputs == ((first,) if written == "second" else (second,))
    assert drawn.spec.outputs == (len(nodes),)
    drawn.spec.traced()(*drawn.spec.example_inputs())


@pytest.mark.parametrize("base_op", ["clone", None])
def test_write_between_writes_through_a_view_between_the_repeats(base_op):
    """``y = x.clone(); a = y.cos(); y.t().mul_(2); b = y.cos()`` (or on ``x`` itself): the
    view reads the base, the write the view, the second repeat comes after the write and the
    read reads it; such a merge is unsound."""
    drawn = find_example(write_between_repeats("cos"), lambda d: d.between and d.through_view
                         and (d.spec.nodes[0].op == "clone") == (base_op == "clone"), **_QUICK)
    nodes = drawn.spec.nodes
    base = 1 if base_op == "clone" else 0
    first, view, write, second, read = nodes[base:]
    assert first == second == NodeSpec("cos", (base,))
    assert view.inputs == (base,) and VOCABULARY[view.op].family == "view"
    assert write.inputs == (base + 2,) and VOCABULARY[write.op].family in (
        "inplace", "inplace_random")
    assert read.inputs == (base + 4,) and drawn.spec.outputs == (base + 5,)
    assert not drawn.merge_is_sound
    drawn.spec.traced()(*drawn.spec.example_inputs())
