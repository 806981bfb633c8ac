"""Pins each entry of docs/differences.md "## FLOPs" against the installed torch: refimpl's
count and torch's (wrong or missing) one, each marked with the torch releases it holds for
(skipped, visibly, on others). If torch changes, the failing test names the entry to update."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import flop_counter as tfc

import refimpl
from refimpl.flops.formulas import count_flops

aten = torch.ops.aten


def both(fn) -> tuple[dict, dict]:
    """(torch's, refimpl's) {op name: FLOPs} for ``fn``."""
    result = []
    for cls in (tfc.FlopCounterMode, refimpl.FlopCounterMode):
        with cls(display=False) as mode:
            fn()
        result.append({str(k): v for k, v in mode.get_flop_counts().get("Global", {}).items()})
    return result[0], result[1]


@pytest.mark.torch_releases("2.13", "2.14")
def test_grouped_conv_backward():
    x = torch.randn(1, 4, 8, 8, requires_grad=True)
    w = torch.randn(4, 1, 3, 3, requires_grad=True)
    theirs, ours = both(lambda: F.conv2d(x, w, groups=4).sum().backward())
    forward = 2 * 1 * (6 * 6) * (4 * 1 * 3 * 3)  # 2 * N * out pixels * weight elements
    assert ours == {"aten.convolution": forward, "aten.convolution_backward": 2 * forward}
    # torch charges grad_weight once per group: forward + groups * forward
    assert theirs == {"aten.convolution": forward, "aten.convolution_backward": 5 * forward}


@pytest.mark.torch_releases("2.13", "2.14")
def test_sdpa_on_cpu():
    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    theirs, ours = both(lambda: F.scaled_dot_product_attention(q, q, q).sum().backward())
    assert theirs == {}
    qk = 2 * 2 * 4 * 16 * 16 * 8  # one [S, D] x [D, S] product per batch and head: 2*B*H*S*S*D
    assert ours == {"aten._scaled_dot_product_flash_attention_for_cpu": 2 * qk,  # QK^T, PV
                    "aten._scaled_dot_product_flash_attention_for_cpu_backward": 5 * qk}


@pytest.mark.torch_releases("2.13", "2.14")
def test_raw_kernels_layout():
    q = torch.empty(2, 16, 4, 8, device="meta")  # [B, S, H, D]
    args = (q, q, q, None, None, None, 16, 16)
    assert count_flops(aten._efficient_attention_forward, args) == 2 * 2 * 4 * 16 * 16 * 16
    # torch reads [B, S, H, D] as [B, H, S, D]: S=4 and H=16, so 2 * 2 * 16 * 4 * 4 * 8 * 2
    assert tfc.flop_registry[aten._efficient_attention_forward](*args) == 2 * 2*16*4*4*8 * 2


def flash_with_unequal_lengths():
    q = torch.empty(2, 16, 4, 8, device="meta")  # [B, S, H, D], Sq = 16
    k = torch.empty(2, 12, 4, 8, device="meta")  # Sk = 12
    return q, k, k, None, None, 16, 12


@pytest.mark.torch_releases("2.13")
def test_raw_flash_layout_raises_on_2_13():
    with pytest.raises(AssertionError):
        tfc.flop_registry[aten._flash_attention_forward](*flash_with_unequal_lengths())


@pytest.mark.torch_releases("2.14")
def test_raw_flash_layout_fixed_in_2_14():
    args = flash_with_unequal_lengths()
    assert tfc.flop_registry[aten._flash_attention_forward](*args) == \
        count_flops(aten._flash_attention_forward, args) == 2 * 2 * 4 * 16 * 12 * 16


@pytest.mark.torch_releases("2.13", "2.14")
def test_backend_conv_kernels():
    x, w = torch.empty(1, 3, 32, 32, device="meta"), torch.empty(8, 3, 5, 5, device="meta")
    out = torch.empty(1, 8, 28, 28, device="meta")
    args = (x, w, [0, 0], [1, 1], [1, 1], 1, True, False, True)  # benchmark=True
    assert count_flops(aten.cudnn_convolution, args, {}, out) == 2 * 28 * 28 * 8 * 3 * 25
    # torch takes benchmark=True for transposed: the input's 32 x 32 pixels instead of 28 x 28
    assert tfc.flop_registry[aten.cudnn_convolution](*args, out_val=out) == 2*32*32*8*3*25
    slow = (x, w, [5, 5], None, [1, 1], [0, 0])
    assert count_flops(aten._slow_conv2d_forward, slow, {}, out) == 2 * 28 * 28 * 8 * 3 * 25
    with pytest.raises(TypeError):
        tfc.flop_registry[aten._slow_conv2d_forward](*slow, out_val=out)


@pytest.mark.torch_releases("2.13", "2.14")
@pytest.mark.parametrize("op,nargs", [(aten.bmm, 2), (aten.baddbmm, 3)])
def test_out_dtype_overloads(op, nargs):
    a, b = torch.empty(2, 3, 4, device="meta"), torch.empty(2, 4, 5, device="meta")
    args = ((torch.empty(2, 3, 5, device="meta"),) if nargs == 3 else ()) + (a, b, torch.float)
    assert count_flops(op.dtype, args) == 2 * 2 * 3 * 4 * 5
    if torch.__version__.startswith("2.13"):  # torch 2.13 raises; 2.14 counts them right
        with pytest.raises(TypeError):
            tfc.flop_registry[op](*args, out_val=None)
    else:
        assert tfc.flop_registry[op](*args, out_val=None) == 2 * 2 * 3 * 4 * 5


@pytest.mark.torch_releases("2.13", "2.14")
@pytest.mark.parametrize("name,fn,expected", [
    ("mv", lambda: torch.mv(torch.randn(8, 16), torch.randn(16)), 2 * 8 * 16),
    ("dot", lambda: torch.dot(torch.randn(16), torch.randn(16)), 2 * 16),
    ("addbmm", lambda: torch.addbmm(torch.randn(4, 6), torch.randn(3, 4, 5),
                                    torch.randn(3, 5, 6)), 2 * 3 * 4 * 5 * 6),
    # cdist: one product per (row, column, feature) pair, as a matrix product would count
    ("cdist", lambda: torch.cdist(torch.randn(10, 3), torch.randn(20, 3)), 2 * 10 * 20 * 3),
    # LSTM: per step, x @ W_ih^T [2x32 by 32x256] and h @ W_hh^T [2x64 by 64x256], 5 steps
    ("lstm", lambda: nn.LSTM(32, 64)(torch.randn(5, 2, 32)),
     5 * (2 * 2 * 32 * 256 + 2 * 2 * 64 * 256)),
])
@pytest.mark.torch_releases("2.13", "2.14")
def test_products_torch_counts_as_zero(name, fn, expected):
    theirs, ours = both(fn)
    assert theirs == {} and sum(ours.values()) == expected, name


@pytest.mark.torch_releases("2.13", "2.14")
def test_outer_is_counted_as_its_elementwise_decomposition():
    theirs, ours = both(lambda: torch.outer(torch.randn(8), torch.randn(16)))
    assert theirs == ours == {}
    a, b = torch.empty(8, device="meta"), torch.empty(16, device="meta")
    assert count_flops(aten.outer, (a, b)) == 2 * 8 * 16


@pytest.mark.torch_releases("2.13", "2.14")
def test_reentered_module_stays_active():
    class Recursive(nn.Module):
        def forward(self, x, depth=1):
            if depth:
                x = self(x, depth - 1)
            return torch.mm(x, x)

    results = []
    for cls in (tfc.FlopCounterMode, refimpl.FlopCounterMode):
        with cls(display=False) as mode:
            Recursive()(torch.randn(4, 4))
        results.append(mode.get_flop_counts()["Recursive"][aten.mm])
    assert results == [128, 256]  # torch loses the outer call's mm after the inner returns


@pytest.mark.torch_releases("2.13", "2.14")
def test_cond_result_and_upper_bound():
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: torch.mm(x, x),
                          lambda x: torch.mm(torch.mm(x, x), x), (x,))

    x = -torch.ones(4, 4)  # pred False: the result is x @ x @ x = -16 everywhere
    results = []
    for cls in (tfc.FlopCounterMode, refimpl.FlopCounterMode):
        with cls(display=False) as mode:
            torch.mm(x, x)
            y = f(x)
        results.append((y[0, 0].item(), mode.get_total_flops()))
    assert results == [(4.0, 512), (-16.0, 384)]


@pytest.mark.torch_releases("2.13", "2.14")
def test_autograd_grad_through_a_module_with_a_leaf_input():
    model, x = nn.Linear(4, 5), torch.randn(2, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf node"), tfc.FlopCounterMode(display=False):
        torch.autograd.grad(model(x).sum(), [x])
    with refimpl.FlopCounterMode(display=False) as mode:
        torch.autograd.grad(model(x).sum(), [x])
    assert mode.get_total_flops() == 2 * (2 * 2 * 4 * 5)  # the addmm, and the mm of grad_x


@pytest.mark.torch_releases("2.13")
def test_bilinear_counts_zero():
    """F.bilinear runs aten._trilinear: no formula in either table; refimpl reports it."""
    x1, x2, w, b = torch.randn(3, 4), torch.randn(3, 5), torch.randn(6, 4, 5), torch.randn(6)
    theirs, ours = both(lambda: F.bilinear(x1, x2, w, b))
    assert theirs == ours == {}
    with refimpl.FlopCounterMode(display=False) as counter:
        nn.Bilinear(4, 5, 6)(x1, x2)
    assert counter.get_total_flops() == 0
    assert counter.uncounted_ops() == {aten._trilinear: 1}
    assert counter.get_table().splitlines()[-1] == (
        "Uncounted (no FLOP formula, not declared free): aten._trilinear x1")


@pytest.mark.torch_releases("2.13")
@pytest.mark.parametrize("mode, call", [
    (torch.inference_mode, lambda model, x: model(x)),
    (torch.no_grad, lambda model, x: model(x.view(2, 4)))], ids=["inference_mode", "no_grad"])
def test_input_that_requires_grad_under_inference_mode_or_no_grad(mode, call):
    """docs/findings.md FLOPs 11: torch's tracker cannot hook the input; refimpl counts."""
    model, x = nn.Linear(4, 5), torch.randn(2, 4, requires_grad=True)
    with pytest.raises((AttributeError, AssertionError)), tfc.FlopCounterMode(display=False), \
            mode():
        call(model, x)
    with refimpl.FlopCounterMode(display=False) as counter, mode():
        call(model, x)
    assert counter.get_flop_counts() == {"Global": {aten.addmm: 80}, "Linear": {aten.addmm: 80}}


