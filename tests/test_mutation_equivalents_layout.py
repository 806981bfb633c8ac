"""Layout mutants that survived the mutation run and compute what the original computes.

benchmarks/mutation_score.py counts a survivor as equivalent only where its ``EQUIVALENT``
entry names a test that demonstrates the equivalence; these are those tests, for layout
survivors of the first run of seed 731252159 (and the same statements on the current tree).
Each test shows that both versions agree: on an exhaustive small domain, or by what torch.fx
and Python guarantee (interned node ops, graph order), checked on the graphs the layout
properties draw. None asserts the mutated code's result from that same code.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import operator
import sys

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import fx, nn
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl.layout import ops
from refimpl.layout.decision import ConvSite, decide
from refimpl.layout.decision import conv_class as decision_conv_class
from refimpl.layout.facts import example_values, node_facts
from refimpl.layout.options import MODES, LayoutOptions
from refimpl.layout.plan import plan_layout
from refimpl.layout.rewrite import apply_plan, restore_strides
from refimpl.strategies.nets import TAILS, conv_nets, laid_out_input_nets

DRAWN = settings(max_examples=20, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
KINDS = (ops.CONV, ops.POINTWISE, ops.INPLACE)


def _dynamo_graph(module: nn.Module, x: torch.Tensor) -> fx.GraphModule:
    """The graph dynamo gives a backend for ``module(x)``."""
    graphs: list[fx.GraphModule] = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(module, backend=keep)(x)
    return graphs[0]


def _graphs(spec) -> list[fx.GraphModule]:
    """A drawn net as symbolic_trace, dynamo and make_fx give it, and a deep copy of the
    first."""
    module, x = spec.build().eval(), spec.example_input()
    traced = fx.symbolic_trace(module)
    return [traced, copy.deepcopy(traced), _dynamo_graph(module, x), make_fx(module)(x)]


@DRAWN
@given(spec=conv_nets())
def test_op_kinds_are_the_module_constants(spec):
    """``==`` -> ``is`` (or ``!=`` -> ``is not``) between an op kind and a kind constant:
    ``refimpl/layout/facts.py:107 core/ReplaceComparisonOperator_NotEq_IsNot 4``,
    ``refimpl/layout/plan.py:83 ... Eq_Is 6`` (seed 731252159), and on the current tree
    ``ops.py:60 Eq_Is 1``, ``ops.py:72 Eq_Is 4``, ``plan.py:57 Eq_Is 1``, ``plan.py:63 Eq_Is
    2``, ``plan.py:65 Eq_Is 3``, ``plan.py:67 Eq_Is 4``. Every value of the op tables is one
    of the three constant objects, so ``op_kind`` returns one of them (or None) and ``==``
    and ``is`` agree on its result, on every node drawn. Also ``ops.py:87 Eq_GtE 5``
    (``node.op == "call_module"`` -> ``>=`` in ``conv_operands``): it is called only for conv
    nodes, which are ``call_function`` or ``call_module`` nodes, and for those two ``>=``
    answers as ``==`` (``"call_function" < "call_module"``)."""
    tables = [*ops._FUNCTIONS.values(), *ops._METHODS.values(), *ops._MODULES.values()]
    assert all(any(v is k for k in KINDS) for v in tables)
    for gm in _graphs(spec):
        for node in gm.graph.nodes:
            kind = ops.op_kind(node, gm)
            assert kind is None or any(kind is k for k in KINDS), (node.format_node(), kind)
            assert (kind == ops.CONV) == (kind is ops.CONV)
            if kind == ops.CONV:  # conv_operands' node.op test: >= answers as ==
                assert node.op in ("call_function", "call_module"), node.format_node()
                assert (node.op >= "call_module") == (node.op == "call_module")


@DRAWN
@given(spec=conv_nets())
def test_node_ops_are_interned(spec):
    """``==`` -> ``is`` (``!=`` -> ``is not``) between a node's op and a literal:
    ``refimpl/layout/plan.py:76 core/ReplaceComparisonOperator_Eq_Is 5`` and
    ``refimpl/layout/rewrite.py:59 ... Eq_Is 1`` (seed 731252159), and on the current tree
    ``facts.py:52 NotEq_IsNot 0``, ``facts.py:82 NotEq_IsNot 2``, ``facts.py:94 NotEq_IsNot
    3``, ``ops.py:58 Eq_Is 0``, ``ops.py:65 Eq_Is 2``, ``ops.py:67 Eq_Is 3``, ``ops.py:86
    Eq_Is 5``. torch.fx sets ``Node.op`` from its own
    string literals, which Python interns, as is the literal ``"output"``; so on every graph
    (traced, copied, dynamo's, make_fx's) ``op is "output"`` iff ``op == "output"``."""
    for gm in _graphs(spec):
        for node in gm.graph.nodes:
            assert node.op is sys.intern(node.op), node.format_node()
            for literal in ("output", "call_function", "call_method", "call_module"):
                assert (node.op is sys.intern(literal)) == (node.op == literal)


@DRAWN
@given(spec=conv_nets())
def test_a_restore_at_definition_precedes_every_other_user(spec):
    """``refimpl/layout/rewrite.py:47 core/ReplaceComparisonOperator_IsNot_Gt 0`` (and
    ``IsNot_NotEq 0``): the callback that keeps a value's users (``user is not r``) ->
    ``user > r`` (``user != r``). fx nodes compare by graph position (``_NodeBase``'s rich
    comparison), and ``r`` is inserted right after the value, so every other user of the
    value lies after ``r`` and is not ``r``: the callbacks agree on every user. Checked on
    the rewritten graphs of drawn nets, in training and inference."""
    for training in (False, True):
        module, x = spec.build().train(training), spec.example_input()
        gm = fx.symbolic_trace(module)
        facts = node_facts(gm, example_values(gm, [x.requires_grad_(training)]))
        plan = plan_layout(facts)
        users_before = {name: set(n.name for n in node.users)
                        for node in gm.graph.nodes for name in [node.name]}
        apply_plan(gm, facts, plan)
        nodes = {n.name: n for n in gm.graph.nodes}
        for name in plan.restore_at_definition:
            restored = nodes[name].next
            assert restored.target is restore_strides and restored.args[0] is nodes[name]
            for user in users_before[name]:
                assert nodes[user] > restored and nodes[user] != restored, (name, user)
            assert not (restored > restored or operator.ne(restored, restored))


def test_a_conv_module_takes_one_argument():
    """``refimpl/layout/ops.py:82 core/NumberReplacer 3`` (``node.args[0]`` ->
    ``node.args[-1]`` for a ``call_module`` conv): ``nn.Conv2d.forward`` takes one argument,
    and ``op_kind`` says ``conv`` only when it is positional, so a conv module's node has
    exactly one positional argument and ``args[-1] is args[0]``."""
    assert list(inspect.signature(nn.Conv2d.forward).parameters) == ["self", "input"]

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            return self.conv(x) + self.conv(input=x)

    gm = fx.symbolic_trace(Twice())
    convs = [n for n in gm.graph.nodes if ops.op_kind(n, gm) == ops.CONV]
    assert len(convs) == 1 and len(convs[0].args) == 1


def test_conv_argument_padding():
    """``refimpl/layout/ops.py:90 core/NumberReplacer 4`` and ``... 5`` (``[None] * 7`` ->
    ``[None] * 8`` or ``[None] * 6``): ``conv_operands`` reads positions 0, 1 and 6 of the
    arguments padded with Nones, and ``torch.conv2d`` takes at most 7. It is called only for
    a conv whose input is positional (``op_kind`` says ``conv`` for no other), so with at
    least one argument. Exhaustive over every argument count 1-7: the three paddings give
    the same three values (and a conv node without a positional argument is no conv)."""
    for count in range(1, 8):
        args = [object() for _ in range(count)]
        seven, eight, six = args + [None] * 7, args + [None] * 8, args + [None] * 6
        assert all(seven[i] is eight[i] is six[i] for i in (0, 1, 6))
    keyword = fx.symbolic_trace(lambda x, w: torch.conv2d(input=x, weight=w))
    calls = [n for n in keyword.graph.nodes if n.op == "call_function"]
    assert len(calls) == 1 and not calls[0].args
    assert ops.op_kind(calls[0], keyword) is None


#: the placeholder weight shapes of a dynamic conv site: refimpl's, and each of its four zeros
#: one up and one down (the mutants ``facts.py:120 core/NumberReplacer 18`` to ``25``)
PLACEHOLDERS = ((0, 0, 0, 0), *(tuple(d if i == at else 0 for i in range(4))
                                for at in range(4) for d in (1, -1)))


def test_a_dynamic_conv_s_placeholder_shape_decides_nothing():
    """``refimpl/layout/facts.py:120 core/NumberReplacer 18`` to ``... 25``: the weight
    shape a dynamic conv site gets, ``(0, 0, 0, 0)`` -> one of its zeros one up or down
    (``(1, 0, 0, 0)``, ``(-1, 0, 0, 0)``, ... ``(0, 0, 0, -1)``).
    A dynamic site has 0 FLOPs, and the rule answers "no" for any graph with a dynamic conv
    before it reads a class. Exhaustive over the three placeholders, with and without a
    static conv of each class beside it, every mode, both phases, and node counts either
    side of the limit: the same decision, reason, total and weighted FLOPs."""
    static = [ConvSite("s", shape, groups, 1000) for shape, groups in (
        ((160, 80, 3, 3), 2), ((16, 16, 3, 3), 1), ((8, 160, 3, 3), 1), ((96, 72, 3, 3), 1))]
    for mode, inference, nodes, beside in itertools.product(
            MODES, (True, False), (3, 299, 300, 900), [[], *([s] for s in static)]):
        options = LayoutOptions(mode=mode)
        outcomes = set()
        for shape in PLACEHOLDERS:
            d = decide([*beside, ConvSite("d", shape, 1, 0, dynamic=True)], nodes, inference,
                       options)
            outcomes.add((d.channels_last, d.reason, d.total_flops, d.weighted_flops))
        assert len(outcomes) == 1, (mode, inference, nodes, beside, outcomes)
    assert len(set(PLACEHOLDERS)) == 9


@DRAWN
@given(spec=conv_nets())
def test_an_inplace_member_has_its_roots_strides(spec):
    """``refimpl/layout/facts.py:100 core/ReplaceComparisonOperator_Eq_LtE 2`` (seed
    731252159): a view is an identity alias when its strides are ``==`` its root's -> ``<=``
    them; and on the current tree the other comparisons of ``_same_view`` that still answer
    True for an exact copy of the root's view: ``facts.py:99 Eq_LtE 1``, ``Eq_GtE 1``;
    ``facts.py:100 Eq_GtE 2``, ``Eq_LtE 3``, ``Eq_GtE 3``, ``Eq_Is 2`` (offsets are small
    ints). (Not its ``and`` -> ``or`` changes: those read a size off a root whose value is a
    tuple of one tensor, and raise.) ``identity_alias``
    decides only for an alias class whose non-root members are all made by in-place ops
    (plan.plain_classes: any other member makes the class not plain either way). In such a
    class each member is its first argument, the root or another such member, so it has its
    root's size, strides and offset (0, a fresh value's) exactly, and every such comparison
    answers True, as ``==`` does (``facts.py:100 Eq_IsNot 1``, strides ``==`` -> ``is not``:
    each ``stride()`` call makes a fresh tuple, so it answers True too); checked on every
    such member of the
    drawn nets, in training and inference. (A class that also holds a view, such as
    ``y.view(-1).mul_(2)``, may hold in-place members with other strides; it is not plain
    under either comparison.)"""
    for training in (False, True):
        module, x = spec.build().train(training), spec.example_input()
        gm = fx.symbolic_trace(module)
        values = example_values(gm, [x.requires_grad_(training)])
        facts = node_facts(gm, values)
        classes: dict[str, list] = {}
        for f in facts:
            if f.alias_root not in (None, f.name):
                classes.setdefault(f.alias_root, []).append(f)
        for root, members in classes.items():
            if all(f.kind == ops.INPLACE for f in members):
                for f in members:
                    a, b = values[f.name], values[root]
                    assert (a.shape, a.stride()) == (b.shape, b.stride()), f.name
                    assert a.storage_offset() is b.storage_offset(), f.name  # both 0
                    assert a.stride() is not b.stride(), f.name  # fresh tuples, equal


def test_layouts_and_conv_classes_are_singletons():
    """``refimpl/layout/facts.py:70 core/ReplaceComparisonOperator_NotEq_IsNot 1``
    (``layout != torch.strided`` -> ``is not``): torch's layouts are singletons, so a
    tensor's ``layout`` is the very object ``torch.strided`` (or ``torch.sparse_coo``).
    ``refimpl/layout/decision.py:113 ... Eq_Is 2`` (``k == "small"`` -> ``is``): the class
    names are string literals, interned, as is ``"small"``; exhaustive over the classes of a
    grid of weight shapes and groups."""
    dense = torch.empty(2, 2)
    assert dense.layout is torch.strided and dense.t().layout is torch.strided
    assert dense.to_sparse().layout is torch.sparse_coo
    shapes = itertools.product((1, 8, 64, 65, 160), (1, 8, 64, 65, 160), (1, 3), (1, 3))
    for shape, groups in itertools.product(shapes, (1, 2, 8)):
        kind = ConvSite("c", shape, groups, 1).kind
        assert kind is sys.intern(kind) and (kind is "small") == (kind == "small")  # noqa: F632


def test_conv_groups_are_positive():
    """``refimpl/layout/decision.py:43 core/ReplaceComparisonOperator_Gt_NotEq 0``
    (``groups > 1`` -> ``groups != 1`` in ``conv_class``). torch refuses a conv with fewer
    than one group (``nn.Conv2d`` and ``F.conv2d`` raise), so every conv whose example values
    exist has ``groups >= 1`` (a site with non-int groups gets 1), and there the two tests
    agree. Exhaustive over groups 1-16 and a grid of weight shapes: the same class."""
    for build in (lambda: nn.Conv2d(4, 4, 1, groups=0),
                  lambda: torch.conv2d(torch.ones(1, 4, 2, 2), torch.ones(4, 4, 1, 1),
                                       groups=0)):
        try:
            build()
        except (ValueError, RuntimeError, ZeroDivisionError):
            continue
        raise AssertionError("torch took a conv with groups=0")
    shapes = itertools.product((1, 2, 8, 64, 65, 160), (1, 2, 8, 64, 65, 160), (1, 2, 3), (1, 3))
    for shape, groups in itertools.product(shapes, range(1, 17)):
        out_ch, in_ch, kh, _ = shape
        mutant = ("grouped" if groups != 1 and in_ch > 1 else
                  "small" if out_ch <= 64 and in_ch <= 64 else
                  "in_out" if 2 * out_ch <= in_ch and kh > 1 else "default")
        assert decision_conv_class(shape, groups) == mutant, (shape, groups)


def test_never_returns_before_the_always_test():
    """``refimpl/layout/decision.py:99 core/ReplaceComparisonOperator_Eq_LtE 1``
    (``options.mode == "always"`` -> ``<=``). ``LayoutOptions`` takes only the three
    :data:`MODES`, ``"never"`` returns at the rule's first test, and of the other two
    ``"auto" <= "always"`` is False as ``==`` is (``"u" > "l"``). Exhaustive over the modes;
    a "never" decision never reads the always test (the same answer and reason whatever the
    convs, phase and node count)."""
    for mode in MODES:
        if mode != "never":
            assert (mode <= "always") == (mode == "always"), mode
    sites = [ConvSite("c", (96, 72, 3, 3), 1, 1000)]
    for inference, nodes in itertools.product((True, False), (3, 900)):
        d = decide(sites, nodes, inference, LayoutOptions(mode="never"))
        assert (d.channels_last, d.reason) == (False, "mode='never'")
    try:
        LayoutOptions(mode="alwayz")
    except ValueError:
        return
    raise AssertionError("LayoutOptions took a mode outside MODES")


class Activations(nn.Module):
    """A conv, then each activation of ``ops._INPLACE_FLAG`` called without an ``inplace``
    argument, in the order ``order`` gives, and a sum with the conv's output."""

    def __init__(self, order: tuple[int, ...]) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.relu, self.silu = nn.ReLU(), nn.SiLU()
        calls = (F.relu, F.silu, lambda h: F.hardtanh(h, -1.0, 1.0), F.relu6, self.relu,
                 self.silu)
        self.calls = [calls[i] for i in order]

    def forward(self, x):
        y = self.conv(x)
        h = y
        for call in self.calls:
            h = call(h)
        return h + y


