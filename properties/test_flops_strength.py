"""FLOP counts against hand derivations written here, through the backend's ``flop_counter``:
written to kill mutants of refimpl's formula table that the relational properties of
test_flops.py (backward = 2 x forward, counts scale with batch) cannot see
(docs/oracle-strength.md). A formula off by a constant factor, or reading the wrong size,
keeps every relation and fails here.

Derivations (torch's convention: a multiply-accumulate is 2 FLOPs; bias, softmax, scaling and
elementwise gates are not counted):

- convolution (``aten.convolution`` and the backend kernels mkldnn, slow_*, thnn), forward:
  every output element of ``C_out`` channels sums
  ``C_in / groups * prod(K)`` products: ``2 * N * C_out * prod(out) * C_in/groups * prod(K)``;
  transposed: every *input* element meets ``C_out / groups * prod(K)`` taps:
  ``2 * N * C_in * prod(in) * C_out/groups * prod(K)``.
- matrix products: ``2 * b * m * k * n`` for the (b, m, k, n) formed (vector forms set the
  missing sizes to 1).
- RNN layers: per step, per batch row, each of the ``G`` gates (LSTM 4, GRU 3, RNN 1)
  multiplies the layer input (``I``, or ``H * directions`` above the first layer) and the
  hidden state (``H``): ``2 * T * B * G * H * (I + H)`` per layer and direction.
- grouped matrix products (``_grouped_mm``): the sum of the groups' products.
- attention, forward: ``q @ k^T`` and ``p @ v``: ``2 * B * H * Sq * Sk * (D + Dv)``; the fused
  kernels' backward recomputes the scores and forms four more products:
  ``2 * B * H * Sq * Sk * (3 D + 2 Dv)``.

Reach: the op family under test ran (its op is in the counts).
"""

from __future__ import annotations

from math import prod

import pytest
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.conv import ConvConfig, conv_configs
from refimpl.strategies.matmul import MATMUL_OPS, matmul_cases

aten = torch.ops.aten


def counts(backend, fn) -> dict:
    """{op packet: FLOPs} of running ``fn`` under the backend's counter."""
    with component(backend, "flop_counter")(display=False) as mode:
        fn()
    return mode.get_flop_counts().get("Global", {})


def conv_forward_by_hand(cfg: ConvConfig) -> int:
    per_group_in = cfg.in_channels // cfg.groups
    per_group_out = cfg.out_channels // cfg.groups
    if cfg.transposed:
        return 2 * cfg.batch * cfg.in_channels * prod(cfg.input_size) * per_group_out * \
            prod(cfg.kernel)
    return 2 * cfg.batch * cfg.out_channels * prod(cfg.output_size) * per_group_in * \
        prod(cfg.kernel)


@given(conv_configs())
def test_conv_forward_is_hand_derived(refimpl_backend, cfg):
    x, w, b = cfg.tensors()
    c = counts(refimpl_backend, lambda: cfg.run(x, w, b))
    reach(aten.convolution in c)
    expected = conv_forward_by_hand(cfg)
    assert c.get(aten.convolution) == expected, (
        f"{refimpl_backend.name}: convolution counted {c.get(aten.convolution)}, "
        f"expected {expected} by hand, for {cfg}")


#: ``outer`` is left out: ``torch.outer`` decomposes to an elementwise ``mul`` before any
#: counter sees it (0 FLOPs in refimpl and torch alike; docs/differences.md, FLOPs).
MATMUL_NAMES = sorted(op for op in MATMUL_OPS if op != "outer")


def _kernels(cfg: ConvConfig) -> dict:
    """The direct aten conv kernels that can run ``cfg``: name -> (packet, call(x, w, b))."""
    k, st_, pad, dil = list(cfg.kernel), list(cfg.stride), list(cfg.padding), list(cfg.dilation)
    found = {}
    if cfg.transposed:
        if cfg.groups == 1 and cfg.spatial_dims in (2, 3):
            op = aten.slow_conv_transpose2d if cfg.spatial_dims == 2 else \
                aten.slow_conv_transpose3d
            found["slow_conv_transpose"] = (op, lambda x, w, b: op(
                x, w, k, b, st_, pad, list(cfg.output_padding), dil))
        return found
    found["mkldnn_convolution"] = (aten.mkldnn_convolution, lambda x, w, b:
                                   aten.mkldnn_convolution(x, w, b, pad, st_, dil, cfg.groups))
    if cfg.groups == 1 and cfg.spatial_dims == 2:
        found["slow_conv_dilated2d"] = (aten.slow_conv_dilated2d, lambda x, w, b:
                                        aten.slow_conv_dilated2d(x, w, k, b, st_, pad, dil))
        if set(dil) == {1}:
            found["thnn_conv2d"] = (aten._slow_conv2d_forward, lambda x, w, b:
                                    aten.thnn_conv2d(x, w, k, b, st_, pad))
    if cfg.groups == 1 and cfg.spatial_dims == 3 and set(dil) == {1}:
        found["slow_conv3d"] = (aten.slow_conv3d_forward, lambda x, w, b:
                                aten.slow_conv3d_forward(x, w, k, b, st_, pad))
    return found


