"""The table's registration API, count_flops, and FlopCounterMode's options and table."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import refimpl
from refimpl.flops.formulas import count_flops, register_flop_formula

aten = torch.ops.aten


def test_count_flops_accepts_overloads_packets_and_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(3, 4), torch.empty(4, 5)
    assert count_flops(aten.mm.default, (a, b), {}, None) == 2 * 3 * 4 * 5
    assert count_flops(aten.mm, (a, b)) == 2 * 3 * 4 * 5
    assert count_flops(aten.mm.out, (a, b), {"out": torch.empty(3, 5)}) == 2 * 3 * 4 * 5
    assert count_flops(aten.cos.default, (a,), {}, a) == 0  # not in the table


def test_register_semantics_shapes_raw_duplicates():
    table: dict = {}

    @register_flop_formula(aten.add, table=table)
    def by_shape(a, b, *args, out_shape=None, **kwargs):
        return out_shape[0] * out_shape[1]

    @register_flop_formula([aten.sub, [aten.mul]], get_raw=True, table=table)
    def by_value(a, b, *args, out_val=None, **kwargs):
        return int(out_val.sum())

    x = torch.ones(2, 3)
    assert count_flops(aten.add.Tensor, (x, x), {}, x + x, table=table) == 6
    assert count_flops(aten.mul.Tensor, (x, x), {}, x * x, table=table) == 6
    assert count_flops(aten.sub.Tensor, (x, x), {}, x - x, table=table) == 0
    with pytest.raises(RuntimeError, match="duplicate"):
        register_flop_formula(aten.add, table=table)(by_shape)


def test_register_rejects_bad_targets_and_formulas():
    with pytest.raises(ValueError, match="OpOverloadPacket"):
        register_flop_formula(aten.add.Tensor, table={})(lambda *a, **k: 0)
    with pytest.raises(ValueError, match="callable"):
        register_flop_formula(aten.add, table={})(42)
    with pytest.raises(ValueError, match="get_raw"):
        register_flop_formula(aten.add, get_raw="yes", table={})


def test_public_names():
    assert refimpl.flop_formulas[aten.mm] is not None
    assert refimpl.register_flop_formula is register_flop_formula
    with pytest.raises(RuntimeError, match="duplicate"):
        refimpl.register_flop_formula(aten.mm)(lambda *a, **k: 0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(depth=-1), "depth"), (dict(depth="2"), "depth"), (dict(display=1), "display"),
    (dict(custom_mapping=[1]), "custom_mapping"),
    (dict(custom_mapping={aten.add.Tensor: len}), "OpOverloadPacket"),
    (dict(custom_mapping={aten.add: 3}), "callable"),
])
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        refimpl.FlopCounterMode(**kwargs)


def test_custom_mapping_overrides_the_table():
    with refimpl.FlopCounterMode(display=False,
                                 custom_mapping={aten.mm: lambda *a, out_shape: 1}) as mode:
        torch.mm(torch.randn(4, 5), torch.randn(5, 6))
    assert mode.get_total_flops() == 1


def test_not_reentrant():
    mode = refimpl.FlopCounterMode(display=False)
    with mode, pytest.raises(RuntimeError, match="re-entrant"), mode:
        pass


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(self.block(x)))  # a shared module, called twice


def test_shared_module_and_table(capsys):
    with refimpl.FlopCounterMode(depth=2) as mode:
        Net()(torch.randn(3, 4, requires_grad=True)).sum().backward()
    counts = mode.get_flop_counts()
    fwd_block, fwd_head = 2 * (2 * 3 * 4 * 4), 2 * 3 * 4 * 2
    # forward + grad_input + grad_weight for each linear
    assert sum(counts["Net.block"].values()) == 3 * fwd_block
    assert sum(counts["Net.head"].values()) == 3 * fwd_head
    assert sum(counts["Net"].values()) == mode.get_total_flops() == 3 * (fwd_block + fwd_head)
    printed = capsys.readouterr().out
    assert printed.strip() == mode.get_table().strip()
    assert " Net.block " in printed and "Net.block.inner" not in printed
    assert "Net.block.inner" in mode.get_table(depth=3)


def test_table_shows_global_when_flops_ran_outside_modules():
    with refimpl.FlopCounterMode(display=False) as mode:
        nn.Linear(4, 4)(torch.randn(2, 4))
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    lines = mode.get_table().splitlines()
    assert lines[2].startswith("Global") and lines[-1].lstrip().startswith("- aten.addmm")
    empty = refimpl.FlopCounterMode(display=False)
    assert "Global" in empty.get_table()


def test_cond_counts_the_larger_branch_and_returns_the_taken_one():
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: torch.mm(x, x),
                          lambda x: torch.mm(torch.mm(x, x), x), (x,))

    x = -torch.ones(4, 4)
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.mm(x, x)
        y = f(x)
    torch.testing.assert_close(y, x @ x @ x)  # pred is False
    assert mode.get_total_flops() == 2 * 64 + max(2 * 64, 4 * 64)


def test_count_flops_on_fx_nodes_matches_the_counter():
    """The partitioner's use: count_flops(node.target, args from node.meta['val'])."""
    from torch.fx.experimental.proxy_tensor import make_fx

    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Flatten(), nn.Linear(4 * 36, 5))
    x = torch.randn(2, 3, 6, 6, requires_grad=True)

    params = {k: v.detach().requires_grad_() for k, v in model.named_parameters()}

    def step(x, params):
        out = torch.func.functional_call(model, params, (x,))
        return torch.autograd.grad(out.sum(), [x, *params.values()])

    graph = make_fx(step, tracing_mode="fake")(x, params).graph
    total = 0
    for node in [n for n in graph.nodes if n.op == "call_function"]:
        value = lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a
        args = torch.fx.node.map_aggregate(node.args, value)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, value)
        total += count_flops(node.target, args, kwargs, node.meta.get("val"))
    with refimpl.FlopCounterMode(display=False) as mode:
        step(x, params)
    assert total == mode.get_total_flops() > 0