@pytest.mark.torch_releases("2.13", "2.14")
def test_jagged_backward_with_value_dim_unlike_query():
    m = lambda *s: torch.empty(s, device="meta")
    cu = torch.tensor([0, 3, 7])
    q, k, v, g = m(1, 7, 2, 16), m(1, 7, 2, 16), m(1, 7, 2, 8), m(1, 7, 2, 8)
    args = (g, q, k, v, None, g, cu, cu, 4, 4)
    # 2 heads, sequences of 3 and 4: 2 * H * S^2 * (3 D + 2 Dv) summed
    assert count_flops(aten._efficient_attention_backward, args) == \
        sum(2 * 2 * s * s * (3 * 16 + 2 * 8) for s in (3, 4)) == 6400
    with pytest.raises(AssertionError, match=r"grad_out\.shape must match"):
        tfc.flop_registry[aten._efficient_attention_backward](*args)


@pytest.mark.torch_releases("2.13", "2.14")
def test_flex_attention_sparsity_hint_is_not_read():
    from torch._higher_order_ops.flex_attention import flex_attention

    q = torch.empty(1, 2, 8, 4, device="meta")
    hint = {"_node_meta": {"custom": {"sparsity_hint": 0.5}}}
    dense = 2 * 1 * 2 * 8 * 8 * (4 + 4)
    assert count_flops(flex_attention, (q, q, q, None, ()), hint) == dense
    assert tfc.flop_registry[flex_attention](q, q, q, None, (), out_val=None, **hint) == \
        dense // 2


