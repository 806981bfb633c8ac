"""The FLOP formula table, one module per op family.

- ``matmul``: mm, addmm, bmm, baddbmm, addbmm, _scaled_mm, _int_mm, _grouped_mm, mv, addmv,
  dot, vdot, outer/ger, addr (and the in-place addmm_, baddbmm_, addbmm_, addmv_, addr_),
  _cdist_forward/backward;
- ``conv``: convolution (every backend spelling, transposed too), conv_tbc,
  convolution_backward;
- ``attention``: SDPA flash / flash-for-CPU / efficient / cudnn / overrideable and their
  backwards, the raw _flash_attention_* / _efficient_attention_* kernels, varlen, flex;
- ``rnn``: mkldnn_rnn_layer and its backward;
- ``transformer``: torch.nn's fused inference fast paths (_native_multi_head_attention,
  _transformer_encoder_layer_fwd).

``flop_formulas`` maps each op's packet to its formula; :func:`count_flops` is the one-call
entry point for cost models; :func:`register_flop_formula` adds entries (torch's semantics).
"""

from refimpl.flops.formulas import attention, conv, matmul, rnn, transformer
from refimpl.flops.formulas.registry import (
    as_table_entry,
    checked_count,
    count_flops,
    flop_formulas,
    packet_of,
    register_flop_formula,
    shape_of,
)

#: optional entries registered because this torch build has the ops.
OPTIONAL_REGISTERED = attention.OPTIONAL_REGISTERED

__all__ = [
    "OPTIONAL_REGISTERED",
    "as_table_entry",
    "attention",
    "checked_count",
    "conv",
    "count_flops",
    "flop_formulas",
    "matmul",
    "packet_of",
    "register_flop_formula",
    "rnn",
    "shape_of",
    "transformer",
]