@DRAWN
@given(order=st.permutations(range(6)), training=st.booleans())
def test_an_activation_without_inplace_plans_alike_as_inplace(order, training):
    """``refimpl/layout/ops.py:71 core/ReplaceFalseWithTrue 0`` (``getattr(module,
    "inplace", False)`` -> ``True``) and ``ops.py:99 ... 1`` (``arguments.get("inplace",
    False)`` -> ``True``): an activation of ``_INPLACE_FLAG`` called with no ``inplace``
    argument taken for in-place. Its modules always have an ``inplace`` attribute (the
    default is never read); its functions take one tensor and return a fresh one, which is
    the root of its own alias class, so ``inplace`` (first input channels-last) and
    ``pointwise`` (any input channels-last) compute channels-last alike, and the class is
    plain either way. Checked: the plan of such graphs (dynamo's call form: the functions
    kept as calls) is the same with those nodes' kind ``pointwise`` as ``inplace``."""
    assert all(hasattr(m(), "inplace") for m in (nn.ReLU, nn.SiLU))
    module = Activations(order).train(training)
    tracer = fx.Tracer(autowrap_functions=(F.relu, F.silu, F.hardtanh, F.relu6))
    gm = fx.GraphModule(module, tracer.trace(module))
    x = torch.randn(1, 4, 4, 4).requires_grad_(training)
    facts = node_facts(gm, example_values(gm, [x]))
    activations = [f for f in facts if f.kind == ops.POINTWISE and f.name != "add"]
    assert len(activations) == 6, [(f.name, f.kind) for f in facts]
    as_inplace = [dataclasses.replace(f, kind=ops.INPLACE) if f in activations else f
                  for f in facts]
    assert plan_layout(as_inplace) == plan_layout(facts)


