"""Partition mutants that no program can tell apart from the original, each shown equal on
its whole (finite) domain, not asserted: the survivors of each seed's run that were, grouped
by that seed (benchmarks/mutation_score.py's ``EQUIVALENT`` names each test), and a few
registered before any seed drew them.

``refimpl/partition/graph.py:76``, ``n.role == "backward"`` -> ``n.role <= "backward"``: a
joint node's role is one of the five names ``fx_edge`` assigns (``JointNode.role``), and of
those only ``"backward"`` sorts at or before ``"backward"``, so both conditions pick the same
nodes of every graph.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import importlib
import inspect
import itertools
import operator
import pathlib
import random
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental import symbolic_shapes
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from refimpl.cse import fx_graph_cse
from refimpl.partition import (
    candidates,
    cost,
    cut,
    exact,
    fx_edge,
    knapsack,
    mincut,
    partitioner,
    problem,
    region,
    runtime,
)
from refimpl.partition.api import joint_graph
from refimpl.partition.cut import cut_of
from refimpl.partition.graph import JointGraph, JointNode
from refimpl.partition.mincut import save_set
from refimpl.partition.options import PartitionOptions
from tests.frozen_uses import recording
from tests.joint_traces import trace_joint

#: every role ``refimpl.partition.fx_edge`` assigns (graph.JointNode.role's comment)
ROLES = ("primal", "tangent", "forward", "backward", "output")


def _program(x, w):
    return (torch.mm(x, w).cos() * 2).sum()


def test_the_roles_are_the_five_that_fx_edge_assigns():
    """The domain is complete: a traced joint graph holds each of the five roles, no other."""
    graph = joint_graph(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True))
    assert {n.role for n in graph.nodes} == set(ROLES)


def test_graph_76_role_le_backward_is_role_eq_backward():
    """On every role, ``<=`` against "backward" selects exactly what ``==`` selects."""
    for role in ROLES:
        assert (role <= "backward") == (role == "backward"), role
    selected = [r for r in ROLES if operator.le(r, "backward")]
    assert selected == ["backward"]


def _role_literals() -> set[object]:
    """Every value ``fx_edge._roles`` can store: the string constants assigned (directly or
    through a conditional expression) to ``roles[...]`` in its source."""
    tree = ast.parse(inspect.getsource(fx_edge._roles))
    values: set[object] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            for part in ast.walk(node.value):
                if isinstance(part, ast.Constant):
                    values.add(part.value)
                elif not isinstance(part, ast.IfExp | ast.Call | ast.Name | ast.Load):
                    raise AssertionError(f"a role computed by {ast.dump(part)}")
    return values


def test_exhaustive_31_role_is_forward_is_role_eq_forward():
    """``refimpl/partition/exhaustive.py:31``, ``n.role == "forward"`` -> ``n.role is
    "forward"``: every role is one of ``_roles``'s string literals, and CPython interns
    string constants that look like identifiers, so each role IS the interned literal and
    identity and equality agree on every node of every graph."""
    assert _role_literals() == set(ROLES)
    for role in ROLES:
        assert role is sys.intern(role), role
    graph = joint_graph(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True))
    for node in graph.nodes:
        assert operator.is_(node.role, "forward") == (node.role == "forward"), node


def test_cost_27_the_fallback_import_never_runs_here():
    """``refimpl/partition/cost.py:27``, ``except ImportError`` -> ``except
    CosmicRayTestingException``: on torch >= 2.12 the guarded import succeeds, so the
    handler's type is never evaluated (on 2.10 and 2.11 the mutant is not equivalent: the
    import fails there and the mutated handler would not catch it)."""
    if not hasattr(symbolic_shapes, "optimization_hint"):
        pytest.skip(f"torch {torch.__version__}: the fallback import runs here, the mutant "
                    "is not equivalent on this release")
    module = importlib.reload(cost)
    assert module.optimization_hint is symbolic_shapes.optimization_hint


# --- seed 146862235's partition survivors shown equivalent (the partition helper, session 2)


def _views_program(x, w, b):
    """Views of inputs (a chain of them, and one of a mutated input's read), views of
    activations and of views of activations, read by the backward."""
    h = (x @ w).cos()
    return (h.t().t().sin() + x.t().t().cos() + h[:, :2].sum() + b.view(-1).sin().sum()
            + (x.reshape(-1).reshape(x.shape) * h).tanh()).sum()


def _graphs():
    args = (torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True),
            torch.randn(3, requires_grad=True))
    return [joint_graph(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True)),
            joint_graph(_views_program, *args)]


def test_fx_edge_174_role_is_forward_is_role_eq_forward():
    """``refimpl/partition/fx_edge.py:174``, ``roles[node] == "forward"`` -> ``roles[node] is
    "forward"``: ``roles`` holds only ``_roles``'s string literals (AST-checked), which
    CPython interns, so identity and equality agree for every node; the JointNode roles
    are those same objects."""
    assert _role_literals() == set(ROLES)
    for role in ROLES:
        assert role is sys.intern(role), role
    for graph in _graphs():
        for node in graph.nodes:
            assert operator.is_(node.role, "forward") == (node.role == "forward"), node


def test_cost_31_the_fallback_constant_is_never_bound_here():
    """``refimpl/partition/cost.py:31``, ``UNBACKED_FALLBACK = 8192`` -> another number: the
    line sits in the ``except ImportError`` branch for torch 2.10 and 2.11; on torch >= 2.12
    the import succeeds, the line never runs and the name is never bound (on the older
    releases the mutant is not equivalent: the fallback sizes unbacked symbols there)."""
    if not hasattr(symbolic_shapes, "optimization_hint"):
        pytest.skip(f"torch {torch.__version__}: the fallback runs here, the mutant is not "
                    "equivalent on this release")
    module = importlib.reload(cost)
    assert not hasattr(module, "UNBACKED_FALLBACK")
    assert module.optimization_hint is symbolic_shapes.optimization_hint


def test_mincut_109_a_view_with_bytes_has_a_forward_owner():
    """``refimpl/partition/mincut.py:109``, ``owner.role == "forward"`` -> ``owner.role >
    "forward"``. The clause is reached only for a view with ``node.bytes > 0`` of the
    forward side (``forward_side``: primals and forward nodes; a primal is no view). Its
    storage owner is the base at the end of its chain of views: a forward node or a primal
    (a forward node reads no tangent). A view whose chain ends at a primal is an input alias
    (``fx_edge._input_aliases``: the same view rule, ``args[0]`` of a view op) and costs 0
    bytes. So the owner is always "forward" there, where ``==`` and ``>`` disagree (of the
    five roles ``>`` "forward" holds for primal, tangent and output only)."""
    assert [r for r in ROLES if (r > "forward") != (r == "forward")] == [
        "primal", "tangent", "forward", "output"]
    seen = 0
    for graph in _graphs():
        for node in graph.forward_side():
            owner = graph.by_name[node.storage]
            if node.view and owner is not node:
                seen += 1
                assert node.role == "forward", node
                assert owner.role in ("forward", "primal"), (node, owner)
                assert (owner.role == "primal") == (node.bytes == 0), (node, owner)
    assert seen >= 6  # views of inputs and of activations were both met


def _fake_versions(op, make):
    """(version before, version after) of a fake tensor that ``op`` runs on, as
    ``mutation.mutated_inputs`` reads them."""
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
    with mode:
        value = mode.from_tensor(make()).clone()
    before = value._version
    with mode, torch.no_grad():
        op(value)
    return before, value._version


#: writes of every kind a graph can make to an input: data, metadata, storage, resize, views
WRITES = {
    "add_": lambda v: v.add_(1), "copy_": lambda v: v.copy_(v.cos()),
    "zero_": lambda v: v.zero_(), "uniform_": lambda v: v.uniform_(),
    "slice": lambda v: v[:, :1].mul_(2), "index_put_": lambda v: v.index_put_(
        (torch.tensor([0]),), torch.ones(3)), "t_": lambda v: v.t_(),
    "squeeze_": lambda v: v.unsqueeze_(0).squeeze_(0), "resize_": lambda v: v.resize_(6),
    "set_": lambda v: v.set_(torch.zeros(2, 3)), "detach_": lambda v: v.detach_(),
    "as_strided_": lambda v: v.as_strided_((3,), (1,)), "read": lambda v: v.sin(),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_mutation_112_a_version_counter_never_falls(write):
    """``refimpl/partition/mutation.py:112``, ``v._version != b`` -> ``v._version > b``:
    ``b`` is the version of a fresh fake copy read just before the graph runs, and the only
    things that move a version counter are in-place ops, which bump it (+1); nothing an
    FX graph can call sets it lower (``_unsafe_set_version_counter`` is no aten op). So
    after any op the version is ``>= b``, and ``!=`` and ``>`` agree: here for writes of
    every kind (data, views, metadata, storage swap, resize) and a plain read."""
    before, after = _fake_versions(WRITES[write], lambda: torch.randn(2, 3))
    assert after >= before, (write, before, after)
    assert (after != before) == (after > before)


def _solve_with_recording(monkeypatch, name: str, module=partitioner
                          ) -> tuple[int, int, list[str]]:
    """Every solver at budgets 0, 0.4 and 1 on the small graph (and, but for ``brute``,
    whose promise is n <= 16, the views graph) with ``module.<name>`` (where the class is
    looked up when an instance is made) replaced by a subclass that records assignment,
    deletion and hashing. Returns how many instances were made, how many ``choose_many``
    runs there were, and what was recorded."""
    calls: list[str] = []
    made: list[object] = []

    class Recording(recording(getattr(module, name), calls)):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(module, name, Recording)
    small, views = _graphs()
    runs = [(small, s) for s in partitioner.SOLVER_MODULES] + [
        (views, s) for s in partitioner.SOLVER_MODULES if s != "brute"]
    for graph, solver in runs:
        plans = partitioner.choose_many(graph, [0.0, 0.4, 1.0], PartitionOptions(solver=solver))
        assert len(plans) == 3
    return len(made), len(runs), calls


def test_problem_32_a_problem_is_never_changed_nor_hashed(monkeypatch):
    """``refimpl/partition/problem.py:32``, ``@dataclass(frozen=True)`` -> ``frozen=False``
    on ``Problem``: ``frozen`` changes only assignment and deletion after ``__init__`` (they
    raise) and ``__hash__`` (generated; without it the class is unhashable). No solver does
    any of the three to a Problem: with a recording subclass in its place, every solver at
    budgets 0, a middle one and 1 records nothing (``hash`` would not even succeed: a
    Problem's ``Bans`` holds sets)."""
    made, runs, calls = _solve_with_recording(monkeypatch, "Problem")
    assert made >= 3 * runs  # one per budget and run at least
    assert calls == []


def test_knapsack_92_no_room_chooses_nothing_and_cuts_the_min_plan():
    """``refimpl/partition/knapsack.py:92`` (no survivor yet; a later seed may draw it),
    ``problem.bound <= bans.low.bytes`` -> ``problem.bound < bans.low.bytes``: the two
    differ only at ``bound == low.bytes``, where the mutant runs the knapsack with
    capacity 0. Every item has bytes > 0
    (``candidates.items`` keeps ``size > 0`` only), so no solver fits one: shown for each
    solver on every list of up to three items of 1-3 bytes and runtimes 0, 1 or 5. With
    nothing kept the mutant cuts with the hard bans alone, which is how ``low`` itself is
    made (``partitioner.bans_and_bounds``): the same cut, shown on real graphs."""
    sizes = [m for n in range(4) for m in itertools.product((1, 2, 3), repeat=n)]
    for solver in sorted(knapsack.SOLVERS):
        for memories in sizes:
            for runtimes in itertools.product((0.0, 1.0, 5.0), repeat=len(memories)):
                assert knapsack.choose_items(solver, list(memories), list(runtimes), 0) == []
    for graph in _graphs():
        bans = partitioner.bans_and_bounds(graph)
        found = candidates.items(graph, bans.hard)
        assert found and all(item.bytes > 0 for item in found), found
        assert cut_of(graph, set(save_set(graph, bans.hard, bans.unsavable))) == bans.low
        for solver in sorted(knapsack.SOLVERS):
            problem_at_min = problem.Problem(graph, bans, bans.low.bytes)
            assert knapsack.solve(problem_at_min, PartitionOptions(solver=solver)) == bans.low


def test_knapsack_90_the_bound_at_max_is_the_max_plans_own_int(monkeypatch):
    """``refimpl/partition/knapsack.py:90`` (seed 194876049), ``bans.high.bytes <=
    problem.bound`` -> ``bans.high.bytes is problem.bound``. The bound never exceeds the
    ``max`` plan's bytes (``budget_bound`` caps it at ``max_bytes``, and ``max_bytes`` is
    ``max(high, low)`` with ``high >= low``: a min cut under more bans is no smaller), so
    ``<=`` holds only at equality; and there the bound IS ``bans.high.bytes``'s int object:
    ``max`` and ``min`` return their first argument on a tie, and ``choose_many`` passes
    ``high`` first to ``max``, ``budget_bound`` ``max_bytes`` first to ``min``. Shown on
    every problem the knapsack solvers meet on real graphs, at budgets whose bound falls
    below the max and at ``1 - 1e-10``, whose bound reaches it (the equality case is met, with
    byte counts past CPython's small-int cache, where ``is`` is not ``==`` by accident)."""
    met: list[problem.Problem] = []
    real_solve = knapsack.solve

    def recording_solve(prob, options):
        met.append(prob)
        return real_solve(prob, options)

    monkeypatch.setattr(knapsack, "solve", recording_solve)
    wide = joint_graph(_program, torch.randn(16, 32, requires_grad=True),
                       torch.randn(32, 64, requires_grad=True))  # bytes past 256
    for graph in [*_graphs(), wide]:
        for solver in sorted(knapsack.SOLVERS):
            partitioner.choose_many(graph, [0.0, 0.3, 0.7, 1 - 1e-10],
                                    PartitionOptions(solver=solver))
    assert met
    at_max_past_small_ints = 0
    for prob in met:
        high = prob.bans.high.bytes
        assert high >= prob.bans.low.bytes and prob.bound <= high, prob
        assert (high <= prob.bound) == (high is prob.bound), (high, prob.bound)
        at_max_past_small_ints += high == prob.bound and high > 256
    assert at_max_past_small_ints


# --- seed 4198725056's partition survivors shown equivalent (the partition helper, session 3)


def _mutated_method(method, pick, change):
    """``method`` compiled from refimpl's own source with one AST node changed: ``pick``
    chooses the nodes (exactly one must match) and ``change`` edits it in place."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(method)))
    found = [node for node in ast.walk(tree) if pick(node)]
    assert len(found) == 1, [ast.unparse(node) for node in found]
    change(found[0])
    namespace: dict = {}
    exec(compile(tree, "<mutant>", "exec"), vars(inspect.getmodule(method)).copy(), namespace)
    return namespace[method.__name__]


def _flows_agree(mutant_class, original_class=mincut.Network) -> None:
    """The mutant's flow and source side equal the original's on every network of
    :func:`_networks`."""
    for (net, s, t), (twin, _, _) in zip(_networks(original_class), _networks(mutant_class)):
        assert mincut.max_flow_source_side(net, s, t) == \
            mincut.max_flow_source_side(twin, s, t)


def _mutated_augment():
    """``Network.augment`` with the level test ``==`` made ``>=`` (mincut.py:71's mutant),
    compiled from refimpl's own source so that the rest of the method is today's."""
    return _mutated_method(
        mincut.Network.augment,
        lambda c: isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.Eq)
        and ast.unparse(c.left).startswith("level"),
        lambda c: setattr(c, "ops", [ast.GtE()]))


class _Checked(mincut.Network):
    """A network whose ``augment`` asserts Dinic's level invariant at every step: an edge
    with capacity left never skips a level forward (``level[to] <= level[u] + 1``)."""

    def augment(self, s, t, level, nxt):
        for u, edges in enumerate(self.out):
            if level[u] >= 0:
                for e in edges:
                    assert self.cap[e] <= 0 or level[self.to[e]] <= level[u] + 1, (u, e)
        return super().augment(s, t, level, nxt)


def _networks(cls):
    """Every network on 4 vertices (source 0, sink 3) with each of the 12 directed edges of
    capacity 0 or 1 (4,096), then 300 seeded ones on 6 vertices with capacities 0-3."""
    pairs = [(u, v) for u in range(4) for v in range(4) if u != v]
    for caps in itertools.product((0, 1), repeat=len(pairs)):
        net = cls(4)
        for (u, v), c in zip(pairs, caps):
            net.add_edge(u, v, c)
        yield net, 0, 3
    rng = random.Random(4198725056)
    for _ in range(300):
        net = cls(6)
        for u, v in itertools.permutations(range(6), 2):
            if rng.random() < 0.5:
                net.add_edge(u, v, rng.randint(0, 3))
        yield net, 0, 5


def test_mincut_71_level_ge_is_level_eq():
    """``refimpl/partition/mincut.py:71``, ``level[self.to[e]] == level[u] + 1`` ->
    ``>=``: in a Dinic phase every edge with capacity left satisfies ``level[to] <=
    level[u] + 1`` (BFS levels; augmenting only adds capacity to edges that go one level
    BACK; a dead end's level becomes -1, below any), so ``>=`` holds exactly where ``==``
    does. Shown: the invariant at every augment of 4,396 networks (all 4,096 on 4 vertices
    with unit capacities, 300 seeded on 6), and the mutant's flow and cut side equal the
    original's on each."""
    _flows_agree(type("Mutant", (mincut.Network,), {"augment": _mutated_augment()}), _Checked)


def test_region_57_role_ge_forward_is_role_eq_forward_off_placeholders():
    """``refimpl/partition/region.py:57``, ``n.role == "forward"`` -> ``n.role >=
    "forward"``: of the five roles, ``>=`` "forward" adds primal, tangent and output, and
    ``fx_edge._roles`` gives those only to placeholder and output nodes (whose JointNode op
    is "placeholder"/"output", AST- and graph-checked), which the same condition drops
    (``n.op not in ("placeholder", "output")``): both select the same nodes of every
    graph."""
    assert _role_literals() == set(ROLES)
    assert [r for r in ROLES if r >= "forward"] == ["primal", "tangent", "forward", "output"]
    ops_of = {"primal": {"placeholder"}, "tangent": {"placeholder"}, "output": {"output"}}
    keep = lambda n, test: test(n.role) and n.op not in ("placeholder", "output")
    for joint in _graphs():
        for node in joint.nodes:
            assert node.op in ops_of.get(node.role, {node.op}), node
            assert keep(node, lambda r: r == "forward") == keep(node, lambda r: r >= "forward")
    assert "forward" in inspect.getsource(region.effective_budget)


def _split(joint, num_fwd_outputs, static):
    """Forward and backward code of refimpl's partition of a copy of ``joint``, with
    ``static_lifetime_input_indices=static``."""
    modules = fx_edge.partition_fn(copy.deepcopy(joint), None, num_fwd_outputs=num_fwd_outputs,
                                   static_lifetime_input_indices=static,
                                   options=PartitionOptions(memory_budget=0.5))
    return [m.code for m in modules]


def test_fx_edge_236_static_inputs_change_no_graph():
    """``refimpl/partition/fx_edge.py:236``, ``static_lifetime_input_indices or ()`` ->
    ``... and ()``: on the calls AOTAutograd makes (always a list,
    ``fw_metadata.static_input_indices``) the two differ only for a non-empty list, where
    the mutant hands torch's ``_extract_fwd_bwd_modules`` no static nodes. torch reads those
    nodes only to exempt static inputs from activation quantization, a pass that runs only
    when inductor's ``post_grad_fusion_options`` names ``activation_quantization_aten_pass``
    (unset by default, checked here). Shown: every primal marked static, or none, gives the
    same forward and backward code, on programs with input views, a mutated input's read
    and saved activations. (A direct ``partition_fn`` call that passes None, which no
    compile path makes, is where the mutant differs: it iterates None.)"""
    from torch._inductor import config as inductor_config

    assert "activation_quantization_aten_pass" not in inductor_config.post_grad_fusion_options
    args = (torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True),
            torch.randn(3, requires_grad=True))
    traced = [trace_joint(_program, torch.randn(3, 4, requires_grad=True),
                                  torch.randn(4, 5, requires_grad=True)),
              trace_joint(_views_program, *args)]
    for joint, num_fwd_outputs in traced:
        primals = [n for n in joint.graph.nodes
                   if n.op == "placeholder" and "tangent" not in n.name]
        every = list(range(len(primals)))
        assert len(every) >= 2
        assert _split(joint, num_fwd_outputs, every) == _split(joint, num_fwd_outputs, [])


def test_knapsack_36_no_item_has_a_runtime_at_or_below_zero():
    """``refimpl/partition/knapsack.py:36``, ``r < 0`` -> ``r <= 0`` (the mutant refuses a
    zero runtime): the knapsack's only caller in refimpl, ``knapsack.solve``, passes the
    runtimes of ``candidates.items``, which keeps only nodes with ``runtime > 0`` (the
    filter ``node.runtime <= 0``, AST-checked), so no call the partitioner makes holds a
    zero runtime, and the two checks raise on the same calls. Shown on real graphs under
    both estimators' units (the items of the hard bans, the largest candidate list)."""
    callers = [path for path in pathlib.Path(
        importlib.import_module("refimpl").__path__[0]).rglob("*.py")
        if "choose_items(" in path.read_text() or "knapsack.dp(" in path.read_text()]
    assert sorted(p.name for p in callers) == ["knapsack.py"], callers
    assert "node.runtime <= 0" in inspect.getsource(candidates.items)
    for joint in _graphs():
        found = candidates.items(joint, partitioner.bans_and_bounds(joint).hard)
        assert found and all(item.runtime > 0 for item in found), found
        knapsack._check([i.bytes for i in found], [i.runtime for i in found], 0)


# --- seed 3620645976's partition survivors shown equivalent (the partition helper, session 4)


def test_problem_21_bans_are_never_changed_nor_hashed(monkeypatch):
    """``refimpl/partition/problem.py:21``, ``@dataclass(frozen=True)`` -> ``frozen=False``
    on ``Bans``: ``frozen`` changes only assignment and deletion after ``__init__`` and the
    generated ``__hash__``. With a recording subclass in its place, every solver at budgets
    0, a middle one and 1 does none of the three to the Bans it makes (``hash`` could not
    succeed anyway: a Bans holds sets)."""
    made, runs, calls = _solve_with_recording(monkeypatch, "Bans")
    assert made >= runs  # one Bans per choose_many at least
    assert calls == []


def test_options_26_options_are_never_changed_nor_hashed(monkeypatch):
    """``refimpl/partition/options.py:26``, ``@dataclass(frozen=True)`` -> ``frozen=False``
    on ``PartitionOptions``: ``__post_init__`` stores its normalised numbers with
    ``object.__setattr__`` (which works on either), and nothing else assigns, deletes or
    hashes an options object: with a recording subclass as the options that ``compile`` and
    ``explain`` build (every solver and estimator, forward and backward run), and handed to
    ``choose_many`` and ``memory_efficient_fusion``, none of the three is recorded. (A user
    who assigns to an options object would see the difference; refimpl never does.)"""
    from refimpl.partition import api

    calls: list[str] = []
    Recording = recording(PartitionOptions, calls)
    monkeypatch.setattr(api, "PartitionOptions", Recording)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    for solver, estimator in itertools.product(partitioner.SOLVER_MODULES, ("flops", "profile")):
        torch._dynamo.reset()
        api.compile(_program, memory_budget=0.5, solver=solver,
                    runtime_estimator=estimator)(x, w).backward()
        assert api.explain(_program, x, w, memory_budget=0.0, solver=solver,
                           runtime_estimator=estimator).solver == solver
    small, _ = _graphs()
    assert len(partitioner.choose_many(small, [0.0, 0.5, 1.0], Recording(solver="exact"))) == 3
    api.memory_efficient_fusion(_program, Recording(memory_budget=0.5))(x, w).backward()
    assert calls == []


def test_partitioner_85_budget_eq_one_is_budget_ge_one():
    """``refimpl/partition/partitioner.py:85`` (``:81`` on af3c9df), ``budget == 1`` ->
    ``budget >= 1`` in ``_solve``: every budget that reaches it passed ``choose_many``'s
    check (each in [0, 1]; NaN refused too), and on [0, 1] the two tests agree; a budget
    above 1 never reaches ``_solve``."""
    small, _ = _graphs()
    for bad in (1.0000001, 1.5, 2, float("inf"), float("nan"), -0.1):
        with pytest.raises(ValueError, match="budgets"):
            partitioner.choose_many(small, [0.5, bad], PartitionOptions())
    for budget in [i / 64 for i in range(65)]:
        assert (budget == 1) == (budget >= 1), budget


def test_candidates_82_role_is_forward_is_role_eq_forward():
    """``refimpl/partition/candidates.py:82``, ``n.role == "forward"`` -> ``n.role is
    "forward"`` in ``hard_bans``: as for ``exhaustive.py:31`` above, every role is one of
    ``_roles``'s interned string literals, so identity and equality agree on every node of
    every graph (here on graphs with views of inputs and of activations), and ``hard_bans``
    is the same set under both."""
    assert _role_literals() == set(ROLES)
    for graph in _graphs():
        for node in graph.forward_side():
            assert operator.is_(node.role, "forward") == (node.role == "forward"), node
        mutant = {n.name for n in graph.forward_side() if operator.is_(n.role, "forward")
                  and (n.random or n.mutable)}
        assert mutant == {n.name for n in graph.forward_side() if n.role == "forward"
                          and (n.random or n.mutable)}


#: the roles ``JointGraph.forward_side`` keeps (graph.py), the only nodes these filters see
FORWARD_SIDE_ROLES = ("primal", "forward")


def test_exhaustive_31_and_candidates_82_role_le_forward_is_role_eq_forward():
    """``refimpl/partition/exhaustive.py:31`` (the candidates of ``solver="brute"``) and
    ``refimpl/partition/candidates.py:82`` (``hard_bans``), ``n.role == "forward"`` ->
    ``n.role <= "forward"``: both filter ``graph.forward_side()``, whose nodes have role
    "primal" or "forward" only (checked on graphs with views of inputs and of activations),
    and on those two ``<=`` selects exactly what ``==`` selects ("primal" sorts after
    "forward"). Of the five roles only "backward" would tell them apart, and it never
    reaches either filter."""
    assert [r for r in ROLES if (r <= "forward") != (r == "forward")] == ["backward"]
    for role in FORWARD_SIDE_ROLES:
        assert (role <= "forward") == (role == "forward"), role
    for graph in _graphs():
        side = graph.forward_side()
        assert {n.role for n in side} == set(FORWARD_SIDE_ROLES)
        assert [n for n in side if n.role <= "forward"] == [
            n for n in side if n.role == "forward"]


def test_mincut_108_owner_ne_node_is_owner_is_not_node():
    """``refimpl/partition/mincut.py:108``, ``owner is not node`` -> ``owner != node``:
    ``JointNode`` is a dataclass, so ``!=`` compares fields, among them ``name``; the owner
    is looked up by name in the same graph (``graph.by_name[node.storage]``), whose names
    are unique, so two nodes of one graph are equal exactly when they are the same object.
    (``-> owner is node`` and ``-> owner == node`` are not equivalent: they let a view of
    an activation save itself.)"""
    for graph in _graphs():
        nodes = graph.forward_side()
        assert len({n.name for n in graph.nodes}) == len(graph.nodes)
        for a, b in itertools.product(nodes, nodes):
            assert operator.ne(a, b) == (a is not b), (a.name, b.name)
        for node in nodes:
            owner = graph.by_name[node.storage]
            assert operator.ne(owner, node) == (owner is not node), node.name


# --- seed 553120032's partition survivors shown equivalent (partition helper A, round 6)


def test_candidates_124_role_is_forward_is_role_eq_forward():
    """``refimpl/partition/candidates.py:124``, ``n.role == "forward"`` -> ``n.role is
    "forward"`` in ``runtime_bans``: as for ``candidates.py:82``, every role is one of
    ``_roles``'s interned string literals, so identity and equality agree on every node,
    and ``runtime_bans`` selects the same nodes under both."""
    assert _role_literals() == set(ROLES)
    for role in ROLES:
        assert role is sys.intern(role), role
    for graph in _graphs():
        for node in graph.forward_side():
            assert operator.is_(node.role, "forward") == (node.role == "forward"), node
        assert candidates.runtime_bans(graph)  # the filter selects something here


def test_candidates_138_role_gt_forward_is_role_ne_forward():
    """``refimpl/partition/candidates.py:138``, ``node.role != "forward"`` -> ``node.role >
    "forward"`` in ``items``: the loop runs over ``graph.forward_side()``, whose roles are
    "primal" and "forward" only; "primal" sorts after "forward", so on both roles ``>``
    answers as ``!=``. (Only "backward" would tell them apart, and it never reaches it.)"""
    assert [r for r in ROLES if (r > "forward") != (r != "forward")] == ["backward"]
    for graph in _graphs():
        side = graph.forward_side()
        assert {n.role for n in side} == set(FORWARD_SIDE_ROLES)
        assert [n for n in side if n.role > "forward"] == [
            n for n in side if n.role != "forward"]


def _primal_kinds_program(x, w, n):
    """Inputs of every kind a primal can be: a tensor read inside a plain checkpoint
    region and a selective one, and (with ``x`` marked dynamic) a symbolic size."""
    policy = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts,
                               [torch.ops.aten.mm.default])
    plain = torch.utils.checkpoint.checkpoint(lambda a: (a @ w).cos(), x, use_reentrant=False)
    selective = torch.utils.checkpoint.checkpoint(lambda a: (a @ w).sin(), x,
                                                  use_reentrant=False, context_fn=policy)
    return (plain * selective * n).sum() + x.shape[0]


def test_candidates_88_role_ge_forward_adds_no_unsavable_primal():
    """``refimpl/partition/candidates.py:88``, ``n.role == "forward"`` -> ``n.role >=
    "forward"`` in ``unsavable``: of the forward side's two roles, ``>=`` adds "primal".
    A primal is a tensor or a symbol (AOTAutograd flattens the inputs into those; any other
    value is a constant of the graph), which ``cost.is_savable`` accepts, and it carries no
    recompute policy (torch tags the ops a checkpoint region runs, never a placeholder), so
    no primal meets the filter's condition and both versions give the same set. Shown on
    graphs with tensor primals read inside plain and selective checkpoint regions, a
    symbolic-size primal, and views of inputs."""
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
    torch._dynamo.mark_dynamic(x, 0)
    regions = joint_graph(_primal_kinds_program, x, w, torch.randn(3, requires_grad=True))
    graphs = [*_graphs(), regions]
    assert any(n.is_sym for n in regions.nodes if n.role == "primal")
    assert any(n.must_recompute for n in regions.nodes)  # the regions reached the graph
    for graph in graphs:
        side = graph.forward_side()
        assert {n.role for n in side} == set(FORWARD_SIDE_ROLES)
        for banned in (set(), candidates.hard_bans(graph)):
            mutant = {n.name for n in side if n.role >= "forward" and (
                not n.savable or (n.must_recompute and n.name not in banned))}
            assert mutant == candidates.unsavable(graph, banned)
        assert all(n.savable and not n.must_recompute for n in side if n.role == "primal")


#: the ops an FX node of a graph's node list can have (torch.fx's legal ops but "root",
#: which only the graph's sentinel carries; the sentinel is never in ``graph.nodes``)
FX_NODE_OPS = ("placeholder", "call_method", "call_module", "call_function", "get_attr",
               "output")


def test_fx_edge_39_and_107_op_ge_placeholder_is_op_eq_placeholder():
    """``refimpl/partition/fx_edge.py:39`` (``_is_tangent``) and ``:107``
    (``_input_aliases``), ``node.op == "placeholder"`` -> ``node.op >= "placeholder"``:
    both test the nodes of ``gm.graph.nodes``, whose ``op`` is one of torch.fx's legal
    ops; of them only "root" sorts after "placeholder", and "root" is the op of the
    graph's sentinel alone, which ``graph.nodes`` never yields. So ``>=`` selects exactly
    the placeholders, on every node of every graph (checked on joint graphs that hold
    every op kind AOTAutograd emits)."""
    from torch.fx.node import _legal_ops

    assert set(_legal_ops) == {*FX_NODE_OPS, "root"}
    assert [op for op in _legal_ops if (op >= "placeholder") != (op == "placeholder")] \
        == ["root"]
    args = (torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True))
    joint, _ = trace_joint(_program, *args)
    ops = {node.op for node in joint.graph.nodes}
    assert "root" not in ops and ops <= set(FX_NODE_OPS), ops
    for node in joint.graph.nodes:
        assert (node.op >= "placeholder") == (node.op == "placeholder"), node


def test_mincut_95_level_ge_one_is_level_ge_zero_off_the_source():
    """``refimpl/partition/mincut.py:95``, ``d >= 0`` -> ``d >= 1`` in
    ``max_flow_source_side``: BFS gives level 0 to the source alone, so the two source
    sides differ only by the source vertex, which ``min_cut_saves`` numbers
    ``2 * len(side)``, past every node's vertices ``2i`` and ``2i + 1`` that it reads. So
    the saved names agree (checked on every network of the graphs below, with the source
    side computed both ways)."""
    for graph in _graphs():
        side = graph.forward_side()
        banned = candidates.hard_bans(graph) | candidates.runtime_bans(graph)
        for ban in (set(), banned):
            net = mincut.Network(2 * len(side) + 2)
            index = {n.name: i for i, n in enumerate(side)}
            source, sink = 2 * len(side), 2 * len(side) + 1
            for name in graph.read_by_backward():
                net.add_edge(2 * index[name] + 1, sink, 10**9)
            for i, node in enumerate(side):
                net.add_edge(2 * i, 2 * i + 1, node.bytes if node.savable else 10**9)
                if node.role == "primal" or node.name in ban:
                    net.add_edge(source, 2 * i, 10**9)
                for user in node.users:
                    if user in index:
                        net.add_edge(2 * i + 1, 2 * index[user], 10**9)
            _, reach = mincut.max_flow_source_side(net, source, sink)
            level = net.levels(source)
            assert [v for v, d in enumerate(level) if d == 0] == [source]
            at_least_one = {v for v, d in enumerate(level) if d >= 1}
            assert reach - at_least_one == {source}
            count = len(side)
            assert [i for i in range(count) if 2 * i in reach and 2 * i + 1 not in reach] \
                == [i for i in range(count) if 2 * i in at_least_one
                    and 2 * i + 1 not in at_least_one]


def test_region_52_len_ne_one_is_len_gt_one_past_the_empty_case():
    """``refimpl/partition/region.py:52``, ``len(budgets) > 1`` -> ``len(budgets) != 1`` in
    ``effective_budget``: the line runs only after ``if not budgets: return``, so
    ``len(budgets) >= 1`` there, where ``!= 1`` and ``> 1`` agree (checked on every length
    the line can see up to 64, and on the source's order of the two tests)."""
    for length in range(1, 65):
        assert (length != 1) == (length > 1), length
    source = inspect.getsource(region.effective_budget)
    assert source.index("if not budgets:") < source.index("if len(budgets) > 1:")


def test_candidates_38_an_item_is_never_changed_nor_hashed(monkeypatch):
    """``refimpl/partition/candidates.py:38``, ``@dataclass(frozen=True)`` -> ``frozen=False``
    on the knapsack's ``Item``: ``frozen`` changes only assignment and deletion after
    ``__init__`` and the generated ``__hash__``. ``Item`` is internal (made by
    ``candidates.items``, read by the knapsack solvers); with a recording subclass in its
    place, every solver at budgets 0, a middle one and 1 makes items and does none of the
    three to them."""
    made, _, calls = _solve_with_recording(monkeypatch, "Item", candidates)
    assert made > 0
    assert calls == []


def test_cut_19_a_cut_is_never_changed_nor_hashed(monkeypatch):
    """``refimpl/partition/cut.py:19``, ``@dataclass(frozen=True)`` -> ``frozen=False`` on
    ``Cut``: ``Cut`` is internal (made by ``cut.cut_of``, read by the solvers and
    ``partitioner``); with a recording subclass in its place, every solver at budgets 0, a
    middle one and 1 makes cuts and never assigns to, deletes from nor hashes one."""
    made, runs, calls = _solve_with_recording(monkeypatch, "Cut", cut)
    assert made >= runs
    assert calls == []


def test_fx_node_ops_are_interned_literals_so_is_and_eq_agree():
    """``node.op == "<op>"`` -> ``node.op is "<op>"`` (and ``!=`` -> ``is not``) on the fx
    nodes of a joint graph: ``refimpl/partition/cost.py:91`` and ``runtime.py:151``
    (``!= "call_function"``), ``fx_edge.py:39``, ``:80``, ``:107``, ``:235``
    (``== "placeholder"``), ``:84`` (``== "output"``), ``:157`` (``== "call_function"``).
    fx's graph builders set ``op`` from string literals of fx's own source (make_fx's
    proxies, ``node_copy`` in the CSE pass), which CPython interns, so every node's
    ``op`` is the interned object of its value and identity agrees with equality for every
    legal op, on joint graphs (after refimpl's CSE stage too) of programs with views of
    inputs and of activations. (A string made at run time would not be interned: the
    device-type comparison of ``runtime.py:52`` is not equivalent, and a property kills it.)"""
    from torch.fx.node import _legal_ops

    views_args = (torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True),
                  torch.randn(3, requires_grad=True))
    joints = [trace_joint(_program, torch.randn(3, 4, requires_grad=True),
                                  torch.randn(4, 5, requires_grad=True))[0],
              trace_joint(_views_program, *views_args)[0]]
    graphs = [j.graph for j in joints] + [fx_graph_cse(j.graph) for j in joints]
    ops = [node.op for graph in graphs for node in graph.nodes]
    assert {"placeholder", "call_function", "output"} <= set(ops), set(ops)
    for op in ops:
        assert op is sys.intern(op), op
        for literal in _legal_ops:
            assert operator.is_(op, literal) == (op == literal), (op, literal)
            assert operator.is_not(op, literal) == (op != literal), (op, literal)


