"""Hypothesis strategies for convolution configurations.

:func:`conv_configs` draws a :class:`ConvConfig`: 1-3 spatial dims, batch, channels, groups
(depthwise included), kernel, stride, padding, dilation, transposed with output_padding,
bias. Every drawn config is valid (torch accepts it and every output size is >= 1), by
construction rather than by filtering: sizes are drawn in dependency order (kernel and
dilation, then an input large enough, then a padding small enough), so it shrinks towards
a 1-d, batch-1, 1-channel, unit-stride conv.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

__all__ = ["ConvConfig", "conv_configs"]


@dataclass(frozen=True)
class ConvConfig:
    """One convolution call's shapes and hyper-parameters (per spatial dim tuples)."""

    batch: int
    in_channels: int
    out_channels: int
    groups: int
    input_size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    bias: bool

    @property
    def spatial_dims(self) -> int:
        return len(self.input_size)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.in_channels, *self.input_size)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        if self.transposed:
            return (self.in_channels, self.out_channels // self.groups, *self.kernel)
        return (self.out_channels, self.in_channels // self.groups, *self.kernel)

    @property
    def output_size(self) -> tuple[int, ...]:
        sizes = []
        for i, s, p, d, k, op in zip(self.input_size, self.stride, self.padding,
                                     self.dilation, self.kernel, self.output_padding):
            if self.transposed:
                sizes.append((i - 1) * s - 2 * p + d * (k - 1) + op + 1)
            else:
                sizes.append((i + 2 * p - d * (k - 1) - 1) // s + 1)
        return tuple(sizes)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.output_size)

    def tensors(self, requires_grad: tuple[bool, bool] = (False, False), dtype=torch.float32):
        """(input, weight, bias or None), random, with the given requires_grad flags."""
        x = torch.randn(self.input_shape, dtype=dtype, requires_grad=requires_grad[0])
        w = torch.randn(self.weight_shape, dtype=dtype, requires_grad=requires_grad[1])
        b = torch.randn(self.out_channels, dtype=dtype) if self.bias else None
        return x, w, b

    def run(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """aten.convolution with this config."""
        return torch.ops.aten.convolution(
            x, w, b, list(self.stride), list(self.padding), list(self.dilation),
            self.transposed, list(self.output_padding), self.groups)

    def with_batch(self, batch: int) -> ConvConfig:
        return ConvConfig(**{**self.__dict__, "batch": batch})



def _per_dim(draw, dims: int, values: st.SearchStrategy[int]) -> tuple[int, ...]:
    return tuple(draw(values) for _ in range(dims))


@st.composite
def conv_configs(draw, spatial_dims: st.SearchStrategy[int] | None = None,
                 transposed: st.SearchStrategy[bool] | None = None,
                 max_channels_per_group: int = 3, max_size: int = 6) -> ConvConfig:
    """A valid ConvConfig (see the module docstring); arguments narrow what is drawn."""
    if max_channels_per_group < 1 or max_size < 1:
        raise ValueError("conv_configs: max_channels_per_group and max_size must be >= 1")
    dims = draw(spatial_dims if spatial_dims is not None else st.integers(1, 3))
    is_transposed = draw(transposed if transposed is not None else st.booleans())
    groups = draw(st.integers(1, 3))
    depthwise = draw(st.booleans())
    cin_per_group = 1 if depthwise else draw(st.integers(1, max_channels_per_group))
    cout_per_group = draw(st.integers(1, max_channels_per_group))
    kernel = _per_dim(draw, dims, st.integers(1, 3))
    dilation = _per_dim(draw, dims, st.integers(1, 2))
    stride = _per_dim(draw, dims, st.integers(1, 2))
    input_size, padding, output_padding = [], [], []
    for k, d, s in zip(kernel, dilation, stride):
        span = d * (k - 1) + 1
        size = draw(st.integers(1 if is_transposed else span, max(span, max_size)))
        pad_limit = ((size - 1) * s + span - 1) // 2 if is_transposed else (k - 1) * d
        padding.append(draw(st.integers(0, min(2, pad_limit))))
        out_pad = draw(st.integers(0, max(s, d) - 1)) if is_transposed else 0
        input_size.append(size)
        output_padding.append(out_pad)
    return ConvConfig(
        batch=draw(st.integers(1, 3)), in_channels=groups * cin_per_group,
        out_channels=groups * cout_per_group, groups=groups, input_size=tuple(input_size),
        kernel=kernel, stride=stride, padding=tuple(padding), dilation=dilation,
        transposed=is_transposed, output_padding=tuple(output_padding), bias=draw(st.booleans()))