def test_a_conv_kernel_is_at_least_one_row_high():
    """``refimpl/layout/decision.py:47 core/ReplaceComparisonOperator_Gt_NotEq 2`` (``kh > 1``
    -> ``kh != 1`` in ``conv_class``). A conv site exists only for a conv whose output has an
    example value, and torch refuses to compute a conv with a kernel of height 0 (nor can a
    weight have a negative size), so every site has ``kh >= 1``, where the two tests agree.
    Exhaustive over kernel heights 1-8 and a grid of channels and groups: the same class as
    the mutant's rule."""
    try:
        torch.conv2d(torch.ones(1, 4, 3, 3), torch.ones(4, 4, 0, 3))
    except RuntimeError:
        pass
    else:
        raise AssertionError("torch computed a conv with a kernel of height 0")
    channels = (1, 2, 8, 32, 64, 65, 128, 160)
    for out_ch, in_ch, kh, groups in itertools.product(channels, channels, range(1, 9),
                                                       (1, 2)):
        mutant = ("grouped" if groups > 1 and in_ch > 1 else
                  "small" if out_ch <= 64 and in_ch <= 64 else
                  "in_out" if 2 * out_ch <= in_ch and kh != 1 else "default")
        shape = (out_ch, in_ch, kh, 3)
        assert decision_conv_class(shape, groups) == mutant, (shape, groups)