def test_roles_are_interned_literals_so_is_and_eq_agree():
    """``role == "<role>"`` -> ``role is "<role>"`` (and ``!=`` -> ``is not``) wherever the
    partitioner tests a node's role (``fx_edge._roles``'s values, ``JointNode.role``): every
    role is one of ``_roles``'s string literals (AST-checked), which CPython interns, and the
    JointNode roles are those same objects. So for every node of joint graphs with views of
    inputs and of activations, and for every role literal, identity agrees with equality.
    (Not so for a string made at run time: the policy names are not registered here.)"""
    assert _role_literals() == set(ROLES)
    roles = [node.role for graph in _graphs() for node in graph.nodes]
    joint, _ = trace_joint(_program, torch.randn(3, 4, requires_grad=True),
                                   torch.randn(4, 5, requires_grad=True))
    fx_roles = list(fx_edge._roles(joint).values())
    assert set(roles) == set(fx_roles) == set(ROLES), set(roles)
    for role in roles + fx_roles:
        assert role is sys.intern(role), role
        for literal in ROLES:
            assert operator.is_(role, literal) == (role == literal), (role, literal)
            assert operator.is_not(role, literal) == (role != literal), (role, literal)


def test_runtime_196_name_le_flops_is_name_eq_flops():
    """``refimpl/partition/runtime.py:196``, ``name == "flops"`` -> ``name <= "flops"`` in
    ``runtime_estimator``: its one caller (``fx_edge.prepare``, AST-checked) passes
    ``options.runtime_estimator``, which ``PartitionOptions`` checks is one of
    ``RUNTIME_ESTIMATORS`` (an unknown name is refused); of those, only "flops" is
    ``<= "flops"``, so the two tests pick the same estimator for every name that arrives."""
    from refimpl.partition.options import RUNTIME_ESTIMATORS

    assert set(RUNTIME_ESTIMATORS) == {"flops", "profile"}
    for name in RUNTIME_ESTIMATORS:
        assert (name <= "flops") == (name == "flops"), name
    with pytest.raises(ValueError, match="runtime_estimator"):
        PartitionOptions(runtime_estimator="fflops")
    calls = [node for path in pathlib.Path(fx_edge.__file__).parent.glob("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call)
             and getattr(node.func, "attr", "") == "runtime_estimator"]
    assert [ast.unparse(c.args[0]) for c in calls] == ["options.runtime_estimator"]


def test_fx_edge_174_role_ge_forward_prices_only_what_costs_nothing():
    """``refimpl/partition/fx_edge.py:174``, ``roles[node] == "forward"`` -> ``roles[node] >=
    "forward"`` when pricing a node: besides "forward", the roles that sort at or above it are
    "primal", "tangent" and "output", carried by placeholder and output nodes only, and both
    estimators price a node that is not a call_function at 0.0; so every node's runtime is
    the same under both tests (shown on joint graphs with views, each estimator)."""
    assert sorted(r for r in ROLES if r >= "forward") == ["forward", "output", "primal",
                                                          "tangent"]
    views_args = (torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True),
                  torch.randn(3, requires_grad=True))
    for fn, args in ((_program, (torch.randn(3, 4, requires_grad=True),
                                 torch.randn(4, 5, requires_grad=True))),
                     (_views_program, views_args)):
        joint, _ = trace_joint(fn, *args)
        roles = fx_edge._roles(joint)
        for name in ("flops", "profile"):
            estimate = runtime.runtime_estimator(name, 1)
            for node, role in roles.items():
                if role != "forward" and role >= "forward":
                    assert node.op in ("placeholder", "output"), (node, role)
                    assert estimate(node) == 0.0, (name, node)


