"""Pins of torch's FLOP table against refimpl's: every op in both tables, on the same drawn
inputs (meta tensors: the formulas read shapes, and most kernels need CUDA to run). Moved
from properties/ (issue 11): this checks torch, not the target.

Each op's count must be equal, except for the differences documented in docs/differences.md
"## FLOPs"; for those torch must give exactly the documented wrong answer (so an undocumented
mismatch in either direction fails) AND refimpl must give the hand count written here. Each
expectation is marked with the torch releases it holds for (torch 2.14 reads the raw flash
kernels' [B, S, H, D] layout right; 2.13 does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.flops.formulas import count_flops, flop_formulas
from refimpl.flops.formulas.attention import (
    attention_backward_flops,
    attention_flops,
    dims_bhsd,
)
from refimpl.strategies.conv import conv_configs
from refimpl.strategies.matmul import matmul_cases, matmul_dims

aten = torch.ops.aten


def torch_table() -> dict:
    import torch.nn.attention.varlen  # noqa: F401  (registers the varlen entries)
    from torch.utils.flop_counter import flop_registry

    return flop_registry


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(shape, device="meta")


@dataclass(frozen=True)
class Case:
    """Inputs for one formula call, and what torch is documented to answer instead of
    refimpl's count (None: the same count); for a documented difference, refimpl's hand
    count (derived here, not by refimpl's table)."""

    args: tuple
    out: Any = None
    torch_expected: Any = None  # an int, or an exception type torch raises
    ours_expected: int | None = None


def conv_by_hand(cfg) -> int:
    """2 FLOPs per (output element, tap, input channel of its group) for a direct conv; per
    (input element, tap, output channel of its group) for a transposed one."""
    if cfg.transposed:
        per = cfg.in_channels * (cfg.out_channels // cfg.groups) * prod(cfg.kernel)
        return 2 * cfg.batch * prod(cfg.input_size) * per
    per = cfg.out_channels * (cfg.in_channels // cfg.groups) * prod(cfg.kernel)
    return 2 * cfg.batch * prod(cfg.output_size) * per


def attention_by_hand(b, hq, sq, sk, d, dv, backward: bool) -> int:
    """q k^T and p v per query head (2 Sq Sk D + 2 Sq Sk Dv); backward: the recomputed
    scores, dP, dV, dQ, dK (2 Sq Sk (3 D + 2 Dv))."""
    return 2 * b * hq * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))


@st.composite
def mm_cases(draw, op):
    b, m, k, n = draw(matmul_dims())
    args = {"mm": (meta(m, k), meta(k, n)), "_scaled_mm": (meta(m, k), meta(k, n), meta(), meta()),
            "addmm": (meta(m, n), meta(m, k), meta(k, n)), "bmm": (meta(b, m, k), meta(b, k, n)),
            "baddbmm": (meta(b, m, n), meta(b, m, k), meta(b, k, n))}[op]
    return Case(args)


def conv_common(cfg) -> tuple:
    return (list(cfg.stride), list(cfg.padding), list(cfg.dilation), cfg.transposed,
            list(cfg.output_padding), cfg.groups)


@st.composite
def conv_cases(draw, op):
    transposed = st.just(False) if op in ("cudnn_convolution", "_slow_conv2d_forward") else None
    dims = st.just(2) if op == "_slow_conv2d_forward" else None
    cfg = draw(conv_configs(spatial_dims=dims, transposed=transposed))
    x, w, out = meta(*cfg.input_shape), meta(*cfg.weight_shape), meta(*cfg.output_shape)
    if op == "cudnn_convolution":  # (x, w, padding, stride, dilation, groups, benchmark, ...)
        benchmark = draw(st.booleans())
        args = (x, w, list(cfg.padding), list(cfg.stride), list(cfg.dilation), cfg.groups,
                benchmark, False, True)
        # documented: torch reads `benchmark` as `transposed` (input spatial size)
        if benchmark:
            return Case(args, out, _conv_as_transposed(cfg), conv_by_hand(cfg))
        return Case(args, out)
    if op == "_slow_conv2d_forward":  # documented: torch raises TypeError
        return Case((x, w, list(cfg.kernel), None, list(cfg.stride), list(cfg.padding)), out,
                    TypeError, conv_by_hand(cfg))
    extra = (False, False, True, True) if op == "_convolution" else ()
    return Case((x, w, None, *conv_common(cfg), *extra), out)


def _conv_as_transposed(cfg) -> int:
    """torch's count when it takes a plain conv for a transposed one."""
    return 2 * cfg.batch * prod(cfg.input_size) * prod(cfg.weight_shape)


@st.composite
def conv_backward_cases(draw):
    cfg = draw(conv_configs())
    mask = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    out = (meta(*cfg.input_shape) if mask[0] else None,
           meta(*cfg.weight_shape) if mask[1] else None,
           meta(cfg.out_channels) if mask[2] else None)
    args = (meta(*cfg.output_shape), meta(*cfg.input_shape), meta(*cfg.weight_shape),
            [cfg.out_channels], *conv_common(cfg), list(mask))
    ours = conv_by_hand(cfg) * (mask[0] + mask[1])  # grad_input, grad_weight: a forward each
    gap = (cfg.groups - 1) * conv_by_hand(cfg) if mask[1] else 0  # documented: grouped grad_w
    return Case(args, out, ours + gap if gap else None, ours)


@st.composite
def attention_dims(draw):
    heads = draw(st.sampled_from([(1, 1), (2, 2), (4, 2), (3, 1)]))
    size = st.integers(1, 5)
    return draw(size), *heads, draw(size), draw(size), draw(size), draw(size)


@st.composite
def sdpa_cases(draw, backward: bool):
    b, hq, hkv, sq, sk, d, dv = draw(attention_dims())
    qkv = (meta(b, hq, sq, d), meta(b, hkv, sk, d), meta(b, hkv, sk, dv))
    return Case(((meta(b, hq, sq, dv),) if backward else ()) + qkv)


@st.composite
def flex_cases(draw, backward: bool):
    b, hq, hkv, sq, sk, d, dv = draw(attention_dims())
    qkv = (meta(b, hq, sq, d), meta(b, hkv, sk, d), meta(b, hkv, sk, dv))
    if backward:  # (q, k, v, out, logsumexp, grad_out, ...)
        return Case((*qkv, meta(b, hq, sq, dv), meta(b, hq, sq), meta(b, hq, sq, dv)))
    return Case((*qkv, None, ()))


@st.composite
def jagged(draw):
    """Per-sequence lengths as real offsets, and [total, H, D] tensors."""
    n = draw(st.integers(1, 3))
    lq = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    lk = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    _, hq, hkv, _, _, d, dv = draw(attention_dims())
    offsets = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()])
    return dict(q=meta(sum(lq), hq, d), k=meta(sum(lk), hkv, d), v=meta(sum(lk), hkv, dv),
                g=meta(sum(lq), hq, dv), cu_q=offsets(lq), cu_k=offsets(lk), max_q=max(lq),
                max_k=max(lk), lse=meta(hq, sum(lq)))


