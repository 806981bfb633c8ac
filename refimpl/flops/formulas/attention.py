"""FLOP formulas for scaled-dot-product attention: fused SDPA kernels (math is counted
through the bmm it decomposes to), the raw flash/efficient kernels, nested (jagged) and
varlen attention, and flex attention.

Forward. For query ``[B, Hq, Sq, D]``, key ``[B, Hkv, Sk, D]``, value ``[B, Hkv, Sk, Dv]``
(``Hq`` a multiple of ``Hkv``: grouped-query attention broadcasts each key/value head to
``Hq / Hkv`` query heads), attention is two batched matrix products per query head:

    scores = q @ k^T   [Sq, D] x [D, Sk]   2 * Sq * Sk * D
    out    = p @ v     [Sq, Sk] x [Sk, Dv] 2 * Sq * Sk * Dv

so ``2 * B * Hq * Sq * Sk * (D + Dv)``. Softmax, scaling and masking are not counted, and a
causal mask does not halve the count (the math path computes the full products too).

Backward. The kernels recompute ``scores`` (2 Sq Sk D), then ``dP = dO @ v^T`` (2 Sq Sk Dv),
``dV = p^T @ dO`` (2 Sq Sk Dv), ``dQ = dS @ k`` (2 Sq Sk D) and ``dK = dS^T @ q`` (2 Sq Sk D):
``2 * B * Hq * Sq * Sk * (3 D + 2 Dv)``.

Layouts. The ``_scaled_dot_product_*`` ops and flex attention take ``[B, H, S, D]``; the raw
``_flash_attention_*`` / ``_efficient_attention_*`` kernels take ``[B, S, H, D]`` (their output
is ``[B, S, H, D]`` and their logsumexp ``[B, H, S]``). With sequence offsets (nested jagged
tensors, varlen) the raw kernels take ``[total, H, D]`` (flash, varlen) or
``[1, total, H, D]`` (efficient): each sequence is counted with its own lengths, read from
the offsets when they are real, else taken as the given maximum (an upper bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import ops
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor

from refimpl.flops.formulas.registry import present, register_flop_formula

aten = ops.aten


@dataclass(frozen=True)
class AttentionDims:
    """The sizes one attention call multiplies together."""

    batch: int
    heads: int  # query heads
    seq_q: int
    seq_k: int
    dim: int  # query/key head dim
    dim_v: int


def attention_flops(d: AttentionDims) -> int:
    """Forward: ``2 * B * Hq * Sq * Sk * (D + Dv)``."""
    return 2 * d.batch * d.heads * d.seq_q * d.seq_k * (d.dim + d.dim_v)


def attention_backward_flops(d: AttentionDims) -> int:
    """Backward: ``2 * B * Hq * Sq * Sk * (3 D + 2 Dv)``."""
    return 2 * d.batch * d.heads * d.seq_q * d.seq_k * (3 * d.dim + 2 * d.dim_v)


def dims_bhsd(q, k, v) -> AttentionDims:
    """Sizes from ``[B, H, S, D]`` shapes, checking that they fit together."""
    b, hq, sq, dq = q
    b2, hk, sk, dk = k
    b3, hv, sv, dv = v
    if not (b == b2 == b3 and hk == hv and sk == sv and dq == dk):
        raise ValueError(f"attention: query {tuple(q)}, key {tuple(k)} and value {tuple(v)} "
                         "do not fit together")
    if hq % hk != 0:
        raise ValueError(f"attention: query heads ({hq}) must be a multiple of key/value "
                         f"heads ({hk})")
    return AttentionDims(b, hq, sq, sk, dq, dv)


def dims_bshd(q, k, v) -> AttentionDims:
    """Sizes from the raw kernels' ``[B, S, H, D]`` shapes."""
    swap = lambda s: (s[0], s[2], s[1], s[3])
    return dims_bhsd(swap(q), swap(k), swap(v))