def test_fx_edge_174_role_le_forward_prices_backward_nodes_nobody_reads():
    """``refimpl/partition/fx_edge.py:174`` (seed 2154936782), ``roles[node] == "forward"``
    -> ``roles[node] <= "forward"`` when pricing a node: of the five roles it adds
    "backward" only, so the mutant gives backward nodes a runtime. No stage reads one: the
    candidates, the cut's cost and every solver look at forward-side nodes. Shown by giving
    every backward node of joint graphs (with views) a large runtime and planning with each
    solver at budgets 0, 0.4 and 1 (``brute`` on the small graph only): the plans are
    equal, recompute costs included."""
    assert [r for r in ROLES if (r <= "forward") != (r == "forward")] == ["backward"]
    small, views = _graphs()
    for graph in (small, views):
        priced = JointGraph([dataclasses.replace(n, runtime=1e9) if n.role == "backward"
                             else n for n in graph.nodes], graph.num_fwd_outputs,
                            graph.bw_outputs)
        assert any(n.role == "backward" for n in graph.nodes)
        for solver in partitioner.SOLVER_MODULES:
            if solver == "brute" and graph is views:
                continue
            options = PartitionOptions(solver=solver)
            budgets = [0.0, 0.4, 1.0]
            assert partitioner.choose_many(priced, budgets, options) == \
                partitioner.choose_many(graph, budgets, options), solver


