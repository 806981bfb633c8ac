"""FLOP formulas for torch.nn's fused inference fast paths: ``_native_multi_head_attention``
(nn.MultiheadAttention, also inside nn.TransformerDecoderLayer and nn.Transformer) and
``_transformer_encoder_layer_fwd`` (nn.TransformerEncoderLayer / nn.TransformerEncoder).

Under ``torch.inference_mode()`` or ``eval()`` + ``no_grad`` these modules call one fused op
instead of their linear layers and attention; the count must be the count of the same math
on the unfused path, which is (embedding ``E``, ``H`` heads of ``D = E / H``, ``B`` sequences
of ``Lq`` queries attending over ``Lk`` keys, tokens ``T = B * Lq``):

    in-projection   q = x W_q^T, k = x W_k^T, v = x W_v^T   2 B Lq E E + 2 * (2 B Lk E E)
    attention       q k^T and p v per head (SDPA's count)    2 B H Lq Lk (D + D) = 4 B Lq Lk E
    out-projection  o W_o^T                                  2 B Lq E E

(the unfused path forms the in-projection as one ``[T, E] x [E, 3E]`` addmm when q, k and v
are one tensor: the same ``6 T E E``). The encoder layer adds its feed-forward block,
``linear2(act(linear1(x)))`` with ``W_1 [F, E]`` and ``W_2 [E, F]``: ``2 T E F + 2 T F E``.
Biases, the ``1/sqrt(D)`` scaling, softmax, masks, dropout, layer norms and the activation
are not counted, as everywhere in the table.

Nested inputs. With a padding mask nn.TransformerEncoder runs the layers on a nested tensor of
the real sequences (lengths ``L_i``); the count is then the sum over sequences of the dense
count with ``B = 1, L = L_i``: what the same layer computes on each sequence alone (padding
is not part of the math; docs/differences.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch
from torch import ops

from refimpl.flops.formulas.attention import AttentionDims, attention_flops
from refimpl.flops.formulas.registry import register_flop_formula

aten = ops.aten


@dataclass(frozen=True)
class Sequences:
    """``batch`` sequences of ``length`` tokens each (one group of a dense or nested input)."""

    batch: int
    length: int


def sequence_groups(x: torch.Tensor) -> list[Sequences]:
    """Dense ``[*B, L, E]`` (``[L, E]`` unbatched): one group; nested: one per sequence."""
    if x.is_nested:
        sizes = x._nested_tensor_size()
        return [Sequences(1, int(row[0])) for row in sizes.tolist()]
    if x.dim() < 2:
        raise ValueError(f"fused attention: expected [batch, seq, embed] input, got "
                         f"shape {tuple(x.shape)}")
    return [Sequences(prod(x.shape[:-2]), x.shape[-2])]


def self_attention_block_flops(q: Sequences, k: Sequences, embed: int, heads: int) -> int:
    """In-projection of q, k and v, attention, out-projection (module docstring)."""
    if embed % heads != 0:
        raise ValueError(f"fused attention: embed_dim {embed} is not a multiple of "
                         f"num_heads {heads}")
    if q.batch != k.batch:
        raise ValueError(f"fused attention: {q.batch} query sequences but {k.batch} key "
                         "sequences")
    head_dim = embed // heads
    in_proj = 2 * q.batch * q.length * embed * embed + 2 * (2 * k.batch * k.length * embed * embed)
    scores = attention_flops(AttentionDims(q.batch, heads, q.length, k.length, head_dim,
                                           head_dim))
    out_proj = 2 * q.batch * q.length * embed * embed
    return in_proj + scores + out_proj


def _check_weights(embed: int, qkv_weight: torch.Tensor, proj_weight: torch.Tensor) -> None:
    if tuple(qkv_weight.shape) != (3 * embed, embed) or \
            tuple(proj_weight.shape) != (embed, embed):
        raise ValueError(f"fused attention: qkv_weight {tuple(qkv_weight.shape)} / proj_weight "
                         f"{tuple(proj_weight.shape)} do not fit embed_dim {embed}")


@register_flop_formula(aten._native_multi_head_attention, get_raw=True)
def native_multi_head_attention_flop(query, key, value, embed_dim, num_head, qkv_weight,
                                     qkv_bias, proj_weight, *args, out_val=None,
                                     **kwargs) -> int:
    """_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
    qkv_bias, proj_weight, proj_bias, mask, need_weights, ...): one self-attention block per
    sequence group; ``need_weights`` only keeps the probabilities (no extra products)."""
    _check_weights(embed_dim, qkv_weight, proj_weight)
    groups = zip(sequence_groups(query), sequence_groups(key), strict=True)
    return sum(self_attention_block_flops(q, k, embed_dim, num_head) for q, k in groups)


@register_flop_formula(aten._transformer_encoder_layer_fwd, get_raw=True)
def transformer_encoder_layer_flop(src, embed_dim, num_heads, qkv_weight, qkv_bias,
                                   proj_weight, proj_bias, use_gelu, norm_first, eps,
                                   norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                   ffn_weight_1, ffn_bias_1, ffn_weight_2, *args, out_val=None,
                                   **kwargs) -> int:
    """_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
    proj_weight, proj_bias, use_gelu, norm_first, eps, norm weights and biases (4),
    ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type): self-attention
    plus the feed-forward block ``2 T (numel(W_1) + numel(W_2))``."""
    _check_weights(embed_dim, qkv_weight, proj_weight)
    total = 0
    for group in sequence_groups(src):
        tokens = group.batch * group.length
        total += self_attention_block_flops(group, group, embed_dim, num_heads)
        total += 2 * tokens * (ffn_weight_1.numel() + ffn_weight_2.numel())
    return total