def test_small_is_the_greatest_class_name():
    """``refimpl/layout/decision.py:113 core/ReplaceComparisonOperator_Eq_GtE 2``
    (``k == "small"`` -> ``k >= "small"`` in the training rule's "all small" test). The
    classes are the four names ``conv_class`` returns, and ``"small"`` sorts after the other
    three, so ``>=`` answers as ``==`` for each. Exhaustive over the classes of a grid of
    weight shapes and groups (every class occurs), and over every training decision of up to
    three convs of those classes: the same answer and reason with the mutant's test."""
    shapes = itertools.product((1, 8, 64, 65, 160), (1, 8, 64, 65, 160), (1, 3), (1, 3))
    sites = {}
    for shape, groups in itertools.product(shapes, (1, 2)):
        site = ConvSite("c", shape, groups, 1000)
        sites.setdefault(site.kind, site)
    assert set(sites) == {"grouped", "small", "in_out", "default"}
    for kind in sites:
        assert (kind >= "small") == (kind == "small"), kind
    for count in (1, 2, 3):
        for chosen in itertools.product(sites.values(), repeat=count):
            d = decide(list(chosen), 3, False, LayoutOptions())
            kinds = [c.kind for c in chosen]
            blocked = "grouped" in kinds or "in_out" in kinds
            mutant = not blocked and not all(k >= "small" for k in kinds)
            assert d.channels_last == mutant, kinds