def test_graph_31_every_joint_node_is_built_by_keyword():
    """``refimpl/partition/graph.py:31`` (seed 2154936782), ``@dataclass(kw_only=True)`` ->
    ``kw_only=False`` on ``JointNode``: ``kw_only`` changes only whether ``__init__`` also
    takes its fields by position (and the order rules of defaults, which ``JointNode`` has
    none of). Every ``JointNode(...)`` call in refimpl passes keywords only (AST-checked
    over the package), so both classes receive the same calls and build equal nodes: shown
    by rebuilding a real graph's nodes with a ``kw_only=False`` twin of the class."""
    calls = []
    for path in pathlib.Path(importlib.import_module("refimpl").__path__[0]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "JointNode":
                calls.append((path.name, node))
    assert [name for name, _ in calls] == ["fx_edge.py"]
    assert all(not call.args and all(k.arg for k in call.keywords) for _, call in calls)
    fields = [f.name for f in dataclasses.fields(JointNode)]
    twin = dataclasses.make_dataclass("JointNode", fields, kw_only=False)
    for graph in _graphs():
        for n in graph.nodes:
            values = {f: getattr(n, f) for f in fields}
            assert dataclasses.astuple(twin(**values)) == dataclasses.astuple(n)


# --- seed 2725162462's partition survivors shown equivalent (after its first run)


def test_mincut_52_any_negative_level_marks_an_unreached_vertex():
    """``refimpl/partition/mincut.py:52``, the BFS's "unreached" level ``-1`` -> ``-2``: a
    level is only ever read as ``< 0`` (unreached), ``>= 0`` (the cut's source side) or
    ``== level[u] + 1`` for a vertex ``u`` the search stands on (level >= 0, so the right
    side is >= 1), and a dead end is set to ``-1``: every negative value means the same.
    Shown: the mutant's flow and source side equal the original's on 4,396 networks (all
    4,096 on 4 vertices with unit capacities, 300 seeded on 6)."""
    levels = _mutated_method(
        mincut.Network.levels,
        lambda n: isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub),
        lambda n: setattr(n.operand, "value", 2))
    _flows_agree(type("Mutant", (mincut.Network,), {"levels": levels}))


