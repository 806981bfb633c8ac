"""FLOP-counter mutants that survived the mutation run and compute what the original computes.

benchmarks/mutation_score.py counts a survivor as equivalent only where its ``EQUIVALENT``
entry names a test that demonstrates the equivalence; these are those tests, for the flops
survivors of the first run of seed 731252159 (keys ``path:line operator occurrence`` on the
tree that run measured). Each test shows that both versions agree on an exhaustive small
domain, with the reason the domain covers every case that can reach the line.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import re

import torch

from refimpl.flops import counter, free_ops, models, summary, table
from refimpl.flops.counter import FlopCounterMode
from refimpl.flops.formulas import attention, conv, matmul, registry
from refimpl.flops.table import render
from tests.frozen_uses import recording

#: "depth None shows every module": the counter renders with depth 10**9. cosmic-ray's
#: NumberReplacer moves one of its numbers by one: 9**9, 11**9, 10**8 or 10**10.
UNBOUNDED_VARIANTS = (10**9, 9**9, 11**9, 10**8, 10**10)


def _counts_domain():
    """Every counts dict over module names nested 0-5 levels deep (``A``, ``A.b``, ...,
    ``A.b.b.b.b.b``), each present or not, with Global holding their largest count or
    more: 2**6 name sets x 2 Global totals."""
    chain = ["A" + ".b" * level for level in range(6)]
    for present in itertools.product((False, True), repeat=len(chain)):
        names = [name for name, keep in zip(chain, present, strict=True) if keep]
        for extra in (0, 5):
            counts = {name: {"aten.mm": 10 * (i + 1)} for i, name in enumerate(names)}
            top = max((10 * (i + 1) for i in range(len(names))), default=0)
            counts["Global"] = {"aten.mm": top + extra}
            yield counts


def test_an_unbounded_table_depth_is_any_depth_past_the_deepest_name():
    """counter.py:116 (``10**9 if depth is None``) NumberReplacer: a row is left out only
    when its name's level (dots + 1) exceeds the depth; a name has fewer dots than
    characters, so every variant (at least 10**8) shows every row of any real model. On
    the domain: each variant renders exactly the table of depth = the deepest level."""
    for counts in _counts_domain():
        deepest = max((name.count(".") + 1 for name in counts if name != "Global"), default=1)
        tables = {render(counts, depth) for depth in (deepest, *UNBOUNDED_VARIANTS)}
        assert len(tables) == 1, counts


def test_the_counter_renders_depth_none_as_every_level():
    """The same through the counter: get_table() at depth None equals get_table(6) (the
    deepest level of a 6-deep chain of modules)."""
    model = torch.nn.Linear(2, 2)
    for _ in range(5):
        model = torch.nn.Sequential(model)
    with FlopCounterMode(depth=None, display=False) as counter:
        model(torch.ones(1, 2))
    assert counter.get_table() == counter.get_table(6)


def _conv_shapes_refused(rank_x: int, rank_w: int, least: int) -> bool:
    """conv.py:36's check with its constant as ``least`` (3 in refimpl, 2 in the mutant)."""
    return rank_x != rank_w or rank_x < least


def test_the_conv_rank_check_differs_only_where_torch_refuses_first():
    """conv.py:36 (``len(x_shape) < 3``) NumberReplacer to ``< 2``: over every pair of ranks
    1-6 the two checks differ only for a rank-2 input with a rank-2 weight, and torch's
    convolution refuses that pair itself (CPU and meta), before any formula runs: under the
    counter the formula sees the shapes only after the op ran, so the check never sees it."""
    differ = {(rx, rw) for rx, rw in itertools.product(range(1, 7), repeat=2)
              if _conv_shapes_refused(rx, rw, 3) != _conv_shapes_refused(rx, rw, 2)}
    assert differ == {(2, 2)}
    aten = torch.ops.aten
    for device in ("cpu", "meta"):
        x, w = torch.empty(2, 3, device=device), torch.empty(4, 3, device=device)
        with FlopCounterMode(display=False) as counter:
            try:
                aten.convolution(x, w, None, [], [], [], False, [], 1)
            except (RuntimeError, TypeError) as exc:  # torch's kernel, not the formula
                assert "convolution:" not in str(exc)
            else:
                raise AssertionError(f"{device}: torch ran a convolution of rank-2 shapes")
        assert counter.get_total_flops() == 0


def _bounds(deltas: list[dict], default: int) -> dict:
    """counter.py:161's per-(module, op) bound with ``ops.get(op, default)``."""
    return {name: {op: max(ops.get(op, default) for ops in [d.get(name, {}) for d in deltas])
                   for op in set().union(*(d.get(name, {}) for d in deltas))}
            for name in set().union(*deltas)}


