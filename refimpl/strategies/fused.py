"""Hypothesis strategies for torch.nn modules with a fused inference fast path.

Under ``torch.inference_mode()`` (or ``eval()`` + ``no_grad``) these modules replace their
linear layers and attention with one fused op; with autograd on they run the unfused path.
Both compute the same math, so a FLOP counter must give both the same count.

:data:`FUSED_MODULES` is the list (one source of truth): every torch.nn module whose forward
takes a fused path, with the fused op it takes. :func:`fused_cases` draws a
:class:`FusedCase` that satisfies the fast path's conditions (``batch_first``, an even number
of heads, relu/gelu, no extra key/value bias), so the fused op runs whenever the case runs
under inference_mode. It shrinks towards one sequence of one token, 2 heads of width 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st
from torch import nn

__all__ = ["FUSED_MODULES", "FusedCase", "fused_cases"]

aten = torch.ops.aten

#: module -> the fused ops its inference path runs.
FUSED_MODULES: dict[str, tuple[Any, ...]] = {
    "MultiheadAttention": (aten._native_multi_head_attention,),
    "TransformerEncoderLayer": (aten._transformer_encoder_layer_fwd,),
    "TransformerEncoder": (aten._transformer_encoder_layer_fwd,),
    "TransformerDecoderLayer": (aten._native_multi_head_attention,),
    "TransformerDecoder": (aten._native_multi_head_attention,),
    "Transformer": (aten._transformer_encoder_layer_fwd, aten._native_multi_head_attention),
}


@dataclass(frozen=True)
class FusedCase:
    """One module of :data:`FUSED_MODULES` and its input: ``batch`` sequences of ``seq``
    tokens (decoders also get a memory of ``memory_seq`` tokens), ``heads`` heads of width
    ``head_dim``, a feed-forward of width ``ffn``, ``layers`` layers where there is a stack."""

    kind: str
    batch: int
    seq: int
    memory_seq: int
    heads: int
    head_dim: int
    ffn: int
    layers: int
    norm_first: bool
    activation: str
    need_weights: bool
    seed: int

    @property
    def embed(self) -> int:
        return self.heads * self.head_dim

    @property
    def fused_ops(self) -> tuple[Any, ...]:
        return FUSED_MODULES[self.kind]

    def _layer_args(self) -> dict[str, Any]:
        return dict(d_model=self.embed, nhead=self.heads, dim_feedforward=self.ffn,
                    dropout=0.0, activation=self.activation, batch_first=True,
                    norm_first=self.norm_first)

    def build(self) -> nn.Module:
        """The module, in eval mode, with weights drawn from ``seed``."""
        torch.manual_seed(self.seed)
        e, layer = self.embed, self._layer_args()
        module = {
            "MultiheadAttention": lambda: nn.MultiheadAttention(e, self.heads, batch_first=True),
            "TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(**layer),
            "TransformerEncoder": lambda: nn.TransformerEncoder(
                nn.TransformerEncoderLayer(**layer), self.layers, enable_nested_tensor=False),
            "TransformerDecoderLayer": lambda: nn.TransformerDecoderLayer(**layer),
            "TransformerDecoder": lambda: nn.TransformerDecoder(
                nn.TransformerDecoderLayer(**layer), self.layers),
            "Transformer": lambda: nn.Transformer(
                num_encoder_layers=self.layers, num_decoder_layers=self.layers, **layer),
        }[self.kind]()
        return module.eval()

    def inputs(self) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(self.seed + 1)
        x = torch.randn(self.batch, self.seq, self.embed)
        if self.kind in ("MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"):
            return (x,)
        return x, torch.randn(self.batch, self.memory_seq, self.embed)

    def run(self, module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> Any:
        if self.kind == "MultiheadAttention":
            x = inputs[0]
            return module(x, x, x, need_weights=self.need_weights)
        return module(*inputs)


@st.composite
def fused_cases(draw, kinds: st.SearchStrategy[str] | None = None) -> FusedCase:
    """A FusedCase that takes its module's fast path under inference_mode."""
    kind = draw(kinds if kinds is not None else st.sampled_from(list(FUSED_MODULES)))
    if kind not in FUSED_MODULES:
        raise ValueError(f"fused_cases: kind={kind!r} is not one of {sorted(FUSED_MODULES)}")
    small = st.integers(1, 4)
    return FusedCase(
        kind=kind, batch=draw(st.integers(1, 3)), seq=draw(st.integers(1, 6)),
        memory_seq=draw(st.integers(1, 6)), heads=draw(st.sampled_from([2, 4])),
        head_dim=draw(small), ffn=draw(st.integers(1, 16)), layers=draw(st.integers(1, 2)),
        norm_first=draw(st.booleans()), activation=draw(st.sampled_from(["relu", "gelu"])),
        need_weights=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))
