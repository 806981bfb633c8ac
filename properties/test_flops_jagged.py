"""Jagged (varlen) attention with known sequence offsets: each sequence counts alone.

The raw attention kernels take a batch of sequences packed along one axis, with cumulative
offsets (``cum_seq_q``, ``cum_seq_k``: ``[0, L_1, L_1 + L_2, ...]``). When the offsets'
values are known (a real tensor, here on the CPU beside shape-only meta ``q``, ``k``,
``v``), the count is the sum over sequences of dense attention on that sequence alone: with
``H`` heads, head dim ``D`` and value dim ``Dv``, sequence ``i`` costs
``2 H Lq_i Lk_i (D + Dv)`` (``q k^T`` and ``p v``), by hand here. Counting every sequence at
the maximum lengths (the bound a counter may only use when the values are unknown) is
wrong.

Each example draws the kernel (``_flash_attention_forward``, ``_efficient_attention_forward``),
2-4 sequences with their own query and key lengths, heads and head dims.

Reach: the sequences' lengths differ from the maxima (a bound would be wrong).

The same for nested tensors as a user meets them: attention on jagged tensors, ``bmm`` and
``matmul`` of strided nested tensors (torch 2.13's counter fails on each: docs/findings.md,
FLOPs 14).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach

aten = torch.ops.aten

KERNELS = {
    "flash": lambda q, k, v, cq, ck, mq, mk: aten._flash_attention_forward(
        q, k, v, cq, ck, mq, mk, 0.0, False, False),
    "efficient": lambda q, k, v, cq, ck, mq, mk: aten._efficient_attention_forward(
        q[None], k[None], v[None], None, cq, ck, mq, mk, 0.0, 0, False),
}


def _offsets(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


@given(st.sampled_from(sorted(KERNELS)), st.lists(st.tuples(st.integers(1, 6),
                                                            st.integers(1, 6)),
                                                  min_size=2, max_size=4),
       st.integers(1, 3), st.sampled_from([8, 16]), st.sampled_from([8, 16]))
def test_known_offsets_count_each_sequence_alone(refimpl_backend, kernel, lengths, heads, d,
                                                 dv):
    lq, lk = [q for q, _ in lengths], [k for _, k in lengths]
    reach(len(set(lq)) > 1 or len(set(lk)) > 1)
    meta = lambda *shape: torch.empty(*shape, device="meta")
    q, k, v = meta(sum(lq), heads, d), meta(sum(lk), heads, d), meta(sum(lk), heads, dv)
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        KERNELS[kernel](q, k, v, _offsets(lq), _offsets(lk), max(lq), max(lk))
    expected = sum(2 * heads * sq * sk * (d + dv) for sq, sk in lengths)
    counted = counter.get_total_flops()
    assert counted == expected, (
        f"{refimpl_backend.name}: {kernel} with sequences (Lq, Lk) {lengths}, H={heads}, "
        f"D={d}, Dv={dv}: counted {counted}, expected {expected} (each sequence alone)")


def _jagged(lengths: list[int], heads: int, dim: int) -> torch.Tensor:
    """A jagged nested tensor ``[B, H, L_i, dim]`` of the sequences' lengths (torch's
    layout for attention: the ragged token axis after the heads)."""
    rows = [torch.randn(length, heads * dim) for length in lengths]
    packed = torch.nested.nested_tensor(rows, layout=torch.jagged)
    return packed.unflatten(-1, (heads, dim)).transpose(1, 2)


def _nested(shapes: list[tuple[int, ...]]) -> torch.Tensor:
    """A strided nested tensor of components of ``shapes``."""
    return torch.nested.nested_tensor([torch.randn(shape) for shape in shapes])


@given(st.sampled_from(["sdpa", "bmm", "matmul"]),
       st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=2, max_size=4),
       st.integers(1, 3), st.sampled_from([4, 8]), st.sampled_from([4, 8]))
def test_nested_tensor_products_count_each_sequence_alone(refimpl_backend, op, lengths, heads,
                                                          d, dv):
    """Products of nested tensors (a batch of sequences of their own lengths):

    - ``sdpa``: F.scaled_dot_product_attention on jagged tensors ``[B, H, L_i, D]`` (as a
      user builds them with ``torch.nested.nested_tensor(..., layout=torch.jagged)``): each
      sequence's attention alone, ``2 H Lq_i Lk_i (D + Dv)``, summed;
    - ``bmm`` / ``matmul`` of strided nested tensors, components ``[Lq_i, D]`` by
      ``[D, Lk_i]``: ``2 Lq_i D Lk_i`` each, summed.

    The counter must neither fail nor count the padded maxima."""
    lq, lk = [q for q, _ in lengths], [k for _, k in lengths]
    reach(len(set(lq)) > 1 or len(set(lk)) > 1)
    if op == "sdpa":
        q, k, v = _jagged(lq, heads, d), _jagged(lk, heads, d), _jagged(lk, heads, dv)
        run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
        expected = sum(2 * heads * sq * sk * (d + dv) for sq, sk in lengths)
    else:
        a, b = _nested([(sq, d) for sq in lq]), _nested([(d, sk) for sk in lk])
        run = lambda: getattr(torch, op)(a, b)
        expected = sum(2 * sq * d * sk for sq, sk in lengths)
    with component(refimpl_backend, "flop_counter")(display=False) as counter:
        run()
    counted = counter.get_total_flops()
    assert counted == expected, (
        f"{refimpl_backend.name}: nested {op} with sequences (Lq, Lk) {lengths}, H={heads}, "
        f"D={d}, Dv={dv}: counted {counted}, expected {expected} (each sequence alone)")