def test_the_branch_bound_default_below_zero_changes_nothing():
    """counter.py:161 (``ops.get(op, 0)``) NumberReplacer to ``-1``: an op is bounded only
    where some branch ran it, with a count >= 0, so a default below 0 never wins the max.
    Exhaustive over two branches, one module, two ops, each absent or 0-2 FLOPs; the
    counter's own bound equals both."""
    choices = (None, 0, 1, 2)
    for values in itertools.product(choices, repeat=4):
        deltas = [{"M": {op: n for op, n in zip("ab", values[i:i + 2], strict=True)
                         if n is not None}} for i in (0, 2)]
        counter = FlopCounterMode(display=False)
        counter._add_upper_bound(deltas)
        counted = {name: dict(ops) for name, ops in counter.flop_counts.items() if ops}
        original, mutant = (
            {name: ops for name, ops in _bounds(deltas, default).items() if ops}
            for default in (0, -1))
        assert counted == original == mutant, deltas


def _human_with_threshold(source: str, threshold: str):
    """summary.human compiled from ``source`` with its ``rounded >= 1000`` test moved to
    ``rounded >= threshold``."""
    body = source[source.index("#: powers of 1000"):source.index("def as_json")]
    assert body.count("rounded >= 1000") == 1
    namespace: dict = {}
    exec(body.replace("rounded >= 1000", f"rounded >= {threshold}"), namespace)
    return namespace["human"]


def test_whole_units_and_three_digits_agree_below_1000():
    """summary.py ``human``'s ``rounded >= 1000`` NumberReplacer to ``>= 999``: the mutant
    prints a figure whose three significant digits round to 999 with ``,.0f`` instead of
    ``.3g``; for a quotient in [100, 1000) three significant digits are the whole units,
    rounded the same way (half to even on the same float), so both print "999". Checked
    on every count from 998,000 to 1,000,000 at each prefix (the count times 1, 1000, 10**6
    and 10**9), which holds every quotient that rounds to 999 at K and its neighbours."""
    source = inspect.getsource(summary)
    original, mutant = (_human_with_threshold(source, t) for t in ("1000", "999"))
    assert original(999_999, "FLOPs") == "1 MFLOPs"
    for scale in (1, 10**3, 10**6, 10**9):
        for count in range(998_000, 1_000_001):
            assert original(count * scale, "F") == mutant(count * scale, "F"), count * scale


#: ``present(aten, "name", ...)`` calls in the formula table and the counter.
_PRESENT_CALL = re.compile(r"present\(\s*(\w+),((?:\s*\"\w+\",?)+)\s*\)")


def test_every_kernel_the_table_names_exists_so_present_never_skips():
    """registry.py ``present``'s ``continue`` (a name this torch lacks) ReplaceContinueWithBreak:
    ``break`` drops the names after a missing one. The two agree on a list exactly when its
    missing names all come after its present ones. On the installed torch every call that
    the formula modules and the counter make (found in their source, names listed on several
    lines included) is such a list (a single-name call, e.g. ``_grouped_mm``, may lack its
    name on an older torch: with one name ``break`` and ``continue`` agree). On a torch that
    lacks a kernel in mid-list they would differ: this test then fails and the entry must
    go."""
    namespaces = {"aten": torch.ops.aten, "_aten": torch.ops.aten}
    calls = [call for module in (counter, attention, conv, matmul)
             for call in _PRESENT_CALL.finditer(inspect.getsource(module))]
    assert len(calls) >= 5, [c.group(0) for c in calls]
    for call in calls:
        names = re.findall(r"\"(\w+)\"", call.group(2))
        found = [bool(registry.present(namespaces[call.group(1)], n)) for n in names]
        assert found == sorted(found, reverse=True), (
            f"torch {torch.__version__}: {names}: a missing name comes before a present one")


def _op_packets():
    """Every op packet of aten, prims and prim in this torch build, and every
    higher-order op: all that can reach ``free_category``'s name rule."""
    from torch._ops import _higher_order_ops

    for namespace in (torch.ops.aten, torch.ops.prims, torch.ops.prim):
        for name in dir(namespace):
            try:
                packet = getattr(namespace, name)
            except (AttributeError, RuntimeError):
                continue
            if isinstance(packet, torch._ops.OpOverloadPacket):
                yield name, packet
    yield from _higher_order_ops.items()


