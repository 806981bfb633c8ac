"""An independent hand derivation of a model's matrix-product FLOPs, layer by layer.

This is the expectation the FLOP-peer properties and ``benchmarks/flop_counters_table.py``
check every counter against, refimpl's included, so it never reads refimpl's formula table:
each layer's count is derived here from first principles, from the layer's hyper-parameters
and the shapes it saw (recorded by forward hooks while the model runs once).

Convention (refimpl's and torch's): one multiply-accumulate is 2 FLOPs; only matrix products
are counted (a product of an ``[m, k]`` and a ``[k, n]`` matrix is ``2 m k n``); bias
additions, activations, normalisation, softmax and pooling are free. Bias additions are
tallied apart (``bias_adds``: one per output element of a layer with a bias) so a peer that
counts them can be compared.

Per layer (B batch, products per output element in brackets):

| layer | forward FLOPs |
| --- | --- |
| Linear (family linear), rows R | ``2 R in out`` |
| a custom module's own linear (linear_fn) | the same: transformers' Conv1D, ``FunctionalLinear`` |
| ConvNd, output ``[B, Co, *O]`` | ``2 B prod(O) Co (Ci/g) prod(k)``: an output sums Ci/g k |
| ConvTransposeNd, input ``[B, Ci, *I]`` | ``2 B prod(I) Ci (Co/g) prod(k)``: input feeds Co/g k |
| attention, H query heads | ``2 B H Sq Sk (D + Dv)`` (scores ``q k^T`` and ``p v``) |
| MultiheadAttention | projections (mha) + attention (mha; sdpa when need_weights=False) |
| LSTM / GRU, G = 4 / 3 gates | per layer and direction ``2 T B G H (I + H)`` |
| Swin window attention | qkv and proj linears on the padded map + attention per window |

Backward. Every product ``A B`` has one gradient product per operand that requires a
gradient, each as large as the forward (``dA = dY B^T``, ``dB = A^T dY``): a linear or conv
layer whose input requires grad costs 2x its forward, else 1x. The fused attention kernels
(CPU flash, the only SDPA path for float32 without dropout here) recompute the scores and
form all four gradients: ``2 B H Sq Sk (3 D + 2 Dv)``. The fused CPU LSTM kernel forms all
four gradients of both products: 2x forward. A GRU on CPU runs as separate products: its
step-0 hidden product reads the zero initial state, which needs no gradient (1x), and layer
0's input product needs its input's gradient only when the input requires grad.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import prod
from typing import Any

import torch
from torch import nn

#: the layer families a derivation reports (a peer states which of them it counts).
FAMILIES = ("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha", "matmul", "lstm",
            "gru")


@dataclass
class Derivation:
    """Matrix-product FLOPs per family (forward, backward) and bias additions per family."""

    forward: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    backward: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bias_adds: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, family: str, forward: int, backward: int, bias_adds: int = 0) -> None:
        self.forward[family] += forward
        self.backward[family] += backward
        self.bias_adds[family] += bias_adds

    def total_forward(self, families: Any = None) -> int:
        return sum(v for f, v in self.forward.items() if families is None or f in families)

    def total_backward(self) -> int:
        return sum(self.backward.values())

    def ran(self) -> set[str]:
        """The families with a non-zero forward count."""
        return {f for f, v in self.forward.items() if v}


def _first_tensor(values: Any) -> torch.Tensor | None:
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (tuple, list)):
        for value in values:
            found = _first_tensor(value)
            if found is not None:
                return found
    if hasattr(values, "to_tuple"):  # transformers' ModelOutput
        return _first_tensor(values.to_tuple())
    return None


def _grads(x: torch.Tensor, weight: torch.Tensor | None) -> int:
    """How many gradient products a product of ``x`` and ``weight`` needs (0, 1 or 2)."""
    needs = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    return needs * (int(x.requires_grad) + int(weight is not None and weight.requires_grad))


def _linear(d: Derivation, family: str, x: torch.Tensor, weight: torch.Tensor,
            n_in: int, n_out: int, bias: bool) -> None:
    rows = x.numel() // n_in
    fwd = 2 * rows * n_in * n_out
    d.add(family, fwd, fwd * _grads(x, weight), rows * n_out if bias else 0)


def _conv(d: Derivation, m: nn.modules.conv._ConvNd, x: torch.Tensor, y: torch.Tensor) -> None:
    batch, k = x.shape[0] if x.dim() > len(m.kernel_size) + 1 else 1, prod(m.kernel_size)
    per_group_in, per_group_out = m.in_channels // m.groups, m.out_channels // m.groups
    if m.transposed:  # each input element scatters into Co/g * k outputs
        fwd = 2 * batch * prod(x.shape[-len(m.kernel_size):]) * m.in_channels * per_group_out * k
    else:  # each output element sums Ci/g * k inputs
        fwd = 2 * batch * prod(y.shape[-len(m.kernel_size):]) * m.out_channels * per_group_in * k
    family = "conv_transpose" if m.transposed else "conv"
    d.add(family, fwd, fwd * _grads(x, m.weight), y.numel() if m.bias is not None else 0)


def _attention(d: Derivation, family: str, batch: int, heads: int, seq_q: int, seq_k: int,
               dim: int, dim_v: int, grad: bool) -> None:
    fwd = 2 * batch * heads * seq_q * seq_k * (dim + dim_v)
    bwd = 2 * batch * heads * seq_q * seq_k * (3 * dim + 2 * dim_v) if grad else 0
    d.add(family, fwd, bwd)


def _mha(d: Derivation, m: nn.MultiheadAttention, args: tuple, kwargs: dict) -> None:
    q, k, v = (list(args) + [kwargs.get(n) for n in ("query", "key", "value")][len(args):])[:3]
    if not m.batch_first and q.dim() == 3:
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    if q.dim() == 2:
        q, k, v = (t.unsqueeze(0) for t in (q, k, v))
    e, h = m.embed_dim, m.num_heads
    rows_q, rows_k = q.shape[0] * q.shape[1], k.shape[0] * k.shape[1]
    grad = _grads(q, m.out_proj.weight) > 0
    proj = 2 * (rows_q * q.shape[-1] * e + rows_k * k.shape[-1] * e + rows_k * v.shape[-1] * e)
    out = 2 * rows_q * e * e
    bias_adds = (rows_q + 2 * rows_k) * e * (m.in_proj_bias is not None) + \
        rows_q * e * (m.out_proj.bias is not None)
    d.add("mha", proj + out, 2 * (proj + out) if grad else 0, bias_adds)
    # need_weights=False runs the attention through SDPA; True through explicit bmm
    family = "mha" if kwargs.get("need_weights", True) else "sdpa"
    _attention(d, family, q.shape[0], h, q.shape[1], k.shape[1], e // h, e // h, grad)


def _rnn(d: Derivation, m: nn.RNNBase, x: torch.Tensor) -> None:
    gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}[m.mode]
    steps_rows = x.numel() // x.shape[-1]
    batch = 1 if x.dim() == 2 else x.shape[0 if m.batch_first else 1]
    dirs, hid = 1 + int(m.bidirectional), m.hidden_size
    grad = torch.is_grad_enabled() and m.weight_hh_l0.requires_grad
    family = "lstm" if m.mode == "LSTM" else "gru"
    for layer in range(m.num_layers):
        n_in = m.input_size if layer == 0 else hid * dirs
        ih, hh = 2 * steps_rows * gates * hid * n_in, 2 * steps_rows * gates * hid * hid
        bias = steps_rows * 2 * gates * hid if m.bias else 0
        if m.mode == "LSTM":  # fused kernel: every gradient of both products
            bwd = 2 * (ih + hh)
        else:  # separate products: the zero initial state needs no gradient
            x_grad = layer > 0 or x.requires_grad
            bwd = ih * (1 + x_grad) + 2 * hh - 2 * batch * gates * hid * hid
        d.add(family, dirs * ih + dirs * hh, dirs * bwd if grad else 0, dirs * bias)


def _swin(d: Derivation, m: nn.Module, x: torch.Tensor) -> None:
    b, height, width, c = x.shape
    wh, ww = m.window_size
    ph, pw = -(-height // wh) * wh, -(-width // ww) * ww  # padded to whole windows
    rows, tokens = b * ph * pw, wh * ww
    grad = _grads(x, m.qkv.weight) > 0
    qkv, proj = 2 * rows * c * 3 * c, 2 * rows * c * c
    bias = rows * 3 * c * (m.qkv.bias is not None) + rows * c * (m.proj.bias is not None)
    d.add("linear_fn", qkv + proj, 2 * (qkv + proj) if grad else 0, bias)  # F.linear calls
    windows = b * (ph // wh) * (pw // ww)
    hd = c // m.num_heads
    fwd = 2 * windows * m.num_heads * tokens * tokens * 2 * hd  # q k^T and p v, plain matmuls
    d.add("matmul", fwd, 2 * fwd if grad else 0)


#: class name -> (attribute with the query head count, attribute with the head dim).
ATTENTION_MODULES = {
    "GPT2Attention": ("num_heads", "head_dim"),
    "BertSelfAttention": ("num_attention_heads", "attention_head_size"),
    "LlamaAttention": (None, "head_dim"),
    "SdpaBlock": ("heads", "head_dim"),
}


def _named_attention(d: Derivation, m: nn.Module, y: torch.Tensor) -> None:
    heads_attr, dim_attr = ATTENTION_MODULES[type(m).__name__]
    heads = getattr(m, heads_attr) if heads_attr else m.config.num_attention_heads
    dim = getattr(m, dim_attr)
    grad = torch.is_grad_enabled() and any(p.requires_grad for p in m.parameters())
    _attention(d, "sdpa", y.shape[0], heads, y.shape[1], y.shape[1], dim, dim, grad)


def _hook(d: Derivation):
    def hook(m: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
        x, y = _first_tensor((args, kwargs)), _first_tensor(out)
        name = type(m).__name__
        if isinstance(m, nn.Linear):
            _linear(d, "linear", x, m.weight, m.in_features, m.out_features, m.bias is not None)
        elif name == "Conv1D":  # transformers' GPT-2 projection: x @ W + b, W [in, out]
            _linear(d, "linear_fn", x, m.weight, m.weight.shape[0], m.nf, True)
        elif name == "FunctionalLinear":  # F.linear(x, W, b) in a custom module
            n_out, n_in = m.weight.shape
            _linear(d, "linear_fn", x, m.weight, n_in, n_out, m.bias is not None)
        elif isinstance(m, nn.modules.conv._ConvNd):
            _conv(d, m, x, y)
        elif isinstance(m, nn.MultiheadAttention):
            _mha(d, m, args, kwargs)
        elif isinstance(m, nn.RNNBase):
            _rnn(d, m, x)
        elif name == "ShiftedWindowAttention":
            _swin(d, m, x)
        elif name in ATTENTION_MODULES:
            _named_attention(d, m, y)
    return hook


def derive(model: nn.Module, inputs: tuple, backward: bool = False) -> Derivation:
    """Run ``model(*inputs)`` once (and ``out.sum().backward()`` when ``backward``) and
    derive its matrix-product FLOPs layer by layer (see the module docstring)."""
    d = Derivation()
    handles = [m.register_forward_hook(_hook(d), with_kwargs=True) for m in model.modules()]
    try:
        out = model(*inputs)
        if backward:
            _first_tensor(out).float().sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    if not backward:
        d.backward.clear()
    return d


def assert_model_flops(observed: int, expected: int, reproducer: str) -> None:
    """``observed == expected``, else an AssertionError carrying both and the reproducer."""
    if observed != expected:
        raise AssertionError(
            f"model FLOPs: expected {expected} (hand derivation, by the counter's stated "
            f"conventions), observed {observed} ({observed - expected:+d})\n"
            f"reproducer: {reproducer}")
