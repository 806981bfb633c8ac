"""Shapes that do not fit are refused, never counted: the backend's ``flop_counter`` on
kernels whose meta implementation does not check the shapes itself (so only the FLOP
formula can notice), against the shapes a hand derivation needs to fit together.

- attention (``q [B, Hq, Sq, D]``, ``k [B, Hkv, Sk, D]``, ``v [B, Hkv, Sk, Dv]``): the
  batch of all three, the heads and the length of key and value, and the head dim of query
  and key must agree, and ``Hq`` must be a multiple of ``Hkv``;
- convolution (``x [N, C, *spatial]``, ``w [C_out, C, *kernel]``): the weight has as many
  kernel dims as the input has spatial ones (the meta kernel runs a 1-d input with a 2-d
  weight, and more: its output takes the input's spatial rank);
- the fused inference ops (``_native_multi_head_attention``,
  ``_transformer_encoder_layer_fwd``): ``qkv_weight`` is ``[3E, E]`` and ``proj_weight``
  ``[E, E]`` for embedding ``E``; an input needs at least ``[L, E]``; query, key and value
  hold as many sequences.

refimpl raises ValueError naming the shapes; torch's formulas assert (AssertionError with
the shapes), accepted too: both refuse to count. Reach: the well-fitting shapes of the same
example are counted (> 0), so the kernel and its formula did run.

Against torch (``--refimpl-target torch``, torch 2.13) both fail: its attention formulas
count a query head count that is not a multiple of the key/value heads (e.g. q (2, 3, 1, 8),
k and v (2, 2, 1, 8)), it counts a convolution whose weight has more kernel dims than the
input has spatial ones (docs/findings.md, FLOPs 16), and it has no formula for the fused
ops (0 FLOPs, no refusal; docs/differences.md, FLOPs).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach

aten = torch.ops.aten

#: what a refusal may raise: refimpl's ValueError, torch's formula assertions.
REFUSED = (ValueError, AssertionError)
#: the fused encoder layer runs on meta tensors (its meta kernel arrived after torch 2.10)
ENCODER_ON_META = torch._C._dispatch_has_kernel_for_dispatch_key(
    "aten::_transformer_encoder_layer_fwd", "Meta")


def counts(backend, fn) -> dict:
    """{op packet: FLOPs} of running ``fn`` under the backend's counter."""
    with component(backend, "flop_counter")(display=False) as mode:
        fn()
    return mode.get_flop_counts().get("Global", {})


def refused(backend, fn) -> bool:
    """Whether the backend's counter refuses ``fn`` with one of :data:`REFUSED`."""
    try:
        counts(backend, fn)
    except REFUSED:
        return True
    return False


def _meta(*shape):
    return torch.empty(*shape, device="meta")


#: fused attention kernels on meta tensors, all taking ``[B, H, S, D]`` here (the raw ones'
#: ``[B, S, H, D]`` is swapped in :func:`_attention_call`).
ATTENTION = {
    "sdpa_flash": lambda q, k, v: aten._scaled_dot_product_flash_attention(q, k, v),
    "sdpa_efficient": lambda q, k, v:
        aten._scaled_dot_product_efficient_attention(q, k, v, None, False),
    "flash_forward": lambda q, k, v: aten._flash_attention_forward(
        q, k, v, None, None, q.shape[1], k.shape[1], 0.0, False, False),
    "efficient_forward": lambda q, k, v: aten._efficient_attention_forward(
        q, k, v, None, None, None, q.shape[1], k.shape[1], 0.0, 0, False),
}
RAW = {"flash_forward", "efficient_forward"}


def _attention_call(kernel: str, q, k, v):
    """``kernel`` on meta tensors of the ``[B, H, S, D]`` shapes q, k, v."""
    swap = (lambda s: (s[0], s[2], s[1], s[3])) if kernel in RAW else (lambda s: s)
    return lambda: ATTENTION[kernel](*(_meta(*swap(s)) for s in (q, k, v)))