def test_the_in_place_base_rule_needs_a_trailing_underscore():
    """free_ops.py:152 (``name.endswith("_") and not name.endswith("__")`` to ``or``): the
    mutant also strips the last character of a name without a trailing underscore (``mul``
    -> ``mu``); ``name`` itself is still looked up, so it can only make an op free that the
    original does not: one whose name, last character cut, is a free name. On every op of
    this torch build (aten, prims, prim, higher-order ops): none is, so both rules give the
    same category to every op."""
    free_names = set().union(*free_ops.FREE_BY_CONVENTION.values())
    changed = []
    for name, packet in _op_packets():
        if name.endswith("_") or name in free_names or name[:-1] not in free_names:
            continue
        overloads = ([getattr(packet, o) for o in packet.overloads()]
                     if isinstance(packet, torch._ops.OpOverloadPacket) else [packet])
        changed += [str(op) for op in overloads if free_ops.free_category(op) is None]
    assert changed == [], f"the mutant would declare these free: {changed}"


def test_hf_is_the_only_builtin_kind_at_or_below_hf():
    """models.py:229 (``sep and kind == "hf"`` to ``kind <= "hf"``): ``build`` reaches the
    line only for a MODEL that is not a factory (so with a ``:`` its kind is a builtin
    kind, :data:`refimpl.flops.models.BUILTIN_KINDS`) and not ``torchvision:`` (handled
    before). Without ``:`` both conditions are false; with one, the kind is ``hf``, where
    ``==`` and ``<=`` agree. Exhaustive over the kinds that reach the line."""
    assert set(models.BUILTIN_KINDS) == {"torchvision", "hf"}
    for spec in ("mlp", "hf", "torchvision", "", "a:b", "hf:gpt2", "torchvision:resnet18",
                 "zz:x", "aa:x", *(f"{kind}:x" for kind in models.BUILTIN_KINDS)):
        kind, sep, _ = spec.partition(":")
        if models.is_factory(spec) or (sep and kind == "torchvision"):
            continue
        assert (bool(sep) and kind == "hf") == (bool(sep) and kind <= "hf"), spec


def test_a_negative_indent_is_no_indent():
    """table.py:65 (Global's indent ``0`` to ``-1``): ``module_rows`` reads the indent only
    as ``" " * indent``, and a str repeated a negative number of times is empty, as 0 times
    is. On a small domain of op counts and totals the rows agree."""
    assert " " * -1 == " " * 0 == ""
    for ops in ({}, {"aten.mm": 0}, {"aten.mm": 8, "aten.addmm": 2}):
        for total in (0, 10, 20):
            assert (table.module_rows("Global", ops, -1, total)
                    == table.module_rows("Global", ops, 0, total)), (ops, total)


def test_a_weight_of_lower_rank_than_the_input_is_refused_by_torch_first():
    """conv.py:36 (``len(x_shape) != len(w_shape)``) to ``<``: over every pair of ranks 1-6
    the two checks differ exactly where the input has more dims than the weight (and at least
    3), and torch's convolution refuses each such pair itself (CPU and meta), before any
    formula runs: under the counter the formula sees the shapes only after the op ran."""
    original = {(rx, rw) for rx, rw in itertools.product(range(1, 7), repeat=2)
                if rx != rw or rx < 3}
    mutant = {(rx, rw) for rx, rw in itertools.product(range(1, 7), repeat=2)
              if rx < rw or rx < 3}
    differ = original ^ mutant
    assert differ == {(rx, rw) for rx in range(3, 7) for rw in range(1, rx)}
    aten = torch.ops.aten
    for (rx, rw), device in itertools.product(sorted(differ), ("cpu", "meta")):
        spatial = rx - 2
        x = torch.empty(2, 3, *[5] * spatial, device=device)
        w = torch.empty(4, 3, *[2] * (rw - 2), device=device) if rw >= 2 else \
            torch.empty(4, device=device)
        with FlopCounterMode(display=False) as counter:
            try:
                aten.convolution(x, w, None, [1] * spatial, [0] * spatial, [1] * spatial,
                                 False, [0] * spatial, 1)
            except (RuntimeError, TypeError, IndexError, ValueError) as exc:
                assert "convolution:" not in str(exc), (rx, rw, device, exc)  # torch's
            else:
                raise AssertionError(f"{device}: torch ran a rank-{rx} input with a rank-{rw} "
                                     "weight")
        assert counter.get_total_flops() == 0


# ---- survivors of the first run of seed 2864908393 (tree f8792c0; keys on today's tree) -----

def test_no_input_size_in_bytes_equals_the_storage_bound():
    """models.py:117 (``numel * dtype.itemsize > MAX_STORAGE_BYTES`` to ``>=``): the two
    differ only where the byte count equals the bound, 2**63 - 1, which is odd; every --dtype
    the line can see has an even itemsize, so no element count reaches it. At the element
    counts around the bound, both comparisons agree for every dtype."""
    assert models.MAX_STORAGE_BYTES % 2 == 1
    for name in models.DTYPES:
        itemsize = getattr(torch, name).itemsize
        assert itemsize % 2 == 0, name
        edge = models.MAX_STORAGE_BYTES // itemsize
        for numel in range(edge - 2, edge + 3):
            size = numel * itemsize
            assert (size > models.MAX_STORAGE_BYTES) == (size >= models.MAX_STORAGE_BYTES)


