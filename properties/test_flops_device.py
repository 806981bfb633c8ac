"""FLOP-counter properties of the backend under test (its ``flop_counter``) on a CUDA device,
where the device changes the answer: ``F.scaled_dot_product_attention`` dispatches to fused
CUDA kernels (flash, memory-efficient, cuDNN) in float16 or bfloat16, each its own op with its
own formula.

The expectation is a hand derivation written here, never a counter: a forward of
``B`` batches, ``H`` heads, ``L_q`` queries, ``L_k`` keys and head size ``E`` is two matrix
products (``q k^T`` then ``p v``), ``2 B H L_q L_k E`` each; the backward takes both
gradients of each product (2x the forward) and the fused kernels recompute the scores
(+ ``2 B H L_q L_k E``).

* For each SDPA backend drawn (``sdpa_kernel`` of FLASH_ATTENTION, EFFICIENT_ATTENTION or
  CUDNN_ATTENTION) and dtype in {float16, bfloat16}, the counter's total over the forward,
  and over forward + backward, equals the derivation. A backend that cannot run the drawn
  example on this GPU rejects it (Hypothesis reports the examples it could not satisfy).

Without a CUDA device every property skips, visibly, with the reason (the ``cuda`` marker).

Reach (each example): the counter counted the fused kernel (> 0).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, reject
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from refimpl.oracle import component
from refimpl.properties.reach import reach

pytestmark = pytest.mark.cuda

KERNELS = st.sampled_from([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                           SDPBackend.CUDNN_ATTENTION])
DTYPES = st.sampled_from([torch.float16, torch.bfloat16])
SHAPES = st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 48),
                   st.integers(1, 48), st.sampled_from([16, 32, 64]))


def attention_by_hand(b: int, h: int, lq: int, lk: int, e: int, backward: bool) -> int:
    """Forward ``q k^T`` and ``p v``: ``2 b h lq lk e`` each; backward: both gradients of
    each (2x the forward) plus the recomputed scores ``q k^T`` (module docstring)."""
    product = 2 * b * h * lq * lk * e
    forward = 2 * product
    return forward + (2 * forward + product if backward else 0)


def total_flops(backend, fn) -> int:
    """The backend's counter's total FLOPs over ``fn``."""
    with component(backend, "flop_counter")(display=False) as mode:
        fn()
    return sum(mode.get_flop_counts().get("Global", {}).values())


@given(shape=SHAPES, kernel=KERNELS, dtype=DTYPES, backward=st.booleans())
def test_fused_cuda_attention_counted_by_hand(refimpl_backend, shape, kernel, dtype,
                                              backward):
    """The counter's total over SDPA on ``kernel`` in ``dtype`` (forward, or forward +
    backward) equals :func:`attention_by_hand`."""
    b, h, lq, lk, e = shape
    q, k, v = (torch.randn(b, h, n, e, device="cuda", dtype=dtype, requires_grad=backward)
               for n in (lq, lk, lk))

    def run():
        with sdpa_kernel(kernel):
            out = F.scaled_dot_product_attention(q, k, v)
        if backward:
            out.sum().backward()

    try:
        run()  # outside the counter: does this kernel take the example on this GPU?
    except RuntimeError:
        reject()
    got = total_flops(refimpl_backend, run)
    reach(got > 0)
    expected = attention_by_hand(b, h, lq, lk, e, backward)
    assert got == expected, (
        f"{refimpl_backend.name} flop_counter, SDPA on {kernel.name} in {dtype}, shape "
        f"b={b} h={h} lq={lq} lk={lk} e={e}, backward={backward}: counted {got}, expected "
        f"{expected} by hand")