def _misfits(b, h, s, d):
    """Named (q, k, v) shapes, each off a fitting triple in one size, in each direction: every
    equality the shapes must meet broken by one smaller and by one larger size (the query's
    heads kept a multiple of the key's, so only the broken equality can refuse), and query
    heads that are not a multiple of the key/value heads."""
    fit = (b, h, s, d)
    misfits = {}
    for sign, way in ((-1, "smaller"), (1, "larger")):
        off = b + sign
        misfits |= {f"key batch {way}": (fit, (off, h, s, d), fit),
                    f"value batch {way}": (fit, fit, (off, h, s, d)),
                    f"key and value batch {way}": (fit, (off, h, s, d), (off, h, s, d))}
        kv = h + 1 if sign < 0 else h  # the heads of k and v: kv, and kv + 1 for the other
        wide = (b, kv * (kv + 1), s, d)  # a multiple of both kv and kv + 1 query heads
        key_heads, value_heads = (kv, kv + 1) if sign < 0 else (kv + 1, kv)
        misfits[f"key heads {way} than value heads"] = (
            wide, (b, key_heads, s, d), (b, value_heads, s, d))
        if s + sign >= 1:
            misfits[f"value length {way}"] = (fit, fit, (b, h, s + sign, d))
        misfits[f"key head dim {way}"] = (fit, (b, h, s, d + sign * d // 2), fit)
    misfits["query heads not a multiple"] = ((b, 2 * h + 1, s, d), (b, 2, s, d), (b, 2, s, d))
    return misfits


def _kernel_runs(call) -> bool:
    """Whether the meta kernel itself runs the call (no counter): one it rejects first is
    torch's refusal, not the formula's."""
    try:
        call()
    except (RuntimeError, IndexError, ValueError, AssertionError, TypeError):
        return False
    return True


@given(st.integers(2, 3), st.integers(1, 3), st.integers(1, 4), st.sampled_from([8, 16]))
def test_attention_shapes_that_do_not_fit_are_refused(refimpl_backend, b, h, s, d):
    """Every kernel of :data:`ATTENTION` and every misfit of :func:`_misfits`, per example."""
    fit = (b, h, s, d)
    counted = {kernel: sum(counts(refimpl_backend, _attention_call(kernel, fit, fit, fit))
                           .values()) for kernel in ATTENTION}
    reach(all(n > 0 for n in counted.values()))
    accepted = [(kernel, name, shapes) for kernel in sorted(ATTENTION)
                for name, shapes in _misfits(b, h, s, d).items()
                if _kernel_runs(_attention_call(kernel, *shapes))
                and not refused(refimpl_backend, _attention_call(kernel, *shapes))]
    assert not accepted, (f"{refimpl_backend.name}: counted instead of refusing "
                          f"(kernel, misfit, (q, k, v)): {accepted}")


def _encoder_layer(src, embed, heads, qkv_shape, proj_shape, ffn=4):
    """``_transformer_encoder_layer_fwd`` on meta tensors of the given weight shapes."""
    norm = [_meta(embed) for _ in range(4)]
    return lambda: aten._transformer_encoder_layer_fwd(
        _meta(*src), embed, heads, _meta(*qkv_shape), _meta(qkv_shape[0]), _meta(*proj_shape),
        _meta(proj_shape[0]), False, False, 1e-5, *norm, _meta(ffn, embed), _meta(ffn),
        _meta(embed, ffn), _meta(embed), None, None)


def _attention_block(src, embed, heads, qkv_shape, proj_shape):
    """``_native_multi_head_attention`` (self-attention) on meta tensors."""
    return lambda: aten._native_multi_head_attention(
        _meta(*src), _meta(*src), _meta(*src), embed, heads, _meta(*qkv_shape),
        _meta(qkv_shape[0]), _meta(*proj_shape), _meta(proj_shape[0]))


def _cross_attention(query, key, embed, heads):
    """``_native_multi_head_attention`` of ``query`` on key = value of shape ``key`` (its
    meta kernel does not compare their batches)."""
    return lambda: aten._native_multi_head_attention(
        _meta(*query), _meta(*key), _meta(*key), embed, heads, _meta(3 * embed, embed),
        _meta(3 * embed), _meta(embed, embed), _meta(embed))


FUSED = {"encoder_layer": _encoder_layer, "multi_head_attention": _attention_block}


@pytest.mark.skipif(not ENCODER_ON_META, reason=f"torch {torch.__version__} has no meta "
                    "kernel for aten._transformer_encoder_layer_fwd")
@given(st.integers(1, 2), st.integers(1, 4), st.sampled_from([1, 2]), st.integers(2, 4))
def test_fused_weights_that_do_not_fit_are_refused(refimpl_backend, batch, seq, heads,
                                                   head_dim):
    """Both fused ops of :data:`FUSED`, with ``qkv_weight`` or ``proj_weight`` one row or
    column off ``[3E, E]`` / ``[E, E]``, per example; the encoder layer on a 1-D input; and
    the attention of a query batch on a key and value batch of another size."""
    embed = heads * head_dim
    src, qkv, proj = (batch, seq, embed), (3 * embed, embed), (embed, embed)
    counted = {op: sum(counts(refimpl_backend, call(src, embed, heads, qkv, proj)).values())
               for op, call in FUSED.items()}
    reach(all(n > 0 for n in counted.values()))
    misfits = {f"qkv_weight {shape}": (shape, proj) for shape in
               [(3 * embed - 1, embed), (3 * embed + 1, embed), (3 * embed, embed + 1)]}
    misfits |= {f"proj_weight {shape}": (qkv, shape) for shape in
                [(embed - 1, embed), (embed + 1, embed), (embed, embed - 1),
                 (embed, embed + 1)]}
    accepted = [(op, name) for op, call in sorted(FUSED.items())
                for name, (qkv_shape, proj_shape) in misfits.items()
                if not refused(refimpl_backend, call(src, embed, heads, qkv_shape, proj_shape))]
    assert not accepted, (f"{refimpl_backend.name}: E={embed} counted instead of refusing "
                          f"(op, weight): {accepted}")
    with pytest.raises(REFUSED):
        counts(refimpl_backend, _encoder_layer((embed,), embed, heads, qkv, proj))
    for query, key in (((batch, seq, embed), (batch + 1, seq, embed)),
                       ((batch + 1, seq, embed), (batch, seq, embed))):
        assert refused(refimpl_backend, _cross_attention(query, key, embed, heads)), (
            f"{refimpl_backend.name}: counted a multi-head attention of query {query} on "
            f"key and value {key}: the batches differ")


def _convolution(x_shape, w_shape):
    """``aten.convolution`` on meta tensors, stride/padding/dilation of the input's rank."""
    spatial = len(x_shape) - 2
    return lambda: aten.convolution(_meta(*x_shape), _meta(*w_shape), None, [1] * spatial,
                                    [0] * spatial, [1] * spatial, False, [0] * spatial, 1)


@given(st.integers(1, 2), st.integers(1, 2), st.integers(1, 3), st.integers(1, 4),
       st.integers(3, 6), st.integers(1, 3))
def test_convolution_kernel_ranks_that_do_not_fit_are_refused(refimpl_backend, spatial, extra,
                                                              channels, out, size, kernel):
    """A convolution of a ``spatial``-d input ``[2, C, size, ...]`` with a weight of
    ``spatial + extra`` kernel dims, which the meta kernel runs, is refused; the same
    weight with ``spatial`` kernel dims is counted."""
    x_shape = (2, channels, *[size] * spatial)
    fitting = (out, channels, *[kernel] * spatial)
    reach(sum(counts(refimpl_backend, _convolution(x_shape, fitting)).values()) > 0)
    misfit = (out, channels, *[kernel] * (spatial + extra))
    assert refused(refimpl_backend, _convolution(x_shape, misfit)), (
        f"{refimpl_backend.name}: counted a convolution of input {x_shape} with weight "
        f"{misfit} (more kernel dims than the input's {spatial} spatial ones)")


def _jagged(kernel: str, heads: int, dim: int, n_q: int, n_k: int, max_q: int, max_k: int,
            key_offsets: bool = True):
    """A jagged attention call on meta tensors: ``n_q`` query and ``n_k`` key sequences
    (offsets of n + 1 entries), ``[total, H, D]`` rows; ``key_offsets=False`` passes None for
    the key's offsets (``torch_attn._varlen_attn``: the query's are used)."""
    q, k, v = (_meta(n * 2, heads, dim) for n in (n_q, n_k, n_k))
    cu_q, cu_k = (torch.empty(n + 1, dtype=torch.int32, device="meta") for n in (n_q, n_k))
    if kernel == "varlen":
        return lambda: torch.ops.torch_attn._varlen_attn(
            q, k, v, cu_q, cu_k if key_offsets else None, max_q, max_k)
    return lambda: aten._efficient_attention_forward(
        q[None], k[None], v[None], None, cu_q, cu_k, max_q, max_k, 0.0, 0, False)


def _has_varlen() -> bool:
    """Whether this torch defines ``torch_attn::_varlen_attn`` (importing
    torch.nn.attention.varlen registers it)."""
    try:
        import torch.nn.attention.varlen
    except ImportError:
        return False
    return hasattr(torch.ops.torch_attn, "_varlen_attn")


#: the jagged kernels of this torch: varlen where torch.nn.attention.varlen defines it
JAGGED = ["efficient_forward"] + (["varlen"] if _has_varlen() else [])


def _each_jagged_kernel(test):
    """Each kernel of :data:`JAGGED` as an explicit example (2 query and 3 key sequences)."""
    for kernel in JAGGED:
        test = example(kernel, 2, 8, 2, 1, 3, 2, True)(test)
    return test


@_each_jagged_kernel
@given(st.sampled_from(JAGGED), st.integers(1, 2), st.sampled_from([4, 8]), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_jagged_offsets_count_by_hand_and_misfits_are_refused(refimpl_backend, kernel, heads,
                                                              dim, n, extra, max_q, max_k,
                                                              larger):
    """Jagged attention on meta tensors (offsets whose values are unknown: every sequence is
    taken at its maximum length): ``n`` sequences count ``n * 2 H max_q max_k (D + D)``; for
    ``_varlen_attn``, key offsets None mean the query's (``max_k`` still the key's); offsets
    of ``n`` query and ``n +- extra`` key sequences are refused. Reach: the fitting call
    counted (> 0)."""
    fit = sum(counts(refimpl_backend, _jagged(kernel, heads, dim, n, n, max_q, max_k)).values())
    reach(fit > 0)
    want = n * 2 * heads * max_q * max_k * (dim + dim)
    assert fit == want, (f"{refimpl_backend.name}: {kernel} of {n} sequences (H={heads}, "
                         f"D={dim}, max {max_q} x {max_k}) counted {fit}, by hand {want}")
    if kernel == "varlen":
        shared = sum(counts(refimpl_backend, _jagged(kernel, heads, dim, n, n, max_q, max_k,
                                                     key_offsets=False)).values())
        assert shared == want, (f"{refimpl_backend.name}: varlen with cu_seq_k=None counted "
                                f"{shared}, by hand {want} (the query's offsets)")
    n_k = n + extra if larger else max(n - extra, 0)
    assume(n_k != n)
    call = _jagged(kernel, heads, dim, n, n_k, max_q, max_k)
    assert refused(refimpl_backend, call), (
        f"{refimpl_backend.name}: counted {kernel} of {n} query sequences on {n_k} key "
        "sequences (offsets that do not fit)")