def sequence_lengths(offsets: torch.Tensor, max_len: int) -> list[int]:
    """Per-sequence lengths from cumulative offsets; for fake/meta offsets (values unknown)
    every sequence is taken at ``max_len``, an upper bound."""

    if isinstance(offsets, FakeTensor | FunctionalTensor) or offsets.device.type == "meta":
        return [int(max_len)] * (offsets.shape[0] - 1)
    return [int(n) for n in offsets.diff().tolist()]


def per_sequence_dims(q, k, v, cu_q, cu_k, max_q, max_k) -> list[AttentionDims]:
    """One AttentionDims per sequence of a jagged batch; q/k/v are ``[..., total, H, D]``."""
    hq, dq = q.shape[-2:]
    hk, dk = k.shape[-2:]
    lens_q = sequence_lengths(cu_q, max_q)
    lens_k = sequence_lengths(cu_k, max_k)
    if len(lens_q) != len(lens_k):
        raise ValueError(f"attention: {len(lens_q)} query offsets intervals but "
                         f"{len(lens_k)} key intervals")
    return [dims_bhsd((1, hq, sq, dq), (1, hk, sk, dk), (1, hk, sk, v.shape[-1]))
            for sq, sk in zip(lens_q, lens_k)]


def raw_dims(q, k, v, cu_q, cu_k, max_q, max_k) -> list[AttentionDims]:
    """Raw kernels: jagged when offsets are given, else dense ``[B, S, H, D]``."""
    if cu_q is not None:
        return per_sequence_dims(q, k, v, cu_q, cu_q if cu_k is None else cu_k, max_q, max_k)
    return [dims_bshd(q.shape, k.shape, v.shape)]


SDPA_FORWARD = [aten._scaled_dot_product_efficient_attention,
                 aten._scaled_dot_product_flash_attention,
                 aten._scaled_dot_product_cudnn_attention,
                 *present(aten, "_scaled_dot_product_flash_attention_for_cpu",
                          "_scaled_dot_product_fused_attention_overrideable")]
SDPA_BACKWARD = [aten._scaled_dot_product_efficient_attention_backward,
                  aten._scaled_dot_product_flash_attention_backward,
                  aten._scaled_dot_product_cudnn_attention_backward,
                  *present(aten, "_scaled_dot_product_flash_attention_for_cpu_backward",
                           "_scaled_dot_product_fused_attention_overrideable_backward")]


@register_flop_formula(SDPA_FORWARD)
def sdpa_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    """The fused SDPA kernels (flash, flash-for-CPU, efficient, cudnn, overrideable):
    (query, key, value, ...) in ``[B, H, S, D]``."""
    return attention_flops(dims_bhsd(q_shape, k_shape, v_shape))


@register_flop_formula(SDPA_BACKWARD)
def sdpa_backward_flop(grad_out_shape, q_shape, k_shape, v_shape, *args, out_shape=None,
                       **kwargs) -> int:
    """Their backwards: (grad_out, query, key, value, ...)."""
    return attention_backward_flops(dims_bhsd(q_shape, k_shape, v_shape))


@register_flop_formula(aten._flash_attention_forward, get_raw=True)
def flash_attention_forward_flop(q, k, v, cu_q, cu_k, max_q, max_k, *args, out_val=None,
                                 **kwargs) -> int:
    """_flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, ...)."""
    return sum(map(attention_flops, raw_dims(q, k, v, cu_q, cu_k, max_q, max_k)))


@register_flop_formula(aten._flash_attention_backward, get_raw=True)
def flash_attention_backward_flop(grad_out, q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                                  *args, out_val=None, **kwargs) -> int:
    """_flash_attention_backward(grad_out, q, k, v, out, lse, cum_seq_q, cum_seq_k, ...)."""
    return sum(map(attention_backward_flops, raw_dims(q, k, v, cu_q, cu_k, max_q, max_k)))