@st.composite
def raw_attention_cases(draw, op, flash_fixed: bool = False):
    if "efficient" not in op and "flash" not in op:
        return draw(varlen_cases(op))
    if draw(st.booleans()):
        return draw(dense_raw_cases(op, flash_fixed))
    j = draw(jagged())
    add_batch = (lambda t: t.unsqueeze(0)) if "efficient" in op else (lambda t: t)
    q, k, v, g = (add_batch(j[n]) for n in "qkvg")
    offsets = (j["cu_q"], j["cu_k"], j["max_q"], j["max_k"])
    args = {"_flash_attention_forward": (q, k, v, *offsets),
            "_flash_attention_backward": (g, q, k, v, g, j["lse"], *offsets),
            "_efficient_attention_forward": (q, k, v, None, *offsets),
            "_efficient_attention_backward": (g, q, k, v, None, g, *offsets)}[op]
    # documented: torch's nested backward requires grad_out's shape to be query's (Dv == D)
    mismatch = op.endswith("backward") and g.shape != q.shape
    if not mismatch:
        return Case(args)
    return Case(args, None, AssertionError, jagged_by_hand(j, backward=True))


def jagged_by_hand(j: dict, backward: bool) -> int:
    """Each sequence on its own lengths (offsets differences)."""
    hq, d, dv = j["q"].shape[-2], j["q"].shape[-1], j["v"].shape[-1]
    lens = lambda cu: [int(n) for n in cu.diff().tolist()]
    return sum(attention_by_hand(1, hq, sq, sk, d, dv, backward)
               for sq, sk in zip(lens(j["cu_q"]), lens(j["cu_k"])))


@st.composite
def dense_raw_cases(draw, op, flash_fixed: bool = False):
    """Dense [B, S, H, D] inputs: documented, torch reads them as [B, H, S, D] (the raw
    efficient kernels on 2.13 and 2.14, the raw flash kernels on 2.13)."""
    b, hq, hkv, sq, sk, d, dv = draw(attention_dims())
    q, k, v, g = meta(b, sq, hq, d), meta(b, sk, hkv, d), meta(b, sk, hkv, dv), meta(b, sq, hq, dv)
    none4 = (None, None, sq, sk)
    args = {"_flash_attention_forward": (q, k, v, *none4),
            "_flash_attention_backward": (g, q, k, v, g, meta(b, hq, sq), *none4),
            "_efficient_attention_forward": (q, k, v, None, *none4),
            "_efficient_attention_backward": (g, q, k, v, None, g, *none4)}[op]
    backward = op.endswith("backward")
    ours = attention_by_hand(b, hq, sq, sk, d, dv, backward)
    if "flash" in op and flash_fixed:  # torch 2.14 reads flash's layout right
        return Case(args, None, None, ours)
    count = attention_backward_flops if backward else attention_flops
    try:  # torch's answer: our count for the shapes read as [B, H, S, D]
        misread = count(dims_bhsd(q.shape, k.shape, v.shape))
    except ValueError:
        misread = AssertionError
    return Case(args, None, misread, ours)


