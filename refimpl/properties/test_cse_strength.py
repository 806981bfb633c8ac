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
"""

from __future__ import annotations

from hypothesis import given
from torch import fx

from refimpl.expect.cse_soundness import naive_duplicates
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies import GraphOptions, never_merged_names, op_graphs
from refimpl.strategies.graphs import annotate

#: pure, deterministic families; ``clone`` (two clones are two storages) and ``clamp`` (its
#: bounds mix 1, 1.0 and True) left out.
PURE = GraphOptions(families=("unary", "binary", "constant", "reduction", "list", "matmul",
                              "view"),
                    exclude=frozenset({"clone", "clamp"}), constants=(2.0, 0.5))
#: ops that return a view or a copy (torch's schema cannot say which): a repeat is mergeable
#: only where the dialect records values (make_fx's ``meta["val"]``) and eager returned a view.
MAYBE_COPY = ("reshape",)


def storage(node: fx.Node) -> int:
    """The address of the storage of the node's recorded value (all values stay alive in
    ``meta``, so an address is never reused)."""
    return node.meta["val"].untyped_storage().data_ptr()


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
    gm = spec.traced()
    reach(naive_duplicates(gm.graph) > 0)
    new_graph = component(refimpl_backend, "fx_graph_cse")(gm.graph)
    lost = sorted(never_merged_names(gm.graph) - {n.name for n in new_graph.nodes})
    assert not lost, f"{refimpl_backend.name} removed writes {lost}\n{spec}"
