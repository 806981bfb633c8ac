"""FLOP formulas for convolutions, forward and backward, in every aten spelling.

Forward. A convolution with weight ``[C_out, C_in / groups, *K]`` computes each output
element as a sum over ``C_in / groups`` input channels and ``prod(K)`` kernel taps; padded
positions are part of that sum (they are multiplied like any other), so

    flops = 2 * N * prod(out_spatial) * C_out * (C_in / groups) * prod(K)
          = 2 * N * prod(out_spatial) * prod(weight.shape).

A transposed convolution with weight ``[C_in, C_out / groups, *K]`` is the adjoint of that
map: every input element is multiplied by every tap of the ``C_out / groups`` filters of its
group and scattered into the output, so the count uses the *input* spatial size:

    flops = 2 * N * prod(in_spatial) * prod(weight.shape).

Backward. Each product ``x[i] * w[k]`` summed into ``out[o]`` in the forward gives exactly one
product ``grad_out[o] * w[k]`` summed into ``grad_input[i]``, and one ``grad_out[o] * x[i]``
summed into ``grad_weight[k]``. So grad_input and grad_weight each cost the forward count,
whatever the groups, stride, padding or dilation, and convolution_backward costs
``(output_mask[0] + output_mask[1]) * forward``. The bias gradient is a reduction, not counted.
"""

from __future__ import annotations

from math import prod

from torch import ops

from refimpl.flops.formulas.registry import present, register_flop_formula

aten = ops.aten


def conv_flops(x_shape, w_shape, out_shape, transposed: bool) -> int:
    """The forward count above; ``x``/``out`` are ``[N, C, *spatial]``."""
    if len(x_shape) != len(w_shape) or len(x_shape) < 3:
        raise ValueError(f"convolution: input {tuple(x_shape)} and weight {tuple(w_shape)} "
                         "must both be [batch-or-channels, channels, *spatial]")
    spatial = x_shape[2:] if transposed else out_shape[2:]
    return 2 * x_shape[0] * prod(spatial) * prod(w_shape)


@register_flop_formula([aten.convolution, aten._convolution, aten.convolution_overrideable])
def convolution_flop(x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                     *args, out_shape=None, **kwargs) -> int:
    """convolution(x, w, bias, stride, padding, dilation, transposed, ...)."""
    return conv_flops(x_shape, w_shape, out_shape, bool(transposed))


DIRECT_KERNELS = present(
    aten, "cudnn_convolution", "mkldnn_convolution", "miopen_convolution",
    "miopen_depthwise_convolution", "_mps_convolution", "_nnpack_spatial_convolution",
    "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "thnn_conv2d", "_conv_depthwise2d", "conv_depthwise3d")

TRANSPOSED_KERNELS = present(
    aten, "cudnn_convolution_transpose", "miopen_convolution_transpose",
    "_mps_convolution_transpose", "slow_conv_transpose2d", "slow_conv_transpose3d")


@register_flop_formula(DIRECT_KERNELS)
def backend_conv_flop(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """The backend-specific forward kernels (cudnn, mkldnn, miopen, mps, nnpack, slow_*,
    depthwise): (x, w, ...) with a non-transposed weight; their other arguments vary in
    order, so only the shapes of x, w and the output are read."""
    return conv_flops(x_shape, w_shape, out_shape, transposed=False)


@register_flop_formula(TRANSPOSED_KERNELS)
def backend_conv_transpose_flop(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """The backend-specific transposed kernels: (x, w [C_in, C_out/groups, *K], ...)."""
    return conv_flops(x_shape, w_shape, out_shape, transposed=True)


@register_flop_formula(aten.conv_tbc)
def conv_tbc_flop(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """conv_tbc(x [T, B, C_in], w [K, C_in, C_out], bias, pad) -> [T', B, C_out]: each output
    element sums C_in * K products, ``2 * T' * B * C_out * C_in * K``."""
    time_out, batch, _ = out_shape
    return 2 * time_out * batch * prod(w_shape)


def conv_backward_flops(grad_out_shape, x_shape, w_shape, transposed: bool,
                        output_mask) -> int:
    """``(mask[0] + mask[1]) * forward``; the forward output is grad_out's shape."""
    forward = conv_flops(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@register_flop_formula(aten.convolution_backward)
def convolution_backward_flop(grad_out_shape, x_shape, w_shape, _bias_sizes, _stride,
                              _padding, _dilation, transposed, _output_padding, _groups,
                              output_mask, *args, out_shape=None, **kwargs) -> int:
    """convolution_backward(grad_out, x, w, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    return conv_backward_flops(grad_out_shape, x_shape, w_shape, bool(transposed), output_mask)


@register_flop_formula(aten.convolution_backward_overrideable)
def convolution_backward_overrideable_flop(grad_out_shape, x_shape, w_shape, _stride,
                                           _padding, _dilation, transposed, _output_padding,
                                           _groups, output_mask, *args, out_shape=None,
                                           **kwargs) -> int:
    """convolution_backward_overrideable: as convolution_backward, without bias_sizes."""
    return conv_backward_flops(grad_out_shape, x_shape, w_shape, bool(transposed), output_mask)
