"""Random models of one matmul-class layer family, for the model-level FLOP properties.

``flop_models(family)`` draws a :class:`FlopModel`: plain data (the family, its sizes and a
seed) whose ``build()`` makes the module and ``inputs()`` its example inputs. One family per
model, so a peer counter whose conventions cover that family can be compared exactly.

| family | model |
| --- | --- |
| linear | 1-3 ``nn.Linear`` layers (bias drawn per layer) on a 2-d or 3-d input |
| linear_fn | the same as :class:`FunctionalLinear` layers: ``F.linear`` called by a custom module |
| conv | one ``nn.ConvNd`` from :func:`refimpl.strategies.conv.conv_configs` (groups, stride, ...) |
| conv_transpose | one ``nn.ConvTransposeNd`` (groups, stride, output_padding, dilation) |
| sdpa | :class:`SdpaBlock`: q/k/v projections, ``F.scaled_dot_product_attention``, out proj |
| mha | ``nn.MultiheadAttention`` self-attention (bias, need_weights drawn); or, with
  ``inference``, in eval mode under ``torch.inference_mode()`` (its fused fast path) |
| lstm, gru | ``nn.LSTM`` / ``nn.GRU`` (layers, bidirectional, bias, batch_first drawn) |

Sizes are small (a few thousand FLOPs), so a peer that traces or hooks runs fast. Every
drawn model is valid by construction and shrinks towards one small layer.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn

from refimpl.strategies.conv import ConvConfig, conv_configs

__all__ = ["FLOP_MODEL_FAMILIES", "FlopModel", "FunctionalLinear", "SdpaBlock", "flop_models"]

FLOP_MODEL_FAMILIES = ("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha", "lstm",
                       "gru")


class FunctionalLinear(nn.Module):
    """A linear layer as custom code writes one (swin's attention, GPT-2's Conv1D): its own
    parameters and a call to ``F.linear``, not an ``nn.Linear`` module."""

    def __init__(self, n_in: int, n_out: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / n_in**0.5)
        self.bias = nn.Parameter(torch.zeros(n_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class SdpaBlock(nn.Module):
    """Self-attention through ``F.scaled_dot_product_attention``: q/k/v projections
    (``kv_heads`` key/value heads: grouped-query attention when fewer than ``heads``), the
    attention (optionally causal) and an output projection."""

    def __init__(self, embed: int, heads: int, kv_heads: int, bias: bool, causal: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, embed // heads
        self.causal = causal
        self.q = nn.Linear(embed, embed, bias=bias)
        self.k = nn.Linear(embed, kv_heads * self.head_dim, bias=bias)
        self.v = nn.Linear(embed, kv_heads * self.head_dim, bias=bias)
        self.out = nn.Linear(embed, embed, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.kv_heads != self.heads:  # broadcast each key/value head to its query heads
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, s, e))


class _FirstOutput(nn.Module):
    """Calls ``inner`` and returns its first output (MHA and RNNs return tuples)."""

    def __init__(self, inner: nn.Module, self_attention: bool = False,
                 need_weights: bool = False) -> None:
        super().__init__()
        self.inner, self.self_attention, self.need_weights = inner, self_attention, need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.self_attention:
            return self.inner(x, x, x, need_weights=self.need_weights)[0]
        return self.inner(x)[0]


@dataclass(frozen=True)
class FlopModel:
    """A drawn model: ``family``, its sizes (``params``, a sorted tuple of (name, value)),
    the input shape and the seed of its weights and inputs."""

    family: str
    params: tuple[tuple[str, Any], ...]
    input_shape: tuple[int, ...]
    seed: int

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def build(self) -> nn.Module:
        """The model, weights drawn from ``seed``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = _BUILDERS[self.family](self)
        return model.eval() if self.inference else model

    @property
    def inference(self) -> bool:
        """Whether the model runs in eval mode under ``torch.inference_mode()``."""
        return bool(dict(self.params).get("inference", False))

    def context(self):
        """The context to run the model in: inference_mode for an inference model."""
        return torch.inference_mode() if self.inference else contextlib.nullcontext()

    def inputs(self) -> tuple[torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed + 1)
        return (torch.randn(self.input_shape, generator=g),)