@settings(DRAWN, max_examples=10)
@given(spec=conv_nets())
def test_an_alias_root_is_its_root_node_s_name(spec):
    """``refimpl/layout/plan.py:57 core/ReplaceComparisonOperator_Eq_Is 0`` (``f.name ==
    root`` -> ``f.name is root`` in ``plain_classes``). ``node_facts`` takes a class's root
    name from the root node itself (``roots.setdefault(storage, node.name)``), and node names
    are unique in a graph, so a member is the root iff its name is that very string object.
    Checked on every member of every alias class of the drawn nets' graphs (traced, and
    make_fx's, whose names differ): ``is`` and ``==`` agree."""
    module, x = spec.build().eval(), spec.example_input()
    for gm in (fx.symbolic_trace(module), make_fx(module)(x)):
        facts = node_facts(gm, example_values(gm, [x]))
        names = {f.name for f in facts}
        assert len(names) == len(facts)
        for f in facts:
            if f.alias_root is not None:
                assert f.alias_root in names
                assert (f.name is f.alias_root) == (f.name == f.alias_root), f.name


def test_conv2d_weights_are_four_dimensional():
    """``refimpl/layout/facts.py:114 core/ReplaceComparisonOperator_NotEq_Gt 7`` (and
    ``NotEq_Lt 7``, ``NotEq_IsNot 7``): ``w_val.dim() != 4`` -> ``> 4`` (``< 4``, ``is not
    4``) in ``conv_sites``. A conv site's weight is the weight of a 2-d conv eager (or fake
    propagation) ran: ``torch.conv2d`` (``F.conv2d`` is the same function) or
    ``nn.Conv2d``. Tried with weights of every rank 0-6 on batched and unbatched images,
    torch accepts only 4-d ones, and on a 4-d weight the four tests all say False."""
    accepted = set()
    for rank, batched in itertools.product(range(7), (False, True)):
        x = torch.randn((1, 2, 5, 5) if batched else (2, 5, 5))
        w = torch.randn((2,) * rank)
        try:
            torch.conv2d(x, w)
        except RuntimeError:
            continue
        accepted.add(w.dim())
    assert accepted == {4}
    assert nn.Conv2d(2, 3, (1, 2)).weight.dim() == 4
    four = torch.randn(2, 2, 2, 2).dim()
    # the four tests on a 4-d weight (CPython's small ints are one object each: ``is``)
    assert not any(test(four, 4) for test in (operator.ne, operator.gt, operator.lt,
                                              operator.is_not))