@given(conv_configs(), st.data())
def test_conv_kernels_are_hand_derived(refimpl_backend, cfg, data):
    """The backend-specific conv kernels (mkldnn, slow_*, thnn) count as the convolution."""
    kernels = _kernels(cfg)
    assume(kernels)
    name = data.draw(st.sampled_from(sorted(kernels)), label="kernel")
    packet, call = kernels[name]
    x, w, b = cfg.tensors()
    c = counts(refimpl_backend, lambda: call(x, w, b))
    reach(packet in c)
    expected = conv_forward_by_hand(cfg)
    assert c.get(packet) == expected, (
        f"{refimpl_backend.name}: {name} counted {c}, expected {expected} by hand, for {cfg}")


@given(st.data())
def test_every_matmul_op_is_2bmkn(refimpl_backend, data):
    """Every op of :data:`MATMUL_NAMES` in every example (one drawn op per example left ``mv`` out
    of the 15 derandomised ``ci`` examples), each with its own drawn sizes, in a quarter of
    the cases one size the op uses past 256 (where two equal sizes read off two tensors are
    two int objects: a formula that compares sizes with ``is`` raises or miscounts)."""
    wrong, total = {}, 0
    for op in MATMUL_NAMES:
        case = data.draw(matmul_cases(ops=st.just(op), large=True), label=op)
        args = case.args()
        counted = sum(counts(refimpl_backend, lambda case=case, args=args:
                             case.run(*args)).values())
        b, m, k, n = case.multiplied
        total += counted
        if counted != 2 * b * m * k * n:
            wrong[case] = (counted, 2 * b * m * k * n)
    reach(total > 0)
    assert not wrong, f"{refimpl_backend.name}: case -> (counted, expected by hand): {wrong}"


RNNS = {"LSTM": (torch.nn.LSTM, 4), "GRU": (torch.nn.GRU, 3), "RNN": (torch.nn.RNN, 1)}


@given(st.sampled_from(sorted(RNNS)), st.integers(1, 4), st.integers(1, 3),
       st.integers(1, 5), st.integers(1, 6), st.integers(1, 2), st.booleans(), st.booleans())
def test_rnn_forward_is_hand_derived(refimpl_backend, kind, steps, batch, inputs, hidden,
                                     layers, bidirectional, batch_first):
    cls, gates = RNNS[kind]
    module = cls(inputs, hidden, num_layers=layers, bidirectional=bidirectional,
                 batch_first=batch_first)
    x = torch.randn((batch, steps, inputs) if batch_first else (steps, batch, inputs))
    c = counts(refimpl_backend, lambda: module(x))
    reach(sum(c.values()) > 0)
    directions = 2 if bidirectional else 1
    expected = sum(2 * steps * batch * gates * hidden * (width + hidden) * directions
                   for width in [inputs] + [hidden * directions] * (layers - 1))
    assert sum(c.values()) == expected, (
        f"{refimpl_backend.name}: {module} on {tuple(x.shape)} counted {c}, expected "
        f"{expected} by hand")


def _meta(*shape):
    return torch.empty(*shape, device="meta", requires_grad=True)


#: fused attention kernels, called on meta tensors (no GPU needed): name -> (q, k, v) -> out.
#: ``bhsd`` kernels take [B, H, S, D]; the raw flash/efficient kernels [B, S, H, D].
KERNELS = {
    "sdpa_flash": ("bhsd", lambda q, k, v: aten._scaled_dot_product_flash_attention(q, k, v)),
    "sdpa_efficient": ("bhsd", lambda q, k, v:
                       aten._scaled_dot_product_efficient_attention(q, k, v, None, True)),
    "flash_forward": ("bshd", lambda q, k, v: aten._flash_attention_forward(
        q, k, v, None, None, q.shape[1], k.shape[1], 0.0, False, False)),
    "efficient_forward": ("bshd", lambda q, k, v: aten._efficient_attention_forward(
        q, k, v, None, None, None, q.shape[1], k.shape[1], 0.0, 0, False)),
}