def test_mincut_67_the_sink_is_the_last_vertex():
    """``refimpl/partition/mincut.py:67``, the augmenting search's ``while u != t`` ->
    ``while u < t``: ``min_cut_saves`` numbers the sink ``2 * len(side) + 1``, the last of
    its ``2 * len(side) + 2`` vertices, so no vertex lies past it and the two loop tests
    agree. Shown: the sink of every network the planner solves (each solver and budget on
    the graphs below) is its last vertex, and the mutant's flow and source side equal the
    original's on 4,396 networks whose sink is their last vertex."""
    seen = []
    original = mincut.max_flow_source_side

    def recording_max_flow(net, s, t):
        seen.append((len(net.out), t))
        return original(net, s, t)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mincut, "max_flow_source_side", recording_max_flow)
        for graph in _graphs():
            for solver in sorted(knapsack.SOLVERS):
                partitioner.choose_many(graph, [0.0, 0.4, 1.0], PartitionOptions(solver=solver))
    assert seen and all(t == vertices - 1 for vertices, t in seen), seen
    augment = _mutated_method(
        mincut.Network.augment,
        lambda n: isinstance(n, ast.While) and isinstance(n.test, ast.Compare)
        and isinstance(n.test.ops[0], ast.NotEq),
        lambda n: setattr(n.test, "ops", [ast.Lt()]))
    assert all(t == len(net.out) - 1 for net, _, t in _networks(mincut.Network))
    _flows_agree(type("Mutant", (mincut.Network,), {"augment": augment}))


