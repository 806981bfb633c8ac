"""FLOP-counter properties, through the backend under test's ``flop_counter``, and a
differential check of refimpl's formula table against torch's.

Run against torch with ``pytest properties/test_flops.py --refimpl-target torch``: the
grouped-convolution property then fails on torch's grad_weight count (docs/findings.md).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import find, given
from hypothesis import strategies as st

from refimpl.oracle import component, load_backend
from refimpl.strategies.conv import ConvConfig, conv_configs
from refimpl.strategies.matmul import MatmulCase, matmul_cases

aten = torch.ops.aten
CORE_MM = st.sampled_from(["mm", "addmm", "bmm", "baddbmm"])


def counts(backend, fn) -> dict:
    """{op packet: FLOPs} of running ``fn`` under the backend's counter."""
    with component(backend, "flop_counter")(display=False) as mode:
        fn()
    return mode.get_flop_counts().get("Global", {})


def run_conv(cfg: ConvConfig, grads: tuple[bool, bool]):
    x, w, b = cfg.tensors(requires_grad=grads)

    def fn():
        out = cfg.run(x, w, b)
        if any(grads):
            out.sum().backward()

    return fn


# --- the strategies themselves -------------------------------------------------------------

@given(conv_configs())
def test_conv_configs_are_valid(cfg):
    x, w, b = cfg.tensors()
    assert cfg.run(x, w, b).shape == cfg.output_shape
    assert min(cfg.output_size) >= 1 and cfg.in_channels % cfg.groups == 0


@pytest.mark.parametrize("feature", [
    lambda c: c.spatial_dims == 3 and c.transposed,
    lambda c: c.groups > 1 and c.in_channels == c.groups,  # depthwise
    lambda c: c.transposed and max(c.output_padding) > 0,
    lambda c: max(c.stride) == 2 and max(c.dilation) == 2 and max(c.padding) > 0,
    lambda c: c.bias and c.batch > 1 and c.spatial_dims == 1,
])
def test_conv_configs_cover(feature):
    found = find(conv_configs(), feature)  # find's own example budget, not the profile's
    assert feature(found)


@given(matmul_cases())
def test_matmul_cases_are_valid(case: MatmulCase):
    out = case.run(*case.args())
    assert out.numel() >= 1


def test_matmul_cases_cover_every_op():
    from refimpl.strategies.matmul import MATMUL_OPS

    for op in MATMUL_OPS:
        case = find(matmul_cases(), lambda c, op=op: c.op == op and c.k > 1)
        assert case.op == op


# --- invariants of the backend's counter ---------------------------------------------------

@given(conv_configs())
def test_conv_backward_is_twice_forward(refimpl_backend, cfg):
    c = counts(refimpl_backend, run_conv(cfg, (True, True)))
    assert c[aten.convolution_backward] == 2 * c[aten.convolution], cfg


@given(conv_configs(), st.sampled_from([(True, False), (False, True)]))
def test_conv_backward_one_gradient_costs_one_forward(refimpl_backend, cfg, grads):
    c = counts(refimpl_backend, run_conv(cfg, grads))
    assert c[aten.convolution_backward] == c[aten.convolution], (cfg, grads)


@given(matmul_cases(ops=CORE_MM))
def test_mm_family_is_2mnk(refimpl_backend, case):
    args = case.args()
    b, m, k, n = case.multiplied
    assert sum(counts(refimpl_backend, lambda: case.run(*args)).values()) == 2 * b * m * k * n


@given(conv_configs(), st.integers(2, 3))
def test_conv_counts_scale_with_batch(refimpl_backend, cfg, factor):
    one = sum(counts(refimpl_backend, run_conv(cfg.with_batch(1), (True, True))).values())
    many = sum(counts(refimpl_backend, run_conv(cfg.with_batch(factor), (True, True))).values())
    assert many == factor * one


@given(matmul_cases(ops=st.sampled_from(["bmm", "baddbmm"])), st.integers(2, 3))
def test_bmm_counts_scale_with_batch(refimpl_backend, case, factor):
    def total(batch):
        scaled = MatmulCase(case.op, batch, case.m, case.k, case.n,
                            None if case.bias_shape is None else (1, case.m, case.n))
        args = scaled.args()
        return sum(counts(refimpl_backend, lambda: scaled.run(*args)).values())

    assert total(case.batch * factor) == factor * total(case.batch)


@given(conv_configs())
def test_same_program_twice_counts_twice(refimpl_backend, cfg):
    once = run_conv(cfg, (True, True))
    single = counts(refimpl_backend, once)
    double = counts(refimpl_backend, lambda: (once(), once()))
    assert double == {op: 2 * n for op, n in single.items()}


# --- differential: refimpl's table against torch's, on the ops both cover ------------------

def torch_minus_refimpl_documented(cfg: ConvConfig) -> int:
    """The documented difference (docs/differences.md, "grouped convolution backward"):
    torch counts grad_weight ``groups`` times; refimpl once."""
    return (cfg.groups - 1) * cfg.macs() * 2


@given(conv_configs())
def test_conv_counts_match_torch_or_documented(cfg):
    torch_backend = load_backend("torch")
    ours = counts(load_backend("refimpl"), run_conv(cfg, (True, True)))
    theirs = counts(torch_backend, run_conv(cfg, (True, True)))
    assert theirs[aten.convolution] == ours[aten.convolution]
    assert theirs[aten.convolution_backward] - ours[aten.convolution_backward] == \
        torch_minus_refimpl_documented(cfg)


@given(matmul_cases(ops=CORE_MM))
def test_mm_counts_match_torch(case):
    args = case.args(requires_grad=True)

    def fn():
        case.run(*args).sum().backward()

    ours = counts(load_backend("refimpl"), fn)
    assert counts(load_backend("torch"), fn) == ours


@given(st.integers(1, 2), st.sampled_from([(1, 1), (2, 1), (4, 2)]), st.integers(1, 5),
       st.integers(1, 5), st.integers(1, 4), st.integers(1, 4))
def test_sdpa_kernel_formulas_match_torch(b, heads, sq, sk, d, dv):
    """The fused SDPA kernels' formulas, called on meta tensors (the kernels need CUDA)."""
    from torch.utils.flop_counter import flop_registry

    from refimpl.flops.formulas import count_flops

    hq, hkv = heads
    q = torch.empty(b, hq, sq, d, device="meta")
    k, v = torch.empty(b, hkv, sk, d, device="meta"), torch.empty(b, hkv, sk, dv, device="meta")
    g = torch.empty(b, hq, sq, dv, device="meta")
    for op in [aten._scaled_dot_product_efficient_attention,
               aten._scaled_dot_product_flash_attention,
               aten._scaled_dot_product_cudnn_attention]:
        assert count_flops(op, (q, k, v)) == flop_registry[op](q, k, v, out_val=None)
    for op in [aten._scaled_dot_product_efficient_attention_backward,
               aten._scaled_dot_product_flash_attention_backward,
               aten._scaled_dot_product_cudnn_attention_backward]:
        assert count_flops(op, (g, q, k, v)) == flop_registry[op](g, q, k, v, out_val=None)
