"""The fused multi-head attention op (``_native_multi_head_attention``, nn.MultiheadAttention's
inference fast path) with queries and keys of their own shapes, through the backend's
``flop_counter``, on shape-only (meta) tensors, whose kernel checks none of this.

For embedding ``E``, ``H`` heads, ``B`` query sequences of ``Lq`` tokens and ``B`` key/value
sequences of ``Lk`` tokens, the same math unfused is, by hand: the projections of the
queries ``2 B Lq E^2``, of the keys and of the values ``2 B Lk E^2`` each, attention
``q k^T`` and ``p v`` ``4 B Lq Lk E``, and the out-projection ``2 B Lq E^2``. A query batch
that is not the key batch (more or fewer sequences) does not fit: it is refused (ValueError
or AssertionError), never counted.

Reach: the fitting call was counted (> 0).

On a nested tensor of sequences (the fast path of nn.TransformerEncoder with a padding mask),
each sequence of ``L_i`` tokens is counted alone: ``8 L_i E^2 + 4 L_i^2 E``.

Against torch (``--refimpl-target torch``, 2.13) this fails: torch has no formula for the
fused op (0 FLOPs, no refusal; docs/findings.md, FLOPs 10).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach

aten = torch.ops.aten
REFUSED = (ValueError, AssertionError)


def _attention(heads: int, head_dim: int, batch_q: int, batch_k: int, lq: int, lk: int):
    embed = heads * head_dim
    meta = lambda *shape: torch.empty(*shape, device="meta")
    return lambda: aten._native_multi_head_attention(
        meta(batch_q, lq, embed), meta(batch_k, lk, embed), meta(batch_k, lk, embed), embed,
        heads, meta(3 * embed, embed), meta(3 * embed), meta(embed, embed), meta(embed))


@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 5),
       st.integers(1, 5), st.sampled_from([-1, 1]))
def test_fused_attention_counts_cross_attention_and_refuses_other_batches(
        refimpl_backend, heads, head_dim, batch, lq, lk, off):
    make = component(refimpl_backend, "flop_counter")
    with make(display=False) as counter:
        _attention(heads, head_dim, batch, batch, lq, lk)()
    counted = counter.get_total_flops()
    reach(counted > 0)
    e = heads * head_dim
    expected = (2 * batch * lq * e * e + 2 * (2 * batch * lk * e * e)
                + 4 * batch * lq * lk * e + 2 * batch * lq * e * e)
    assert counted == expected, (f"{refimpl_backend.name}: E={e}, H={heads}, B={batch}, "
                                 f"Lq={lq}, Lk={lk}: counted {counted}, expected {expected}")
    other = batch + off if batch + off >= 1 else batch + 1
    try:
        with make(display=False) as counter:
            _attention(heads, head_dim, batch, other, lq, lk)()
    except REFUSED:
        return
    raise AssertionError(f"{refimpl_backend.name}: query batch {batch}, key batch {other} "
                         f"counted {counter.get_total_flops()} instead of refusing")


@given(st.integers(1, 3), st.integers(1, 3), st.lists(st.integers(1, 4), min_size=2,
                                                      max_size=3))
def test_fused_attention_on_nested_sequences_counts_each_sequence(refimpl_backend, heads,
                                                                  head_dim, lengths):
    """Self-attention of the fused op on a nested tensor of sequences of ``L_i`` tokens (as
    nn.TransformerEncoder's fast path runs it with a padding mask): each sequence is counted
    alone, by hand ``8 L_i E^2`` (in-projection of q, k and v, out-projection) plus
    ``4 L_i^2 E`` (attention); padding is no part of the math. Reach: two sequences of
    different lengths."""
    e = heads * head_dim
    reach(len(set(lengths)) > 1)
    x = torch.nested.nested_tensor([torch.randn(length, e) for length in lengths])
    weights = (torch.randn(3 * e, e), torch.randn(3 * e), torch.randn(e, e), torch.randn(e))
    with torch.no_grad(), component(refimpl_backend, "flop_counter")(display=False) as counter:
        aten._native_multi_head_attention(x, x, x, e, heads, *weights, None, False)
    expected = sum(8 * length * e * e + 4 * length * length * e for length in lengths)
    assert counter.get_total_flops() == expected, (
        f"{refimpl_backend.name}: E={e}, H={heads}, sequences of {lengths} tokens: counted "
        f"{counter.get_total_flops()}, expected {expected}")


@given(st.integers(2, 4), st.integers(1, 3), st.integers(1, 3), st.data())
def test_fused_attention_refuses_heads_that_do_not_divide_the_embedding(
        refimpl_backend, heads, head_dim, length, data):
    """An embedding of ``heads * head_dim + r`` (0 < r < heads) has no whole head size: the
    CPU kernel refuses it (``embed_dim must divide evenly by num_heads``), the meta kernel
    does not, so on meta tensors the counter must refuse it, never count it. Reach: the
    remainder is above 1."""
    rest = data.draw(st.integers(1, heads - 1))
    reach(rest > 1 or heads == 2)
    e = heads * head_dim + rest
    meta = lambda *shape: torch.empty(*shape, device="meta")
    x = meta(1, length, e)
    try:
        with component(refimpl_backend, "flop_counter")(display=False) as counter:
            aten._native_multi_head_attention(x, x, x, e, heads, meta(3 * e, e), meta(3 * e),
                                              meta(e, e), meta(e))
    except REFUSED:
        return
    raise AssertionError(f"{refimpl_backend.name}: embed_dim {e} with {heads} heads counted "
                         f"{counter.get_total_flops()} instead of refusing")
