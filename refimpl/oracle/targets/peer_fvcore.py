"""Target ``fvcore``: fvcore's ``FlopCountAnalysis`` (a JIT trace, counted per aten op).

Unit: MACs (fvcore calls one multiply-accumulate a "flop"). It counts addmm, bmm,
_convolution (transposed too), einsum, matmul, mm and linear; bias additions are not
counted. Ops it has no handle for (``aten::scaled_dot_product_attention``, ``aten::lstm``,
``aten::gru``) it reports through ``unsupported_ops()`` and counts as 0: stated ignored.
Its default handles for normalisation, upsampling and pooling are replaced here by a handle
counting 0, so its count is of matrix products only. (fvcore's documented way,
``set_op_handle(name, None)``, does not work for an op with a default handle: the handle is
looked up before the ignore list; docs/findings.md.)
"""

from __future__ import annotations

from fvcore.nn import FlopCountAnalysis

from refimpl.oracle.targets.flop_peers import FlopConventions, PeerBackend, families

#: fvcore's default handles that count elementwise work, not matrix products.
NON_MATMUL_HANDLES = ("aten::batch_norm", "aten::group_norm", "aten::layer_norm",
                      "aten::instance_norm", "aten::upsample_nearest2d",
                      "aten::upsample_bilinear2d", "aten::adaptive_avg_pool2d",
                      "aten::grid_sampler")


def _free(inputs, outputs) -> int:
    """A handle for an op counted as 0 (refimpl's convention for elementwise work)."""
    return 0


class FvcoreBackend(PeerBackend):
    name = "fvcore"
    package = "fvcore"
    flop_conventions = FlopConventions(
        "MAC", counted=families("linear", "linear_fn", "conv", "conv_transpose", "mha", "matmul"),
        ignored=families("sdpa", "lstm", "gru"),
        notes="JIT trace; SDPA, LSTM and GRU reported as unsupported ops and counted 0; "
              "norm/pool/upsample handles set to 0 by the adapter")

    def count(self, model, inputs):
        analysis = FlopCountAnalysis(model, inputs)
        analysis.set_op_handle(**dict.fromkeys(NON_MATMUL_HANDLES, _free))
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        return analysis.total()