def test_the_tag_rule_is_a_pure_function_of_the_packet():
    """free_ops.py:127 (``@cache`` on ``_tag_category`` removed): the cache only remembers
    results. Over every aten packet this torch registers, the uncached function gives the
    cached one's answer, twice in a row (it reads nothing but the packet's overloads' tags)."""
    uncached = free_ops._tag_category.__wrapped__
    names = {op.split("::")[1].split(".")[0] for op in torch._C._dispatch_get_all_op_names()
             if op.startswith("aten::")}
    packets = [getattr(torch.ops.aten, name) for name in sorted(names)]
    assert len(packets) > 1000
    for packet in packets:
        assert uncached(packet) == free_ops._tag_category(packet) == uncached(packet), packet


def test_dispatched_ops_compare_equal_only_to_themselves():
    """counter.py:211 (``func is torch.ops.higher_order.cond`` to ``==``): ``==`` falls back
    to identity for what ``__torch_dispatch__`` receives. Neither OpOverload nor any higher-
    order operator class of this torch defines ``__eq__``, so ``func == cond`` holds exactly
    when ``func is cond``; checked over every registered higher-order operator and the aten
    overloads of the first 200 packets."""
    cond = torch.ops.higher_order.cond
    hops = list(torch._ops._higher_order_ops.values())
    overloads = []
    for name in sorted(dir(torch.ops.aten))[:200]:
        packet = getattr(torch.ops.aten, name)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            overloads += [getattr(packet, o) for o in packet.overloads()]
    assert cond in hops and len(overloads) > 100
    for func in hops + overloads:
        assert type(func).__eq__ is object.__eq__, type(func)
        assert (func == cond) == (func is cond), func


def test_a_module_is_never_active_a_negative_number_of_times():
    """module_tracker.py:78 (``depth > 0`` to ``depth != 0``): the two differ only for a
    negative depth. A depth moves only by ``_enter`` (+1) and ``_leave`` (-1 when above 0),
    and a backward's end clears them all; over every sequence of up to 8 enters and leaves
    the depth stays >= 0, and ``parents`` is the same under both comparisons."""
    from refimpl.flops.module_tracker import ModuleTracker

    for length in range(9):
        for steps in itertools.product((True, False), repeat=length):
            tracker = ModuleTracker()
            for enter in steps:
                (tracker._enter if enter else tracker._leave)("A")
                depths = dict(tracker._active)
                assert all(d >= 0 for d in depths.values()), steps
                assert tracker.parents == {"Global", *(n for n, d in depths.items() if d != 0)}


def test_no_op_name_holds_a_dot():
    """free_ops.py:124 core/NumberReplacer 1 (``split(".")[-0]``, i.e. ``[0]``, for
    ``[-1]`` in ``_packet_name``): the two differ only for a name with a dot. Every op packet
    of aten, prims and prim and every higher-order op of this torch build has a
    ``__name__`` (the ``str`` fallback is never read) without a dot: one part, so its first
    part is its last."""
    names = []
    for _, packet in _op_packets():
        assert hasattr(packet, "__name__"), packet
        names.append(packet.__name__)
    assert len(names) > 1000
    assert [n for n in names if n.split(".")[0] != n.split(".")[-1]] == []


def test_a_counted_run_is_never_changed_nor_hashed(monkeypatch, tmp_path):
    """summary.py:36 core/ReplaceTrueWithFalse 1 (``Counted`` declared ``frozen=False``):
    freezing only forbids setting and deleting fields after ``__init__`` and adds a hash.
    With a subclass recording each of those in its place, ``refimpl flops`` runs of every
    format (table, json, csv; forward and backward; to a file) record none."""
    from refimpl.flops import cli

    calls: list[str] = []

    Recording = recording(summary.Counted, calls)
    monkeypatch.setattr(summary, "Counted", Recording)
    built = []
    real_count = cli.count
    monkeypatch.setattr(cli, "count", lambda *a, **k: built.append(real_count(*a, **k))
                        or built[-1])
    for fmt in ("table", "json", "csv"):
        for extra in ([], ["--backward"], ["--output", str(tmp_path / f"out.{fmt}")]):
            parser = argparse.ArgumentParser()
            cli.add_arguments(parser)
            assert cli.run(parser.parse_args(["mlp", "--format", fmt, *extra])) == 0
    assert built and all(type(c) is Recording for c in built)
    assert calls == []