def _build_linear(m: FlopModel) -> nn.Module:
    sizes, biases = m.param("features"), m.param("bias")
    layer = nn.Linear if m.family == "linear" else FunctionalLinear
    return nn.Sequential(*(layer(a, b, bias=bias) for a, b, bias in zip(sizes, sizes[1:], biases)))


def _build_conv(m: FlopModel) -> nn.Module:
    c: ConvConfig = m.param("conv")
    kind = ("ConvTranspose" if c.transposed else "Conv") + f"{c.spatial_dims}d"
    extra = {"output_padding": c.output_padding} if c.transposed else {}
    return getattr(nn, kind)(c.in_channels, c.out_channels, c.kernel, stride=c.stride,
                             padding=c.padding, dilation=c.dilation, groups=c.groups,
                             bias=c.bias, **extra)


def _build_sdpa(m: FlopModel) -> nn.Module:
    return SdpaBlock(m.param("embed"), m.param("heads"), m.param("kv_heads"), m.param("bias"),
                     m.param("causal"))


def _build_mha(m: FlopModel) -> nn.Module:
    mha = nn.MultiheadAttention(m.param("embed"), m.param("heads"), bias=m.param("bias"),
                                batch_first=True)
    return _FirstOutput(mha, self_attention=True, need_weights=m.param("need_weights"))


def _build_rnn(m: FlopModel) -> nn.Module:
    cls = nn.LSTM if m.family == "lstm" else nn.GRU
    return _FirstOutput(cls(m.param("input"), m.param("hidden"), num_layers=m.param("layers"),
                            bias=m.param("bias"), batch_first=True,
                            bidirectional=m.param("bidirectional")))


_BUILDERS = {"linear": _build_linear, "linear_fn": _build_linear, "conv": _build_conv,
             "conv_transpose": _build_conv, "sdpa": _build_sdpa, "mha": _build_mha,
             "lstm": _build_rnn, "gru": _build_rnn}


def _params(draw: st.DrawFn, family: str) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The family's sizes and the input shape."""
    small = st.integers(1, 8)
    if family in ("linear", "linear_fn"):
        layers = draw(st.integers(1, 3))
        features = tuple(draw(st.lists(small, min_size=layers + 1, max_size=layers + 1)))
        rows = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
        bias = tuple(draw(st.lists(st.booleans(), min_size=layers, max_size=layers)))
        return {"features": features, "bias": bias}, (*rows, features[0])
    if family in ("conv", "conv_transpose"):
        cfg = draw(conv_configs(transposed=st.just(family == "conv_transpose")))
        return {"conv": cfg}, cfg.input_shape
    if family in ("sdpa", "mha"):
        # MultiheadAttention's fused inference path needs an even head count and biases
        # (and need_weights=False, as ViT calls it): an inference model always has them
        inference = family == "mha" and draw(st.booleans())
        heads = draw(st.sampled_from([2, 4]) if inference else st.integers(1, 4))
        embed = heads * draw(st.integers(1, 4))
        params = {"embed": embed, "heads": heads, "bias": inference or draw(st.booleans())}
        if family == "sdpa":
            kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
            params.update(kv_heads=kv, causal=draw(st.booleans()))
        else:
            params["inference"] = inference
            params["need_weights"] = not inference and draw(st.booleans())
        return params, (draw(st.integers(1, 3)), draw(st.integers(1, 6)), embed)
    params = {"input": draw(small), "hidden": draw(small), "layers": draw(st.integers(1, 2)),
              "bias": draw(st.booleans()), "bidirectional": draw(st.booleans())}
    return params, (draw(st.integers(1, 3)), draw(st.integers(1, 5)), params["input"])


@st.composite
def flop_models(draw: st.DrawFn, family: str | st.SearchStrategy[str] | None = None) -> FlopModel:
    """A :class:`FlopModel` of ``family`` (a name, a strategy of names, or None: any)."""
    if isinstance(family, str):
        if family not in FLOP_MODEL_FAMILIES:
            raise ValueError(f"family={family!r}: expected one of {FLOP_MODEL_FAMILIES}")
        chosen = family
    else:
        chosen = draw(family if family is not None else st.sampled_from(FLOP_MODEL_FAMILIES))
    params, shape = _params(draw, chosen)
    return FlopModel(chosen, tuple(sorted(params.items())), shape, draw(st.integers(0, 2**16)))