@st.composite
def varlen_cases(draw, op):
    j = draw(jagged())
    offsets = (j["cu_q"], j["cu_k"], j["max_q"], j["max_k"])
    args = {"_varlen_attn": (j["q"], j["k"], j["v"], *offsets),
            "_varlen_attn_out": (j["g"], j["q"], j["k"], j["v"], *offsets),
            "_varlen_attn_backward": (j["g"], j["q"], j["k"], j["v"], j["g"], j["lse"],
                                      *offsets)}[op]
    mismatch = op.endswith("backward") and j["g"].shape != j["q"].shape  # as above
    if not mismatch:
        return Case(args)
    return Case(args, None, AssertionError, jagged_by_hand(j, backward=True))


def case_strategy(op: Any, flash_fixed: bool = False) -> st.SearchStrategy[Case]:
    name = str(op).split(".")[-1]
    if name in ("mm", "_scaled_mm", "addmm", "bmm", "baddbmm"):
        return mm_cases(name)
    if name == "convolution_backward":
        return conv_backward_cases()
    if "conv" in name:
        return conv_cases(name)
    if name.startswith("_scaled_dot_product"):
        return sdpa_cases(backward=name.endswith("backward"))
    if name.startswith("flex_attention"):
        return flex_cases(backward=name.endswith("backward"))
    return raw_attention_cases(name, flash_fixed)


SHARED = sorted((op for op in torch_table() if op in flop_formulas), key=str)
RAW_FLASH = [aten._flash_attention_forward, aten._flash_attention_backward]


@pytest.mark.torch_releases("2.13", "2.14")
def test_refimpl_covers_torchs_table():
    assert len(SHARED) == len(torch_table())


def check(op: Any, case: Case) -> None:
    ours = count_flops(op, case.args, {}, case.out)
    if case.ours_expected is not None:  # refimpl's hand count (every documented difference)
        assert ours == case.ours_expected, (op, case, "refimpl", ours)
    else:  # every drawn case is a real call (not a vacuous check)
        assert ours > 0, (op, case)
    expected = ours if case.torch_expected is None else case.torch_expected
    if isinstance(expected, type):
        with pytest.raises(expected):
            torch_table()[op](*case.args, out_val=case.out)
        return
    assert torch_table()[op](*case.args, out_val=case.out) == expected, (op, case)


@pytest.mark.torch_releases("2.13", "2.14")
@pytest.mark.parametrize("op", [op for op in SHARED if op not in RAW_FLASH], ids=str)
@given(data=st.data())
def test_shared_entry_matches_torch_or_documented(op, data):
    check(op, data.draw(case_strategy(op)))


@pytest.mark.torch_releases("2.13")
@pytest.mark.parametrize("op", RAW_FLASH, ids=str)
@given(data=st.data())
def test_raw_flash_misreads_the_layout_on_2_13(op, data):
    check(op, data.draw(case_strategy(op, flash_fixed=False)))


@pytest.mark.torch_releases("2.14")
@pytest.mark.parametrize("op", RAW_FLASH, ids=str)
@given(data=st.data())
def test_raw_flash_reads_the_layout_right_on_2_14(op, data):
    check(op, data.draw(case_strategy(op, flash_fixed=True)))


# --- whole-counter differentials (moved from properties/test_flops.py) -------------

def global_counts(counter_cls, fn) -> dict:
    with counter_cls(display=False) as mode:
        fn()
    return mode.get_flop_counts().get("Global", {})


@pytest.mark.torch_releases("2.13", "2.14")
@given(conv_configs())
def test_conv_counts_match_torch_or_documented(cfg):
    """docs/differences.md "grouped convolution backward": torch charges grad_weight
    ``groups`` times; refimpl once."""
    from torch.utils.flop_counter import FlopCounterMode as TorchCounter

    from refimpl.flops.counter import FlopCounterMode

    def fn():
        x, w, b = cfg.tensors(requires_grad=(True, True))
        cfg.run(x, w, b).sum().backward()

    ours, theirs = global_counts(FlopCounterMode, fn), global_counts(TorchCounter, fn)
    assert ours == {aten.convolution: conv_by_hand(cfg),
                    aten.convolution_backward: 2 * conv_by_hand(cfg)}
    assert theirs[aten.convolution] == ours[aten.convolution]
    assert theirs[aten.convolution_backward] - ours[aten.convolution_backward] == \
        (cfg.groups - 1) * conv_by_hand(cfg)


@pytest.mark.torch_releases("2.13", "2.14")
@given(matmul_cases(ops=st.sampled_from(["mm", "addmm", "bmm", "baddbmm"])))
def test_mm_counts_match_torch(case):
    from torch.utils.flop_counter import FlopCounterMode as TorchCounter

    from refimpl.flops.counter import FlopCounterMode

    args = case.args(requires_grad=True)

    def fn():
        case.run(*args).sum().backward()

    ours = global_counts(FlopCounterMode, fn)
    assert sum(ours.values()) > 0
    assert global_counts(TorchCounter, fn) == ours