def test_knapsack_51_the_dp_front_is_the_same_without_the_runtime_tie_break():
    """``refimpl/partition/knapsack.py:51``, the DP's sort key ``(mem, -runtime)`` ->
    ``(mem, -mem)`` (memory alone, Python's sort being stable): the front keeps a state only
    if its runtime beats the last kept one, so the state it returns is the first, in sorted
    order, of those with the greatest runtime; both keys put the least memory first and, at
    equal memory and runtime, keep the list's own order. Shown on a whole small domain: 1 to
    4 items of 0 to 2 bytes and runtimes 0 to 2, every capacity 0 to 5: the same choice."""
    mutant = _mutated_method(
        knapsack.dp,
        lambda n: isinstance(n, ast.Tuple) and ast.unparse(n) == "(s[0], -s[1])",
        lambda n: setattr(n.elts[1].operand.slice, "value", 0))
    cases = 0
    for count in range(1, 5):
        for memories in itertools.product(range(3), repeat=count):
            for runtimes in itertools.product((0.0, 1.0, 2.0), repeat=count):
                for capacity in range(6):
                    cases += 1
                    assert mutant(list(memories), list(runtimes), capacity) == \
                        knapsack.dp(list(memories), list(runtimes), capacity), \
                        (memories, runtimes, capacity)
    assert cases == 44_280