@register_flop_formula(aten._efficient_attention_forward, get_raw=True)
def efficient_attention_forward_flop(q, k, v, bias, cu_q, cu_k, max_q, max_k, *args,
                                     out_val=None, **kwargs) -> int:
    """_efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, ...)."""
    return sum(map(attention_flops, raw_dims(q, k, v, cu_q, cu_k, max_q, max_k)))


@register_flop_formula(aten._efficient_attention_backward, get_raw=True)
def efficient_attention_backward_flop(grad_out, q, k, v, bias, out, cu_q, cu_k, max_q, max_k,
                                      *args, out_val=None, **kwargs) -> int:
    """_efficient_attention_backward(grad_out, q, k, v, bias, out, cu_seqlens_q, ...)."""
    return sum(map(attention_backward_flops, raw_dims(q, k, v, cu_q, cu_k, max_q, max_k)))


def varlen_flop(q, k, v, cu_q, cu_k, max_q, max_k, *args, out_val=None, **kwargs) -> int:
    """torch_attn::_varlen_attn(q, k, v, cu_seq_q, cu_seq_k or None, max_q, max_k, ...)."""
    cu_k = cu_q if cu_k is None else cu_k
    return sum(map(attention_flops, per_sequence_dims(q, k, v, cu_q, cu_k, max_q, max_k)))


def varlen_out_flop(out, q, k, v, cu_q, cu_k, max_q, max_k, *args, out_val=None,
                    **kwargs) -> int:
    """torch_attn::_varlen_attn_out(out, q, k, v, ...): as _varlen_attn."""
    return varlen_flop(q, k, v, cu_q, cu_k, max_q, max_k)


def varlen_backward_flop(grad_out, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, *args,
                         out_val=None, **kwargs) -> int:
    """torch_attn::_varlen_attn_backward(grad_out, q, k, v, out, lse, cu_q, cu_k, ...)."""
    dims = per_sequence_dims(q, k, v, cu_q, cu_k, max_q, max_k)
    return sum(map(attention_backward_flops, dims))


def _register_varlen() -> list[str]:
    """Register torch.nn.attention.varlen's ops (``torch_attn::_varlen_attn*``) where this
    torch has them; returns the names registered."""
    try:
        import torch.nn.attention.varlen  # noqa: F401  (defines the torch_attn ops)
    except ImportError:
        return []
    formulas = {"_varlen_attn": varlen_flop, "_varlen_attn_out": varlen_out_flop,
                "_varlen_attn_backward": varlen_backward_flop}
    names = []
    for name, formula in formulas.items():
        found = present(ops.torch_attn, name)
        if found:
            register_flop_formula(found, get_raw=True)(formula)
            names.append(f"torch_attn.{name}")
    return names


def _register_flex() -> list[str]:
    """flex_attention and its backward (higher-order operators), ``[B, H, S, D]``."""
    try:
        from torch._higher_order_ops.flex_attention import (
            flex_attention,
            flex_attention_backward,
        )
    except ImportError:
        return []

    @register_flop_formula(flex_attention)
    def flex_attention_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs):
        """flex_attention(q, k, v, score_mod, block_mask, ...): dense count (the block mask's
        sparsity is not read)."""
        return attention_flops(dims_bhsd(q_shape, k_shape, v_shape))

    @register_flop_formula(flex_attention_backward)
    def flex_attention_backward_flop(q_shape, k_shape, v_shape, _out, _lse, _grad_out,
                                     *args, out_shape=None, **kwargs):
        """flex_attention_backward(q, k, v, out, logsumexp, grad_out, ...)."""
        return attention_backward_flops(dims_bhsd(q_shape, k_shape, v_shape))

    return ["flex_attention", "flex_attention_backward"]


#: the optional families this torch build provides (reported by `refimpl flops --list`).
OPTIONAL_REGISTERED = _register_varlen() + _register_flex()
