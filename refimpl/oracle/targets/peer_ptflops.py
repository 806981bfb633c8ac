"""Targets ``ptflops`` (its default ``pytorch`` backend) and ``ptflops-aten`` (its ``aten``
backend), from ``ptflops.get_model_complexity_info``.

Unit: MACs. Both count bias additions (one per output element of a Linear or conv layer).
``ptflops`` hooks known modules (Linear, convs, transposed convs, RNNs, MultiheadAttention)
and patches functionals (F.linear, torch.matmul, ..., and elementwise ones: F.relu,
F.softmax, torch.add/mul); its RNN and attention hooks add their own gate, scaling and softmax
arithmetic (estimated), and it has no rule for ``F.scaled_dot_product_attention`` (ignored).
It also counts activations, normalisation and pooling (elementwise). ``ptflops-aten`` counts
only aten.mm, matmul, addmm, bmm and convolution (its documented list): SDPA and the fused
CPU LSTM are ignored; GRU and MultiheadAttention decompose into addmm whose bias it counts
where torch's kernel fuses it (estimated). Both put the model in eval mode (restored here).
"""

from __future__ import annotations

from ptflops import get_model_complexity_info

from refimpl.oracle.targets.flop_peers import (
    FlopConventions,
    PeerBackend,
    _ArgsModule,
    families,
)

_CONV = ("linear", "linear_fn", "conv", "conv_transpose")


class PtflopsBackend(PeerBackend):
    name = "ptflops"
    package = "ptflops"
    backend = "pytorch"
    flop_conventions = FlopConventions(
        "MAC", counted=families(*_CONV, "matmul"), bias=families(*_CONV),
        estimated=families("mha", "lstm", "gru"), ignored=families("sdpa"), elementwise=True,
        notes="module hooks + patched functionals; bias counted; RNN/MHA hooks add gate, "
              "scaling and softmax work; no rule for SDPA; activations/norms/pools counted")

    def count(self, model, inputs):
        macs, _params = get_model_complexity_info(
            _ArgsModule(model), (1,), input_constructor=lambda _res: {"args": inputs},
            as_strings=False, print_per_layer_stat=False, backend=self.backend)
        return macs


class PtflopsAtenBackend(PtflopsBackend):
    name = "ptflops-aten"
    backend = "aten"
    flop_conventions = FlopConventions(
        "MAC", counted=families(*_CONV, "matmul"), bias=families(*_CONV),
        estimated=families("mha", "gru"), ignored=families("sdpa", "lstm"),
        notes="dispatch mode over aten.mm/matmul/addmm/bmm/convolution only; bias counted")