@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 5),
       st.sampled_from([8, 16, 264]))
@example(257, 258, 259, 260, 264)
def test_attention_kernels_are_hand_derived(refimpl_backend, b, h, sq, sk, d):
    """Every fused kernel of :data:`KERNELS`, forward and forward + backward, per example;
    every size above 256 in one explicit example (Python shares one int object per value
    only up to 256: sizes compared by identity instead of value would refuse it). Against
    torch (2.13) the raw ``[B, S, H, D]`` kernels fail where the query's length is no
    multiple of the key's: torch reads S as the heads (docs/findings.md, FLOPs 3)."""
    counted, expected = {}, {}
    forward = 2 * b * h * sq * sk * (d + d)
    backward = 2 * b * h * sq * sk * (3 * d + 2 * d)
    for kernel, (layout, call) in sorted(KERNELS.items()):
        shape = (lambda s, dim: (b, h, s, dim)) if layout == "bhsd" else \
            (lambda s, dim: (b, s, h, dim))
        for with_backward in (False, True):
            q, k, v = _meta(*shape(sq, d)), _meta(*shape(sk, d)), _meta(*shape(sk, d))

            def run(call=call, q=q, k=k, v=v, with_backward=with_backward):
                out = call(q, k, v)[0]
                if with_backward:
                    out.sum().backward()

            counted[kernel, with_backward] = sum(counts(refimpl_backend, run).values())
            expected[kernel, with_backward] = forward + (backward if with_backward else 0)
    reach(any(counted.values()))
    wrong = {key: (counted[key], expected[key]) for key in counted
             if counted[key] != expected[key]}
    assert not wrong, (f"{refimpl_backend.name}: (kernel, backward) -> (counted, expected by "
                       f"hand) for b={b}, h={h}, sq={sq}, sk={sk}, d={d}: {wrong}")


@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 4), st.integers(1, 5),
       st.integers(1, 3), st.integers(0, 2))
def test_conv_tbc_is_hand_derived(refimpl_backend, steps, batch, c_in, c_out, kernel, pad):
    """conv_tbc(x [T, B, C_in], w [K, C_in, C_out], bias, pad): each of the T' * B * C_out
    outputs sums C_in * K products (T' = T + 2 pad - K + 1)."""
    assume(steps + 2 * pad - kernel + 1 >= 1)
    x, w = torch.randn(steps, batch, c_in), torch.randn(kernel, c_in, c_out)
    c = counts(refimpl_backend, lambda: aten.conv_tbc(x, w, torch.randn(c_out), pad))
    reach(aten.conv_tbc in c)
    expected = 2 * (steps + 2 * pad - kernel + 1) * batch * c_out * c_in * kernel
    assert c.get(aten.conv_tbc) == expected, (
        f"{refimpl_backend.name}: conv_tbc T={steps} B={batch} C_in={c_in} C_out={c_out} "
        f"K={kernel} pad={pad} counted {c}, expected {expected} by hand")


#: varlen attention (sequence offsets) on meta tensors: the offsets' values are unknown, so
#: every sequence counts at the given maximum lengths (refimpl's documented upper bound).
VARLEN = {
    "flash_varlen": lambda q, k, v, cq, ck, mq, mk: aten._flash_attention_forward(
        q, k, v, cq, ck, mq, mk, 0.0, False, False),
    "efficient_varlen": lambda q, k, v, cq, ck, mq, mk: aten._efficient_attention_forward(
        q[None], k[None], v[None], None, cq, ck, mq, mk, 0.0, 0, False),
}


@given(st.sampled_from(sorted(VARLEN)), st.integers(1, 3), st.integers(1, 2),
       st.integers(1, 4), st.integers(1, 4), st.sampled_from([8, 16]), st.booleans())
