"""Target ``thop``: ``thop.profile`` (forward hooks on known leaf modules).

Unit: MACs. Linear and conv layers are counted without their bias; transposed convs share
the conv rule. RNN hooks add their own gate arithmetic (estimated). Modules it has no rule
for (MultiheadAttention, any module that calls F.linear, F.scaled_dot_product_attention or
torch.matmul itself: linear_fn, sdpa, matmul) count 0: stated, thop counts only the module
types in its table.
Activations, normalisation and pooling modules are counted (elementwise).
"""

from __future__ import annotations

from thop import profile

from refimpl.oracle.targets.flop_peers import FlopConventions, PeerBackend, families


class ThopBackend(PeerBackend):
    name = "thop"
    package = "thop"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "conv", "conv_transpose"),
        estimated=families("lstm", "gru"), ignored=families("sdpa", "mha", "matmul", "linear_fn"),
        elementwise=True,
        notes="leaf-module hooks; bias not counted; unknown modules and functionals count 0")

    def count(self, model, inputs):
        macs, _params = profile(model, inputs=inputs, verbose=False)
        return macs
