"""Target ``torchprofile``: ``torchprofile.profile_macs`` (a JIT trace, counted per aten op).

Unit: MACs. Handlers for addmm/addmv/bmm/baddbmm/linear/matmul, _convolution,
scaled_dot_product_attention and lstm, without bias; it also counts elementwise mul, norms and
pooling. It stays silent about ops it has no handler for (no list of unsupported ops), so
every matrix-product family is taken as counted; MultiheadAttention's scaling multiply makes
that family estimated.
"""

from __future__ import annotations

from torchprofile import profile_macs

from refimpl.oracle.targets.flop_peers import FlopConventions, PeerBackend, families


class TorchprofileBackend(PeerBackend):
    name = "torchprofile"
    package = "torchprofile"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "matmul",
                                "lstm", "gru"),
        estimated=families("mha"), elementwise=True,
        notes="JIT trace; bias not counted; elementwise mul, norms and pools counted; "
              "ops without a handler silently 0")

    def count(self, model, inputs):
        return profile_macs(model, inputs)
