"""FLOP formulas for the fused CPU recurrent layer (``mkldnn_rnn_layer``: nn.LSTM on CPU).

One layer, one direction: at each of the ``T`` time steps and for each of the ``B`` batch
rows, the gates are ``W_ih @ x_t + W_hh @ h_{t-1}`` (+ biases), with ``W_ih`` of shape
``[G * H, I]`` and ``W_hh`` of shape ``[G * H, H]`` (G = 4 gates for an LSTM). Those are two
matrix-vector products per (step, row), ``2 * numel(W_ih) + 2 * numel(W_hh)`` FLOPs, so

    forward = 2 * T * B * (numel(W_ih) + numel(W_hh)).

The gate non-linearities and bias additions are not counted. The backward propagates the
gate gradients through both products (to the input and the previous hidden state) and forms
both weight gradients (outer products accumulated over steps and rows): each of the four is
one multiply-accumulate per weight element per (step, row), so backward = 2 * forward.

GRU and plain RNN layers on CPU are not fused: they decompose into mm/addmm, which the mm
family counts. ``lstm_cell`` and friends decompose into linear layers likewise.
"""

from __future__ import annotations

from math import prod

from torch import ops

from refimpl.flops.formulas.registry import register_flop_formula

aten = ops.aten


def rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape) -> int:
    """``2 * T * B * (numel(W_ih) + numel(W_hh))``; input is [T, B, I] or [B, T, I]."""
    steps_times_rows = prod(input_shape[:-1])
    return 2 * steps_times_rows * (prod(w_ih_shape) + prod(w_hh_shape))


@register_flop_formula(aten.mkldnn_rnn_layer)
def mkldnn_rnn_layer_flop(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None,
                          **kwargs) -> int:
    """mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, ...)."""
    return rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape)


@register_flop_formula(aten.mkldnn_rnn_layer_backward)
def mkldnn_rnn_layer_backward_flop(input_shape, w_ih_shape, w_hh_shape, *args,
                                   out_shape=None, **kwargs) -> int:
    """mkldnn_rnn_layer_backward(input, w_ih, w_hh, b_ih, b_hh, ...): 2 * forward."""
    return 2 * rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape)