def test_autograd_grad_with_leaf_inputs_is_attributed():
    model, x = nn.Linear(4, 5), torch.randn(2, 4, requires_grad=True)
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.autograd.grad(model(x).sum(), [x, model.weight])
    forward = 2 * 2 * 4 * 5  # addmm; grad_x and grad_weight are one mm each
    assert mode.get_flop_counts()["Linear"] == {aten.addmm: forward, aten.mm: 2 * forward}


# --- issue 14: registration is atomic, counts are non-negative integers, depth is checked --

def test_register_is_atomic_when_one_target_is_bad():
    table: dict = {}
    with pytest.raises(ValueError, match="'bad'"):
        register_flop_formula([aten.cosh, "bad"], table=table)(lambda *a, **k: 1)
    assert aten.cosh not in table  # nothing registered
    with pytest.raises(RuntimeError, match="duplicate"):
        register_flop_formula([aten.sinh, aten.mm], table={aten.mm: len})(lambda *a, **k: 1)
    register_flop_formula(aten.cosh, table=table)(lambda *a, **k: 1)  # still free to register
    assert aten.cosh in table


def test_register_atomic_on_the_global_table():
    with pytest.raises(ValueError, match="'bad'"):
        refimpl.register_flop_formula([aten.cosh, "bad"])(lambda *a, **k: 1)
    assert aten.cosh not in refimpl.flop_formulas


@pytest.mark.parametrize("value,error,match", [
    (2.7, ValueError, r"aten\.mm.* returned 2\.7"),
    (4.0, ValueError, r"returned 4\.0"),
    (True, ValueError, "returned True"),
    (-5, ValueError, r"aten\.mm.* returned -5"),
])
def test_formula_results_must_be_non_negative_integers(value, error, match):
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with pytest.raises(error, match=match):
        count_flops(aten.mm, (a, b), table={aten.mm: lambda *args, **kw: value})
    with pytest.raises(error, match=match), refimpl.FlopCounterMode(
            display=False, custom_mapping={aten.mm: lambda *args, **kw: value}):
        torch.mm(a, b)


def test_a_bad_result_under_an_operator_keeps_its_message():
    """``a + b`` turns a TypeError from the dispatch into "unsupported operand type(s)": the
    refusal of a formula's result is a ValueError, so it reaches the caller naming the op."""
    a = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"aten\.add.* returned 2\.5"), \
            refimpl.FlopCounterMode(display=False, custom_mapping={aten.add: lambda *a, **k: 2.5}):
        a + a


def test_integer_like_results_are_accepted():
    import numpy as np

    a, b = torch.randn(2, 3), torch.randn(3, 4)
    assert count_flops(aten.mm, (a, b), table={aten.mm: lambda *a, **k: np.int64(7)}) == 7


@pytest.mark.parametrize("depth", [-1, 1.5, "2", True])
def test_get_table_rejects_bad_depth(depth):
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
    with pytest.raises(ValueError, match=r"get_table\(depth=\.\.\.\): expected None or an int"):
        mode.get_table(depth=depth)
    assert "aten.mm" in mode.get_table(depth=0) + mode.get_table(depth=None)


# --- issue 10 (4): get_flop_counts always has "Global" -------------------------------------

def test_global_key_even_when_nothing_was_counted():
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.randn(3).relu()
    assert mode.get_flop_counts() == {"Global": {}}
    assert mode.get_flop_counts()["Global"] == {} and mode.get_total_flops() == 0
    assert refimpl.FlopCounterMode(display=False).get_flop_counts() == {"Global": {}}
