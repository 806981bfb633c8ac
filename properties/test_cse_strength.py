"""CSE completeness, against the backend's ``fx_graph_cse``: written to kill mutants that the
soundness properties (test_cse.py) cannot see (docs/oracle-strength.md).

A CSE that merges nothing is sound, and idempotent; refimpl made too cautious (a pure op read
as opaque, a ``maybe_copy`` flag kept for a plain view, a constant keyed by identity) passes
every soundness property. Here the expectation is independent of any CSE's effect rules: on
graphs of pure, deterministic ops whose constants' ``==`` is their identity (``2.0``,
``0.5``: no hash collisions, no signed zeros, no NaN), a node that repeats an earlier node's
op on the same arguments (up to earlier repeats) is a common subexpression; a ``reshape``
only where the graph records that eager returned a view (make_fx graphs). torch's contract
keeps every node whose storage the graph returns (two returned tensors stay two), so those
are not counted; every other repeat must go.

Reach: the graph has at least one such repeat (a naive duplicate, for the writes property).

The second property narrows test_cse.py's never-merged check to symbolic_trace graphs dense
in writes, where an ``inplace=True`` argument is what makes a call write.

The last property draws, for each one-input pure op and view, that op twice, an in-place
write between the repeat and a read (refimpl.strategies.write_between): equal views of one
storage are one value whatever is written to it later, so their repeat must go; two fresh
results may be merged only where neither is written; test_cse.py's judge checks soundness.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import fx

from refimpl.expect.cse_soundness import naive_duplicates, unsound_reasons
from refimpl.oracle import component, skip_unless_takes
from refimpl.properties.reach import reach
from refimpl.strategies import GraphOptions, never_merged_names, op_graphs
from refimpl.strategies.graphs import annotate
from refimpl.strategies.write_between import REPEATABLE_OPS, write_between_repeats

#: pure, deterministic families; ``clone`` (two clones are two storages), ``clamp`` (its
#: bounds mix 1, 1.0 and True) and ``scale_by_size`` (SymInt arithmetic: its repeats keep
#: the reach below 50%; the write-between property draws it) left out.
PURE = GraphOptions(families=("unary", "binary", "constant", "reduction", "list", "matmul",
                              "view"),
                    exclude=frozenset({"clone", "clamp", "scale_by_size"}), constants=(2.0, 0.5))
#: ops that return a view or a copy (torch's schema cannot say which): a repeat is mergeable
#: only where the dialect records values (make_fx's ``meta["val"]``) and eager returned a view.
MAYBE_COPY = ("reshape",)


def storage(node: fx.Node) -> int | None:
    """The address of the storage of the node's recorded value (all values stay alive in
    ``meta``, so an address is never reused); None for a Python number (a size)."""
    value = node.meta["val"]
    return value.untyped_storage().data_ptr() if isinstance(value, torch.Tensor) else None


def _name(node: fx.Node) -> str:
    target = node.target
    return target if isinstance(target, str) else getattr(
        getattr(target, "overloadpacket", target), "__name__", "")


def mergeable_repeats(spec) -> int:
    """Hash-consing in graph order, by hand: a node's key is (op, target, its arguments with
    each earlier repeat replaced by the node it repeats, kwargs by name); a node whose storage
    is returned by the graph (run eagerly), or a maybe-copy op not known to be a view, is
    never merged and represents only itself."""
    gm = annotate(spec.build(), spec.example_inputs())
    output = next(n for n in gm.graph.nodes if n.op == "output")
    returned = {storage(n) for n in output.all_input_nodes}
    first: dict = {}
    rep: dict[fx.Node, fx.Node] = {}
    repeats = 0
    for node in gm.graph.nodes:
        rep[node] = node
        if node.op not in ("call_function", "call_method") or storage(node) in returned:
            continue
        if _name(node) in MAYBE_COPY and not (
                spec.style == "aten" and storage(node) == storage(node.args[0])):
            continue
        key = (node.op, node.target, repr(fx.map_arg(node.args, rep.__getitem__)),
               repr(sorted(fx.map_arg(node.kwargs, rep.__getitem__).items())))
        if key in first:
            rep[node] = first[key]
            repeats += 1
        else:
            first[key] = node
    return repeats


@given(op_graphs(PURE))
def test_every_pure_repeat_is_merged(refimpl_backend, spec):
    """The backend removes at least every repeat of a pure op whose result is not returned."""
    expected = mergeable_repeats(spec)
    reach(expected > 0)
    gm = spec.traced()
    new_graph = component(refimpl_backend, "fx_graph_cse")(gm.graph)
    removed = len(gm.graph.nodes) - len(new_graph.nodes)
    assert removed >= expected, (
        f"{refimpl_backend.name} fx_graph_cse removed {removed} nodes, expected at least "
        f"{expected} (repeats of pure ops not returned)\n{spec}\n"
        "reproduce: gm = spec.traced(); fx_graph_cse(gm.graph)")



#: symbolic_trace graphs dense in writes: in-place methods and functions whose ``inplace``
#: argument makes them write (``F.relu(x, True)``), in-place random draws, and their repeats.
WRITES = GraphOptions(families=("unary", "inplace", "inplace_random"), styles=("torch",))


@given(op_graphs(WRITES))
def test_writes_are_never_merged_in_traced_code(refimpl_backend, spec):
    """Every in-place write and in-place draw of a symbolic_trace graph survives (by name,
    as the generator recorded it)."""
    skip_unless_takes(refimpl_backend, "fx_graph_cse", WRITES.styles)
    gm = spec.traced()
    reach(naive_duplicates(gm.graph) > 0)
    new_graph = component(refimpl_backend, "fx_graph_cse")(gm.graph)
    lost = sorted(never_merged_names(gm.graph) - {n.name for n in new_graph.nodes})
    # test_cse.py's words for this defect (lost_message), so that it groups as one cause
    reasons = [f"never-merged nodes removed: {lost}"]
    assert not lost, f"{refimpl_backend.name} fx_graph_cse is unsound: {reasons}\n{spec}"


@pytest.mark.parametrize("op", REPEATABLE_OPS)
@given(data=st.data())
def test_a_write_between_equal_values(refimpl_backend, op, data):
    """``op`` twice on one base, an in-place write (to the base or to one result, directly or
    through a view; between the repeats or after both), a read of the other result: the
    backend's result is sound (test_cse.py's judge), and where the write comes after both
    repeats and the merge is sound by hand (a view's repeat; two fresh results when only the
    base is written, refimpl.strategies.write_between) the repeat is removed. (A view
    repeated across a write may be merged too; neither torch nor refimpl does, so it is not
    asked.)"""
    drawn = data.draw(write_between_repeats(op))
    gm = drawn.spec.traced()
    reach(True)
    new_graph = component(refimpl_backend, "fx_graph_cse")(gm.graph)
    reasons = unsound_reasons(gm, new_graph, drawn.spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, (f"{refimpl_backend.name} fx_graph_cse is unsound: {reasons}\n"
                         f"{drawn.spec}\nreproduce: gm = spec.traced(); fx_graph_cse(gm.graph)")
    removed = len(gm.graph.nodes) - len(new_graph.nodes)
    assert removed >= 1 or drawn.between or not drawn.merge_is_sound, (
        f"{refimpl_backend.name} fx_graph_cse kept the repeat of {op} (written: "
        f"{drawn.written}), a sound merge\n{drawn.spec}\n"
        "reproduce: gm = spec.traced(); fx_graph_cse(gm.graph)")