def test_varlen_attention_is_hand_derived(refimpl_backend, kernel, sequences, h, max_q, max_k,
                                          d, backward):
    offsets = torch.empty(sequences + 1, dtype=torch.int32, device="meta")
    q, k, v = (_meta(sequences * n, h, d) for n in (max_q, max_k, max_k))
    backward = backward and kernel == "flash_varlen"

    def run():
        out = VARLEN[kernel](q, k, v, offsets, offsets, max_q, max_k)[0]
        if backward:
            out.sum().backward()

    c = counts(refimpl_backend, run)
    reach(sum(c.values()) > 0)
    per_pair = 2 * sequences * h * max_q * max_k
    expected = per_pair * 2 * d + (per_pair * 5 * d if backward else 0)
    assert sum(c.values()) == expected, (
        f"{refimpl_backend.name}: {kernel} ({sequences} sequences, h={h}, max_q={max_q}, "
        f"max_k={max_k}, d={d}, backward={backward}) counted {c}, expected {expected}")


GROUPED_MM = getattr(aten, "_grouped_mm", None)


def _has_meta_kernel(op) -> bool:
    """Whether ``op`` runs on meta tensors in this torch (the fused encoder layer's meta
    kernel arrived after 2.10)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta")


ENCODER_ON_META = _has_meta_kernel(aten._transformer_encoder_layer_fwd.default)


@given(st.sampled_from(["3d x 3d", "2d x 3d", "3d x 2d", "2d x 2d"]), st.integers(1, 4),
       st.sampled_from([8, 16]), st.sampled_from([8, 16]), st.sampled_from([8, 16]))
def test_grouped_mm_is_hand_derived(refimpl_backend, form, groups, m, n, k):
    """_grouped_mm on meta bf16 tensors (16-byte aligned strides): 3d x 3d is ``groups``
    products (2 G m n k); 2d x 3d splits the rows of ``a`` among the groups (2 M n k for all
    M rows); 3d x 2d splits the columns of ``b`` (group g: ``a[g]`` [m, k] times its share of
    the N columns: 2 m N k in all); 2d x 2d splits K among them (2 m n K)."""
    if GROUPED_MM is None:
        reach(False)
        return
    meta = lambda *shape: torch.empty(*shape, device="meta", dtype=torch.bfloat16)
    offs = torch.empty(groups, dtype=torch.int32, device="meta")
    call, expected = {
        "3d x 3d": (lambda: GROUPED_MM(meta(groups, m, k), meta(groups, k, n)),
                    2 * groups * m * n * k),
        "2d x 3d": (lambda: GROUPED_MM(meta(groups * m, k), meta(groups, k, n), offs),
                    2 * groups * m * n * k),
        "3d x 2d": (lambda: GROUPED_MM(meta(groups, m, k), meta(k, groups * n), offs),
                    2 * m * groups * n * k),
        "2d x 2d": (lambda: GROUPED_MM(meta(m, groups * k), meta(groups * k, n), offs),
                    2 * m * n * groups * k),
    }[form]
    c = counts(refimpl_backend, call)
    reach(sum(c.values()) > 0)
    assert sum(c.values()) == expected, (
        f"{refimpl_backend.name}: _grouped_mm {form} (G={groups}, m={m}, n={n}, k={k}) "
        f"counted {c}, expected {expected} by hand")


@given(st.integers(1, 2), st.integers(1, 4), st.integers(1, 4), st.integers(1, 5),
       st.sampled_from([1.0, 2.0, 3.0, float("inf")]), st.sampled_from(["x1", "x2", "both"]))
def test_cdist_is_hand_derived(refimpl_backend, batch, rows1, rows2, coords, p, grads):
    """cdist(x1 [B, P, M], x2 [B, R, M], p) on the pairwise kernel (``_cdist_forward``; the
    mm form of p = 2 is switched off): each of the B P R distances reduces over the M
    coordinates, 2 FLOPs per coordinate (the mm convention): ``2 B P R M``. Its backward
    (``_cdist_backward``, once per input that needs a gradient) spreads each distance's
    gradient over the same (pair, coordinate) terms: ``2 B P R M`` per input."""
    x1 = torch.randn(batch, rows1, coords, requires_grad=grads in ("x1", "both"))
    x2 = torch.randn(batch, rows2, coords, requires_grad=grads in ("x2", "both"))

    def run():
        dist = torch.cdist(x1, x2, p=p, compute_mode="donot_use_mm_for_euclid_dist")
        dist.sum().backward()

    c = counts(refimpl_backend, run)
    reach(aten._cdist_forward in c and aten._cdist_backward in c)
    per_pass = 2 * batch * rows1 * rows2 * coords
    expected = {aten._cdist_forward: per_pass,
                aten._cdist_backward: per_pass * (2 if grads == "both" else 1)}
    assert c == expected, (f"{refimpl_backend.name}: cdist B={batch} P={rows1} R={rows2} "
                           f"M={coords} p={p} grads={grads} counted {c}, expected {expected}")


@given(st.integers(1, 3), st.integers(1, 2), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 2), st.booleans())
def test_rnn_backward_is_hand_derived(refimpl_backend, steps, batch, inputs, hidden, layers,
                                      bidirectional):
    """Every kind of :data:`RNNS` per example, forward + backward, with the input and the
    initial state needing gradients: each forward product ``W @ v`` (2 per weight element
    per step and row) gives in the backward one product for the gradient of ``v`` and one
    for the gradient of ``W``, so backward = 2 x forward and the total is 3 x the forward
    count of test_rnn_forward_is_hand_derived (fused LSTM layer or decomposed mm alike)."""
    directions = 2 if bidirectional else 1
    counted, expected = {}, {}
    for kind, (cls, gates) in sorted(RNNS.items()):
        module = cls(inputs, hidden, num_layers=layers, bidirectional=bidirectional)
        x = torch.randn(steps, batch, inputs, requires_grad=True)
        state = [torch.randn(layers * directions, batch, hidden, requires_grad=True)
                 for _ in range(2 if kind == "LSTM" else 1)]
        start = tuple(state) if kind == "LSTM" else state[0]
        counted[kind] = sum(counts(refimpl_backend, lambda m=module, x=x, s=start:
                                   m(x, s)[0].sum().backward()).values())
        forward = sum(2 * steps * batch * gates * hidden * (width + hidden) * directions
                      for width in [inputs] + [hidden * directions] * (layers - 1))
        expected[kind] = 3 * forward
    reach(all(n > 0 for n in counted.values()))
    wrong = {kind: (counted[kind], expected[kind]) for kind in counted
             if counted[kind] != expected[kind]}
    assert not wrong, (f"{refimpl_backend.name}: T={steps} B={batch} I={inputs} H={hidden} "
                       f"layers={layers} bidirectional={bidirectional}: kind -> (counted, "
                       f"expected by hand) {wrong}")


@pytest.mark.skipif(not ENCODER_ON_META, reason=f"torch {torch.__version__} has no meta "
                    "kernel for aten._transformer_encoder_layer_fwd")
@given(st.sampled_from([(), (1,), (2,), (3,)]), st.integers(1, 4), st.sampled_from([1, 2]),
       st.integers(1, 3), st.integers(1, 8))
def test_fused_encoder_layer_on_meta_is_hand_derived(refimpl_backend, batch, seq, heads,
                                                     head_dim, ffn):
    """``_transformer_encoder_layer_fwd`` on shape-only (meta) tensors, batched ``[B, L, E]``
    or unbatched ``[L, E]`` (B = 1; the meta kernel takes it, the CPU kernel does not): with
    ``T = B L`` tokens, in-projection ``6 T E^2``, ``q k^T`` and ``p v`` ``4 B L^2 E``,
    out-projection ``2 T E^2``, feed-forward ``4 T E F``."""
    embed = heads * head_dim
    meta = lambda *shape: torch.empty(*shape, device="meta")
    src = meta(*batch, seq, embed)
    norm = [meta(embed) for _ in range(4)]
    c = counts(refimpl_backend, lambda: aten._transformer_encoder_layer_fwd(
        src, embed, heads, meta(3 * embed, embed), meta(3 * embed), meta(embed, embed),
        meta(embed), False, False, 1e-5, *norm, meta(ffn, embed), meta(ffn), meta(embed, ffn),
        meta(embed), None, None))
    reach(aten._transformer_encoder_layer_fwd in c)
    groups = prod(batch)
    tokens = groups * seq
    expected = (6 * tokens * embed ** 2 + 4 * groups * seq ** 2 * embed
                + 2 * tokens * embed ** 2 + 4 * tokens * embed * ffn)
    assert c == {aten._transformer_encoder_layer_fwd: expected}, (
        f"{refimpl_backend.name}: src {tuple(src.shape)}, {heads} heads, ffn {ffn}: counted "
        f"{c}, expected {expected} by hand")