@pytest.mark.torch_releases("2.13")
@pytest.mark.parametrize("name,fn,expected", [
    ("addmm_", lambda: torch.randn(3, 5).addmm_(torch.randn(3, 4), torch.randn(4, 5)),
     2 * 3 * 4 * 5),
    ("baddbmm_", lambda: torch.randn(2, 3, 5).baddbmm_(torch.randn(2, 3, 4),
                                                       torch.randn(2, 4, 5)), 2 * 2 * 3 * 4 * 5),
    ("addbmm_", lambda: torch.randn(3, 5).addbmm_(torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
     2 * 2 * 3 * 4 * 5),
    ("addmv_", lambda: torch.randn(3).addmv_(torch.randn(3, 4), torch.randn(4)), 2 * 3 * 4),
    ("addr_", lambda: torch.randn(3, 5).addr_(torch.randn(3), torch.randn(5)), 2 * 3 * 5),
])
def test_inplace_products_torch_counts_as_zero(name, fn, expected):
    """docs/differences.md "In-place matrix products" (findings FLOPs 15)."""
    theirs, ours = both(fn)
    assert theirs == {} and ours == {f"aten.{name}": expected}, (name, theirs, ours)


def _strided_nested_pair():
    a = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(5, 4)])
    b = torch.nested.nested_tensor([torch.randn(4, 2), torch.randn(4, 6)])
    return a, b


@pytest.mark.torch_releases("2.13")
@pytest.mark.parametrize("product", [torch.bmm, torch.matmul], ids=["bmm", "matmul"])
def test_nested_products_raise_in_torch(product):
    """docs/differences.md "Nested tensors" (findings FLOPs 14): each component's product
    alone, 2 (3*4*2 + 5*4*6) = 288; torch's counter raises."""
    a, b = _strided_nested_pair()
    with pytest.raises(RuntimeError), tfc.FlopCounterMode(display=False):
        product(a, b)
    with refimpl.FlopCounterMode(display=False) as mode:
        product(a, b)
    assert mode.get_total_flops() == 2 * (3 * 4 * 2 + 5 * 4 * 6) == 288


@pytest.mark.torch_releases("2.13")
def test_jagged_attention_raises_in_torch():
    """Two jagged sequences of 3 and 5, 2 heads of dim 8: 2 H L^2 (D + Dv) summed = 2176."""
    rows = [torch.randn(n, 2 * 8) for n in (3, 5)]
    q = torch.nested.nested_tensor(rows, layout=torch.jagged).unflatten(-1, (2, 8))
    q = q.transpose(1, 2)
    with pytest.raises(RuntimeError, match="irregular"), tfc.FlopCounterMode(display=False):
        F.scaled_dot_product_attention(q, q, q)
    with refimpl.FlopCounterMode(display=False) as mode:
        F.scaled_dot_product_attention(q, q, q)
    assert mode.get_total_flops() == sum(2 * 2 * n * n * (8 + 8) for n in (3, 5)) == 2176
