"""Attention and recurrent formulas against independent counts.

Attention's products are counted with the ones trick (``2 * (ones @ ones).sum()`` is the
FLOP count of a matrix product by its definition); the fused kernels' counts are also
checked against the math path, whose bmm ops the mm formulas count.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import refimpl
from refimpl.flops.formulas import count_flops

aten = torch.ops.aten


def product_terms(*pairs) -> int:
    """Sum over ((rows, inner), (inner, cols)) of 2 * (ones @ ones).sum()."""
    return sum(2 * int((torch.ones(a) @ torch.ones(b)).sum()) for a, b in pairs)


def attention_terms(b, hq, sq, sk, d, dv) -> int:
    """scores = q @ k^T, out = p @ v, for b * hq heads."""
    return b * hq * product_terms(((sq, d), (d, sk)), ((sq, sk), (sk, dv)))


def score_terms(b, hq, sq, sk, d) -> int:
    return b * hq * product_terms(((sq, d), (d, sk)))


def counts_of(fn) -> dict:
    with refimpl.FlopCounterMode(display=False) as mode:
        fn()
    return mode.get_flop_counts().get("Global", {})


@pytest.mark.parametrize("hq,hkv,sq,sk,d,dv", [(2, 2, 5, 7, 4, 4), (4, 2, 6, 6, 8, 8)])
def test_cpu_fused_sdpa_matches_math_path(hq, hkv, sq, sk, d, dv):
    q = torch.randn(2, hq, sq, d, requires_grad=True)
    k = torch.randn(2, hkv, sk, d, requires_grad=True)
    v = torch.randn(2, hkv, sk, dv, requires_grad=True)
    gqa = hq != hkv

    def run():
        F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa).sum().backward()

    with sdpa_kernel(SDPBackend.MATH):
        math = counts_of(run)
    fused = counts_of(run)
    fwd = fused[aten._scaled_dot_product_flash_attention_for_cpu]
    bwd = fused[aten._scaled_dot_product_flash_attention_for_cpu_backward]
    assert fwd == attention_terms(2, hq, sq, sk, d, dv)
    math_total = sum(math.values())
    # the math path's forward + backward, plus the kernel's recomputation of the scores
    assert fwd + bwd == math_total + score_terms(2, hq, sq, sk, d)


def meta(*shape):
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize("op", [aten._scaled_dot_product_efficient_attention.default,
                                aten._scaled_dot_product_flash_attention.default,
                                aten._scaled_dot_product_cudnn_attention.default,
                                aten._scaled_dot_product_fused_attention_overrideable.default])
def test_sdpa_kernels_bhsd(op):
    q, k, v = meta(2, 4, 5, 8), meta(2, 2, 7, 8), meta(2, 2, 7, 6)
    assert count_flops(op, (q, k, v), {}, None) == attention_terms(2, 4, 5, 7, 8, 6)


@pytest.mark.parametrize("op", [aten._scaled_dot_product_efficient_attention_backward,
                                aten._scaled_dot_product_flash_attention_backward,
                                aten._scaled_dot_product_cudnn_attention_backward,
                                aten._scaled_dot_product_flash_attention_for_cpu_backward])
def test_sdpa_backward_kernels(op):
    """Backward = 2 x forward products (as the math path's autograd) + the scores again."""
    q, k, v = meta(2, 4, 5, 8), meta(2, 4, 7, 8), meta(2, 4, 7, 6)
    expected = 2 * attention_terms(2, 4, 5, 7, 8, 6) + score_terms(2, 4, 5, 7, 8)
    assert count_flops(op, (meta(2, 4, 5, 6), q, k, v), {}, None) == expected


def test_raw_kernels_read_bshd_layout():
    q, k, v = meta(2, 5, 3, 8), meta(2, 7, 3, 8), meta(2, 7, 3, 6)
    fwd = attention_terms(2, 3, 5, 7, 8, 6)
    bwd = 2 * fwd + score_terms(2, 3, 5, 7, 8)
    assert count_flops(aten._flash_attention_forward, (q, k, v, None, None, 5, 7), {}) == fwd
    assert count_flops(aten._efficient_attention_forward,
                       (q, k, v, None, None, None, 5, 7), {}) == fwd
    g, out, lse = meta(2, 5, 3, 6), meta(2, 5, 3, 6), meta(2, 3, 5)
    assert count_flops(aten._flash_attention_backward,
                       (g, q, k, v, out, lse, None, None, 5, 7), {}) == bwd
    assert count_flops(aten._efficient_attention_backward,
                       (g, q, k, v, None, out, None, None, 5, 7), {}) == bwd


def jagged_expected(lengths_q, lengths_k, h, d, dv) -> int:
    return sum(attention_terms(1, h, sq, sk, d, dv) for sq, sk in zip(lengths_q, lengths_k))


def test_nested_offsets_count_each_sequence():
    cu_q, cu_k = torch.tensor([0, 3, 8]), torch.tensor([0, 4, 6])
    q, k, v = meta(8, 2, 4), meta(6, 2, 4), meta(6, 2, 5)
    expected = jagged_expected([3, 5], [4, 2], 2, 4, 5)
    assert count_flops(aten._flash_attention_forward, (q, k, v, cu_q, cu_k, 5, 4), {}) == \
        expected
    q4, k4, v4 = meta(1, 8, 2, 4), meta(1, 6, 2, 4), meta(1, 6, 2, 5)
    assert count_flops(aten._efficient_attention_forward,
                       (q4, k4, v4, None, cu_q, cu_k, 5, 4), {}) == expected


def test_unknown_offsets_take_the_maximum():
    cu = torch.empty(3, dtype=torch.int64, device="meta")  # values unknown
    q, k, v = meta(8, 2, 4), meta(8, 2, 4), meta(8, 2, 4)
    assert count_flops(aten._flash_attention_forward, (q, k, v, cu, cu, 5, 6), {}) == \
        jagged_expected([5, 5], [6, 6], 2, 4, 4)


def _varlen_case(name: str) -> tuple:
    """(args, expected FLOPs) of one ``torch_attn`` varlen op: two sequences of 2 and 5."""
    cu = torch.tensor([0, 2, 7])
    q, k, v = meta(7, 2, 4), meta(7, 2, 4), meta(7, 2, 3)
    fwd = jagged_expected([2, 5], [2, 5], 2, 4, 3)
    bwd = 2 * fwd + sum(score_terms(1, 2, s, s, 4) for s in (2, 5))
    return {
        "_varlen_attn": ((q, k, v, cu, None, 5, 5), fwd),
        "_varlen_attn_out": ((meta(7, 2, 3), q, k, v, cu, cu, 5, 5), fwd),
        "_varlen_attn_backward": ((meta(7, 2, 3), q, k, v, meta(7, 2, 3), meta(2, 7), cu, cu,
                                   5, 5), bwd),
    }[name]


@pytest.mark.parametrize("name", ["_varlen_attn", "_varlen_attn_out", "_varlen_attn_backward"])
def test_varlen_ops_when_present(name):
    """Each varlen op is counted where this torch has it (``_varlen_attn_out`` is new in
    2.12; the module in 2.11); skipped, saying which op is missing, elsewhere."""
    pytest.importorskip("torch.nn.attention.varlen")
    if not hasattr(torch.ops.torch_attn, name):
        pytest.skip(f"this torch ({torch.__version__}) has no torch_attn.{name}")
    args, expected = _varlen_case(name)
    assert count_flops(getattr(torch.ops.torch_attn, name), args, {}) == expected


def test_flex_attention_hops():
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    q, k, v = meta(2, 4, 5, 8), meta(2, 2, 7, 8), meta(2, 2, 7, 6)
    fwd = attention_terms(2, 4, 5, 7, 8, 6)
    assert count_flops(flex_attention, (q, k, v, None, ()), {}) == fwd
    args = (q, k, v, meta(2, 4, 5, 6), meta(2, 4, 5), meta(2, 4, 5, 6))
    assert count_flops(flex_attention_backward, args, {}) == 2 * fwd + score_terms(2, 4, 5, 7, 8)


def test_attention_shape_errors_name_the_problem():
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        count_flops(aten._scaled_dot_product_flash_attention,
                    (meta(1, 3, 4, 8), meta(1, 2, 4, 8), meta(1, 2, 4, 8)), {})


def test_fused_lstm_layer_matches_unrolled_cells():
    """nn.LSTM on CPU runs mkldnn_rnn_layer; the same LSTM unrolled into LSTMCell steps runs
    addmm/mm, which the mm formulas count. Both compute the same products."""
    torch.manual_seed(0)
    lstm, cell = nn.LSTM(3, 4), nn.LSTMCell(3, 4)
    x = torch.randn(5, 2, 3, requires_grad=True)
    h0, c0 = torch.zeros(1, 2, 4, requires_grad=True), torch.zeros(1, 2, 4, requires_grad=True)

    def fused():
        lstm(x, (h0, c0))[0].sum().backward()

    def unrolled():
        h, c, outs = h0[0], c0[0], []
        for step in x:
            h, c = cell(step, (h, c))
            outs.append(h)
        torch.stack(outs).sum().backward()

    fused_counts, unrolled_counts = counts_of(fused), counts_of(unrolled)
    assert aten.mkldnn_rnn_layer in fused_counts, "nn.LSTM did not take the fused CPU path"
    assert fused_counts[aten.mkldnn_rnn_layer] == 2 * 5 * 2 * (4 * 4 * 3 + 4 * 4 * 4)
    assert sum(fused_counts.values()) == sum(unrolled_counts.values())