@DRAWN
@given(spec=st.one_of(conv_nets(), laid_out_input_nets()))
def test_whether_a_placeholder_is_opaque_changes_no_plan(spec):
    """``refimpl/layout/facts.py:94 core/ReplaceComparisonOperator_NotEq_Lt 4``
    (``opaque=node.op != "output" and ...`` -> ``node.op < "output"``). The two differ on
    placeholders only (``"placeholder" > "output"``; every other op is below it, and
    ``"output" < "output"`` is False as ``!=`` is). The planner reads ``opaque`` only to
    collect the inputs of opaque nodes (``plain_classes``), and a placeholder has no
    inputs. Checked on the drawn nets' traced graphs (random nets on a contiguous input,
    laid-out-input nets on a channels-last one) with every placeholder made opaque and not
    opaque: the plan is the same."""
    module = spec.build().eval()
    x = spec.example_input()
    if spec.tail not in TAILS[1:4]:  # eager refuses view(-1) of a channels-last value
        x = x.contiguous(memory_format=torch.channels_last)
    gm = fx.symbolic_trace(module)
    facts = node_facts(gm, example_values(gm, [x]))
    assert all(not f.inputs for f in facts if f.op == "placeholder")
    plans = [plan_layout([dataclasses.replace(f, opaque=opaque)
                          if f.op == "placeholder" else f for f in facts])
             for opaque in (False, True)]
    assert plans[0] == plans[1] == plan_layout(facts)


def test_call_function_and_call_method_are_the_least_node_ops():
    """``refimpl/layout/ops.py:59 core/ReplaceComparisonOperator_Eq_LtE 0``
    (``node.op == "call_function"`` -> ``<=``) and ``ops.py:66 ... Eq_LtE 2``
    (``node.op == "call_method"`` -> ``<=``, reached only when the first test failed), seed
    2864908393. Exhaustive over torch.fx's node ops (``torch.fx.node._legal_ops``, plus
    ``root``): ``"call_function"`` is the least of them, so ``<=`` holds for it alone; once it
    is set aside, ``"call_method"`` is the least of the rest. So ``op_kind`` takes the same
    branch under both versions for every node op."""
    from torch.fx import node as fx_node

    node_ops = set(fx_node._legal_ops)
    assert {"placeholder", "call_function", "call_method", "call_module", "get_attr",
            "output"} <= node_ops
    for op in node_ops:
        assert (op <= "call_function") == (op == "call_function"), op
        if op != "call_function":
            assert (op <= "call_method") == (op == "call_method"), op
