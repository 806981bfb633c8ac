"""Random small conv nets, for the layout pass: ``conv_nets()``.

A net is plain data (:class:`ConvNetSpec`): a stack of layers (conv with random channels,
groups, kernel and stride; batch norm; relu and in-place relu; max/avg pooling; a residual
conv block), an optional linear head, and a tail that views or mutates the output (a view;
mutating the base of a view; mutating a view). ``spec.build()`` makes the module and
``spec.example_input()`` its input.

Invariants of every generated spec: the first layer is a conv; every conv's groups divide its
input and output channels; spatial size stays >= 2 (so training-mode batch norm always has
more than one value per channel); in ``training`` specs the tail never mutates and no in-place
relu follows a layer whose backward reads its output (eager itself would reject those
in-place updates of a tensor autograd saved).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import nn

__all__ = ["ConvNetSpec", "LayerSpec", "conv_nets"]

LAYER_KINDS = ("conv", "bn", "relu", "relu_", "maxpool", "avgpool", "residual")
HEADS = ("none", "linear")
TAILS = ("none", "view", "mutate_base", "mutate_view")
_SAVES_OUTPUT = ("relu", "relu_", "residual")  # their backward reads their own output
CHANNELS = (3, 4, 8, 16, 32, 64, 72, 96, 128, 1)  # 1 last: it shrinks towards the first


@dataclass(frozen=True)
class LayerSpec:
    """One layer; ``out_channels``, ``kernel``, ``stride``, ``groups`` matter for convs."""

    kind: str
    out_channels: int = 0
    kernel: int = 1
    stride: int = 1
    groups: int = 1


@dataclass(frozen=True)
class ConvNetSpec:
    """A whole net: input shape, layers, head and tail (module docstring)."""

    batch: int
    in_channels: int
    size: int
    layers: tuple[LayerSpec, ...]
    head: str = "none"
    tail: str = "none"

    def build(self, seed: int = 0) -> nn.Module:
        """The module, with weights drawn from ``seed``."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return ConvNet(self)

    def example_input(self, seed: int = 0) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(self.batch, self.in_channels, self.size, self.size, generator=gen)


def _make_layer(layer: LayerSpec, channels: int) -> nn.Module:
    if layer.kind == "conv":
        return nn.Conv2d(channels, layer.out_channels, layer.kernel, stride=layer.stride,
                         padding=layer.kernel // 2, groups=layer.groups)
    if layer.kind == "bn":
        return nn.BatchNorm2d(channels)
    if layer.kind == "residual":
        return nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                             nn.BatchNorm2d(channels))
    return {"relu": nn.ReLU(), "relu_": nn.ReLU(inplace=True), "maxpool": nn.MaxPool2d(2),
            "avgpool": nn.AvgPool2d(2)}[layer.kind]


class ConvNet(nn.Module):
    """The module a :class:`ConvNetSpec` describes."""

    def __init__(self, spec: ConvNetSpec) -> None:
        super().__init__()
        self.kinds = [layer.kind for layer in spec.layers]
        self.tail = spec.tail
        # True in the channels-last eager reference (refimpl.expect.layout): the body's
        # output is made contiguous before the tail, where a layout pass restores eager's
        # strides too (eager refuses ``view(-1)`` of a channels-last tensor).
        self.contiguous_tail = False
        mods, channels = [], spec.in_channels
        for layer in spec.layers:
            mods.append(_make_layer(layer, channels))
            channels = layer.out_channels if layer.kind == "conv" else channels
        self.body = nn.ModuleList(mods)
        self.head = nn.Linear(channels, 10) if spec.head == "linear" else None

    def forward(self, x: torch.Tensor):
        for kind, mod in zip(self.kinds, self.body):
            x = torch.relu(mod(x) + x) if kind == "residual" else mod(x)
        if self.contiguous_tail and self.head is None and self.tail != "none":
            x = x.contiguous()
        if self.head is not None:
            x = self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
        if self.tail == "view":
            return x.view(-1)
        if self.tail == "mutate_base":
            y = x.view(-1)
            x.mul_(2)
            return y
        if self.tail == "mutate_view":
            x.view(-1).mul_(2)
        return x


#: conv styles: uniform for inference; in training mostly dense (a grouped or depthwise conv
#: makes inductor's training rule decline, and the properties need conversions to check).
_STYLES = ("dense", "grouped", "depthwise")
_TRAINING_STYLES = ("dense",) * 6 + ("grouped", "depthwise")
WIDE = tuple(c for c in CHANNELS if c > 64)


@st.composite
def _conv(draw, channels: int, size: int, training: bool = False, first: bool = False
          ) -> LayerSpec:
    """A conv from ``channels``. In training: never channel-reducing by 2x or more (from
    twice the widest entry of CHANNELS or more, a conv keeps its width), and the first conv is wide
    (> 64 channels) three times in four, so most nets are converted."""
    if training:
        wide_first = first and draw(st.sampled_from((True, True, True, False)))
        # After a depthwise conv doubles 128 channels, no entry of CHANNELS is over half of
        # ``channels``: then the conv keeps its width.
        not_halving = tuple(c for c in CHANNELS if 2 * c > channels) or (channels,)
        out = draw(st.sampled_from(WIDE if wide_first else not_halving))
    else:
        out = draw(st.sampled_from(CHANNELS))
    style = draw(st.sampled_from(_TRAINING_STYLES if training else _STYLES))
    groups = 1
    if style == "depthwise":
        out, groups = channels * draw(st.sampled_from((1, 2))), channels
    elif style == "grouped":
        common = [g for g in range(2, math.gcd(channels, out) + 1)
                  if channels % g == 0 and out % g == 0]
        groups = draw(st.sampled_from(common)) if common else 1
    stride = draw(st.sampled_from((1, 2))) if size >= 4 else 1
    return LayerSpec("conv", out, draw(st.sampled_from((1, 3))), stride, groups)


@st.composite
def conv_nets(draw, training: bool = False, max_layers: int = 5) -> ConvNetSpec:
    """A random :class:`ConvNetSpec`; ``training`` specs have non-mutating tails."""
    if not isinstance(max_layers, int) or max_layers < 1:
        raise ValueError(f"max_layers={max_layers!r}: expected an int >= 1")
    batch = draw(st.integers(1, 2)) if not training else 2
    # Not 1: for one channel the two layouts coincide, so no conversion could be seen (a
    # conv to one channel later in the net still covers that case).
    channels = draw(st.sampled_from((3, 4, 8)))
    size = draw(st.integers(4, 8))
    spec_in, size_in = channels, size
    layers = []
    for index in range(draw(st.integers(1, max_layers))):
        kind = "conv" if index == 0 else draw(st.sampled_from(LAYER_KINDS))
        if kind in ("maxpool", "avgpool") and size < 4:
            kind = "relu"
        if training and kind == "relu_" and layers[-1].kind in _SAVES_OUTPUT:
            kind = "relu"  # autograd saved that output: eager rejects writing over it
        layer = draw(_conv(channels, size, training, index == 0)) if kind == "conv" \
            else LayerSpec(kind)
        layers.append(layer)
        if kind == "conv":
            channels, size = layer.out_channels, (size - 1) // layer.stride + 1
        elif kind in ("maxpool", "avgpool"):
            size //= 2
    tails = ("none", "view") if training else TAILS
    return ConvNetSpec(batch, spec_in, size_in, tuple(layers), draw(st.sampled_from(HEADS)),
                       draw(st.sampled_from(tails)))