# --- seed 937988035's partition survivors shown equivalent (after its first run)


def test_candidates_124_role_ge_forward_adds_only_primals_which_no_plan_recomputes(
        monkeypatch):
    """``refimpl/partition/candidates.py:124``, ``n.role == "forward"`` -> ``n.role >=
    "forward"`` in ``runtime_bans``: it reads the forward side only (roles ``primal`` and
    ``forward``), and of those ``>= "forward"`` adds the primals: graph inputs, which a
    plan never recomputes, so banning their recomputation bans nothing. Shown: on every
    graph below the mutant's bans differ from the original's by primals alone, and with
    the mutant in its place every solver makes the same plans at budgets 0, 0.3, 0.7 and
    1."""
    assert _role_literals() == set(ROLES)
    assert [r for r in ("primal", "forward") if r >= "forward"] == ["primal", "forward"]
    mutant = _mutated_method(
        candidates.runtime_bans,
        lambda c: isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.Eq)
        and ast.unparse(c.left) == "n.role",
        lambda c: setattr(c, "ops", [ast.GtE()]))
    added = set()
    for graph in _graphs():
        extra = mutant(graph) - candidates.runtime_bans(graph)
        assert all(graph.by_name[name].role == "primal" for name in extra), extra
        added |= extra
    assert added  # the mutant does ban primals here: the plans below are the test
    runs = [(k, solver) for k in range(len(_graphs()))
            for solver in sorted(partitioner.SOLVER_MODULES)
            if k == 0 or solver != "brute"]  # brute enumerates the small graph only

    def plans():
        graphs = _graphs()
        return [partitioner.choose_many(graphs[k], [0.0, 0.3, 0.7, 1.0],
                                        PartitionOptions(solver=solver)) for k, solver in runs]

    expected = plans()
    monkeypatch.setattr(candidates, "runtime_bans", mutant)
    assert plans() == expected


def test_partitioner_39_a_span_floor_of_one_gives_the_same_bound():
    """``refimpl/partition/partitioner.py:39``, ``span = max(max_bytes - min_bytes, 0)`` ->
    ``max(..., 1)``: the two differ only where ``max_bytes <= min_bytes``, and there the
    bound is clamped to ``max_bytes`` either way (``min(max_bytes, floor(min + ...))`` with
    ``floor(min + ...) >= min >= max``). Shown on every pair of byte counts 0-40 and every
    budget of a 0.05 grid, with the mutant compiled from refimpl's own source."""
    mutant = _mutated_method(
        partitioner.budget_bound,
        lambda n: isinstance(n, ast.Call) and ast.unparse(n.func) == "max"
        and ast.unparse(n.args[1]) == "0",
        lambda n: setattr(n.args[1], "value", 1))
    budgets = [round(0.05 * i, 2) for i in range(21)]
    for lo, hi, budget in itertools.product(range(41), range(41), budgets):
        assert mutant(lo, hi, budget) == partitioner.budget_bound(lo, hi, budget), \
            (lo, hi, budget)


def test_runtime_151_call_function_is_the_least_node_op():
    """``refimpl/partition/runtime.py:151``, ``node.op != "call_function"`` -> ``node.op >
    "call_function"``: of torch.fx's legal node ops every other one sorts after
    ``"call_function"``, so ``>`` holds exactly where ``!=`` does; shown on fx's list of
    legal ops, which every node of a joint graph's op is one of."""
    from torch.fx.node import _legal_ops

    assert "call_function" in _legal_ops
    assert all((op > "call_function") == (op != "call_function") for op in _legal_ops)
    joint = trace_joint(_program, torch.randn(3, 4, requires_grad=True),
                        torch.randn(4, 5, requires_grad=True))[0]
    assert {node.op for node in joint.graph.nodes} <= set(_legal_ops)


def test_knapsack_38_no_solve_gives_the_knapsack_a_capacity_below_one(monkeypatch):
    """``refimpl/partition/knapsack.py:38``, ``capacity < 0`` -> ``capacity == 0`` in the
    solvers' argument check: the two differ only on a capacity of 0 (the mutant raises) or
    below 0 (it does not). ``knapsack.solve`` returns the ``min`` plan when the bound leaves
    no room above it (``bound <= low.bytes``), so the capacity it passes, ``bound -
    low.bytes``, is at least 1. Shown: every capacity the knapsack solvers get at budgets 0,
    0.3, 0.7 and 1 - 1e-10 on the graphs below is >= 1."""
    capacities = []
    original = knapsack.choose_items

    def recording(solver, memories, runtimes, capacity):
        capacities.append(capacity)
        return original(solver, memories, runtimes, capacity)

    monkeypatch.setattr(knapsack, "choose_items", recording)
    for graph in _graphs():
        for solver in ("dp", "greedy", "ilp"):
            partitioner.choose_many(graph, [0.0, 0.3, 0.7, 1 - 1e-10],
                                    PartitionOptions(solver=solver))
    assert capacities and min(capacities) >= 1, capacities


def test_exact_163_the_first_programme_is_never_infeasible(monkeypatch):
    """``refimpl/partition/exact.py:163``, the infeasibility message's ``caps[0]`` ->
    ``caps[1]``: the first of the exact solver's two programmes has one cap, so the mutant
    raises ``IndexError`` instead of ``InfeasibleBudget`` where that programme is
    infeasible (the second has two caps: the same error, another figure). It never is: the
    partitioner's bound is at least the ``min`` plan's bytes (``budget_bound`` clamps to
    ``[min, max]`` and ``min <= max``), and the ``min`` plan satisfies the programme.
    Shown: every HiGHS solve of every graph below at budgets 0, 0.3, 0.7 and 1 - 1e-10
    ends feasible (status 0), and ``min <= max`` on each."""
    statuses = []
    original = exact.milp

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        statuses.append(result.status)
        return result

    monkeypatch.setattr(exact, "milp", recording)
    for graph in _graphs():
        bans = partitioner.bans_and_bounds(graph)
        assert bans.low.bytes <= bans.high.bytes
        partitioner.choose_many(graph, [0.0, 0.3, 0.7, 1 - 1e-10],
                                PartitionOptions(solver="exact"))
    assert statuses and set(statuses) == {0}, statuses
