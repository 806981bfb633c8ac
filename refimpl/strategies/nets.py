"""Random small conv nets, for the layout pass: ``conv_nets()``.

A net is plain data (:class:`ConvNetSpec`): a stack of layers (conv with random channels,
groups, kernel and stride; batch norm; relu and in-place relu; max/avg pooling; a residual
conv block; ``cat`` of a value with itself along channels; ``as_strided`` with eager's
contiguous strides, which reads the same elements only if its input is laid out as in
eager), an optional linear head, and a tail that views, reads or mutates the output (a
view; mutating the base of a view; mutating a view; ``as_strided`` over its memory), and
whether the first conv's output is returned too (``extra_output``: several outputs, which
may alias each other). ``spec.build()`` makes the module and ``spec.example_input()`` its
input.

``laid_out_input_nets()`` draws nets for an input that is not contiguous (:func:`lay_out`
lays the input out as each of :data:`INPUT_LAYOUTS`): eager's values then keep the input's
layout, which a layout pass must give back. It draws apart from ``conv_nets()``, so adding it
changed no example ``conv_nets()`` draws.
:data:`FEATURES` lists what the draws must show (refimpl.strategies.features).

The device axis (``devices()``) is drawn beside a net: the device types this machine offers.
A layout property's answer can change with the device (cuDNN's channels-last kernels, a
compiler that optimises layouts only on GPU), so it takes ``device=devices()``: drawn, not
parametrized, so a failing example prints its device and its reproducer rebuilds it. Without
a GPU the axis is ``"cpu"`` alone (``sampled_from`` of one element takes no choice from the
example, so it does not change what the other arguments shrink to); the GPU's half of the
axis is then not exercised, which the CUDA-only tests say visibly (they skip with the
reason).

Invariants of every generated spec: the first layer is a conv; every conv's groups divide its
input and output channels; spatial size stays >= 2 (so training-mode batch norm always has
more than one value per channel); in ``training`` specs the tail never mutates and returns
one output, and no in-place relu follows a layer whose backward reads its output (eager
itself would reject those in-place updates of a tensor autograd saved).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import nn

from refimpl.layout.options import DEFAULT_MULTIPLIERS
from refimpl.strategies.features import Feature

__all__ = ["FEATURES", "INPUT_LAYOUTS", "ConvNetSpec", "LayerSpec", "TieSpec",
           "available_devices", "conv_nets", "devices", "exact_tie_nets", "laid_out_input_nets",
           "lay_out"]

LAYER_KINDS = ("conv", "bn", "relu", "relu_", "maxpool", "avgpool", "residual", "cat",
               "as_strided")
HEADS = ("none", "linear")
TAILS = ("none", "view", "mutate_base", "mutate_view", "as_strided")
#: the widest a ``cat`` may start from (it doubles the channels)
MAX_CAT_CHANNELS = 128
_SAVES_OUTPUT = ("relu", "relu_", "residual")  # their backward reads their own output
CHANNELS = (3, 4, 8, 16, 32, 64, 72, 96, 128, 1)  # 1 last: it shrinks towards the first


@dataclass(frozen=True)
class LayerSpec:
    """One layer; ``out_channels``, ``kernel``, ``stride``, ``groups`` matter for convs;
    ``kernel`` for pools (1: a 2x2 pool, stride 2; 3: a 3x3 pool, stride 1, padding 1)."""

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
    extra_output: bool = False

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
    if layer.kind in ("maxpool", "avgpool"):
        pool = nn.MaxPool2d if layer.kind == "maxpool" else nn.AvgPool2d
        # kernel 1 (the default): a 2x2 pool that halves the image; 3: 3x3, stride 1, same size
        return pool(2) if layer.kernel == 1 else pool(3, stride=1, padding=1)
    return {"relu": nn.ReLU(), "relu_": nn.ReLU(inplace=True), "cat": nn.Identity(),
            "as_strided": nn.Identity()}[layer.kind]


def _contiguous_strides(x: torch.Tensor) -> tuple:
    """Eager's strides of a contiguous 4-d ``x``, written so ``fx.symbolic_trace`` records
    them (sizes read one by one, no loop over a traced shape)."""
    c, h, w = x.size(1), x.size(2), x.size(3)
    return (c * h * w, h * w, w, 1)


class ConvNet(nn.Module):
    """The module a :class:`ConvNetSpec` describes."""

    def __init__(self, spec: ConvNetSpec) -> None:
        super().__init__()
        self.kinds = [layer.kind for layer in spec.layers]
        self.tail = spec.tail
        self.extra_output = spec.extra_output
        # True in the channels-last eager reference (refimpl.expect.layout): the body's
        # output is made contiguous before the tail, where a layout pass restores eager's
        # strides too (eager refuses ``view(-1)`` of a channels-last tensor).
        self.contiguous_tail = False
        mods, channels = [], spec.in_channels
        for layer in spec.layers:
            mods.append(_make_layer(layer, channels))
            channels = layer.out_channels if layer.kind == "conv" else channels
            channels = 2 * channels if layer.kind == "cat" else channels
        self.body = nn.ModuleList(mods)
        self.head = nn.Linear(channels, 10) if spec.head == "linear" else None

    def forward(self, x: torch.Tensor):
        out, first = self._forward(x)
        return (out, first) if self.extra_output else out

    def _forward(self, x: torch.Tensor):
        """The net's result (its tail applied) and the first layer's output."""
        first = None
        for kind, mod in zip(self.kinds, self.body):
            if kind == "residual":
                x = torch.relu(mod(x) + x)
            elif kind == "cat":
                x = torch.cat([x, x], 1)
            elif kind == "as_strided":  # eager's value is contiguous: the same elements
                x = x.as_strided(x.size(), _contiguous_strides(x))
            else:
                x = mod(x)
            first = x if first is None else first
        if self.contiguous_tail and self.head is None and self.tail != "none":
            x = x.contiguous()
        if self.head is not None:
            x = self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
        if self.tail == "as_strided":
            return x.as_strided((x.numel() // 2,), (2,)), first  # every other element
        if self.tail == "view":
            return x.view(-1), first
        if self.tail == "mutate_base":
            y = x.view(-1)
            x.mul_(2)
            return y, first
        if self.tail == "mutate_view":
            x.view(-1).mul_(2)
        return x, first


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


#: the kinds of the layers after the first conv, simplest first (a shrunk net keeps the
#: front of this order); conv twice, so a net often holds two convs after the first; "pool"
#: is max or average pooling.
_LATER_KINDS = ("relu", "bn", "conv", "relu_", "pool", "residual", "cat", "as_strided", "conv")
#: tails a training net may have: no mutation (the training step sums one output)
_TRAINING_TAILS = ("none", "view", "as_strided")


def _value_maker(layers: list[LayerSpec]) -> str:
    """The kind of the layer whose value the next layer writes into: the last one, looking
    through ``as_strided`` layers (each a view of the value before it)."""
    makers = [layer.kind for layer in layers if layer.kind != "as_strided"]
    return makers[-1]


@st.composite
def conv_nets(draw, training: bool = False, max_layers: int = 9) -> ConvNetSpec:
    """A random :class:`ConvNetSpec`; ``training`` specs have non-mutating tails and one
    output.

    The layers after the first conv take their kinds from a random permutation of
    :data:`_LATER_KINDS` (repeating it past its end), so a net of n layers holds n - 1
    different kinds: every kind is drawn in about 40% of the nets."""
    if not isinstance(max_layers, int) or max_layers < 1:
        raise ValueError(f"max_layers={max_layers!r}: expected an int >= 1")
    batch = draw(st.integers(1, 2)) if not training else 2
    # Not 1: for one channel the two layouts coincide, so no conversion could be seen (a
    # conv to one channel later in the net still covers that case).
    channels = draw(st.sampled_from((3, 4, 8)))
    size = draw(st.integers(4, 8))
    spec_in, size_in = channels, size
    layers = []
    order = draw(st.permutations(_LATER_KINDS))
    for index in range(draw(st.integers(1, max_layers))):
        kind = "conv" if index == 0 else order[(index - 1) % len(order)]
        if kind == "pool":
            kind = draw(st.sampled_from(("maxpool", "avgpool")))
        if training and kind == "relu_" and _value_maker(layers) in _SAVES_OUTPUT:
            kind = "relu"  # autograd saved that output: eager rejects writing over it
        if kind == "cat" and channels > MAX_CAT_CHANNELS:
            kind = "relu"
        layer = draw(_conv(channels, size, training, index == 0)) if kind == "conv" \
            else LayerSpec(kind)
        if kind in ("maxpool", "avgpool") and size < 4:
            layer = LayerSpec(kind, kernel=3)  # keeps the size (>= 2, module docstring)
        layers.append(layer)
        if kind == "conv":
            channels, size = layer.out_channels, (size - 1) // layer.stride + 1
        elif kind in ("maxpool", "avgpool") and layer.kernel == 1:
            size //= 2
        elif kind == "cat":
            channels *= 2
    head = draw(st.sampled_from(HEADS))
    tail = draw(st.sampled_from(_TRAINING_TAILS if training else TAILS))
    extra_output = not training and draw(st.booleans())
    return ConvNetSpec(batch, spec_in, size_in, tuple(layers), head, tail, extra_output)


#: The exact-tie net's image width: a prime factor of 0.358 / 0.217 (grouped's and small's
#: distances from 1 in inductor's multipliers, 358 = 2 * 179), so the two convs' FLOPs can
#: tie exactly (:class:`TieSpec`).
TIE_WIDTH = 179


@dataclass(frozen=True)
class TieSpec:
    """A net whose two convs tie exactly in inductor's inference rule (real arithmetic).

    ``small``: a 1x1 conv ``in_channels -> mid_channels`` on a ``rows x 179`` image (<= 64
    channels: inductor's *small* class, multiplier 0.783); each row is then averaged to one
    column (``AdaptiveAvgPool2d((None, 1))``, layout-agnostic); ``grouped``: a 1x1 conv
    ``mid_channels -> 217 * in_channels`` in 2 groups (*grouped*, 1.358). With
    ``s = batch * rows * mid_channels * in_channels`` the FLOPs are ``358 s`` (small) and
    ``217 s`` (grouped), so ``0.358 * 217 s == 0.217 * 358 s``: the weighted cost equals the
    total, and the decision rests on how the float sum rounds (``rounding``: this tie's
    sum, added in inductor's order, lands above the total, so torch keeps it contiguous).
    """

    batch: int
    rows: int
    in_channels: int
    mid_channels: int

    @property
    def scale(self) -> int:
        return self.batch * self.rows * self.mid_channels * self.in_channels

    @property
    def rounding(self) -> bool:
        return _rounds_above(self.scale)

    def build(self, seed: int = 0) -> nn.Module:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return nn.Sequential(
                nn.Conv2d(self.in_channels, self.mid_channels, 1),
                nn.AdaptiveAvgPool2d((None, 1)),
                nn.Conv2d(self.mid_channels, 217 * self.in_channels, 1, groups=2))

    def example_input(self, seed: int = 0) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(self.batch, self.in_channels, self.rows, TIE_WIDTH, generator=gen)


def _rounds_above(scale: int) -> bool:
    """Whether inductor's float sum for a tie of this scale exceeds the total: its per-class
    totals weighted and added in its order (grouped, small, in_out, default)."""
    grouped, small = float(217 * scale), float(358 * scale)
    m = DEFAULT_MULTIPLIERS
    weighted = grouped * m["grouped"] + small * m["small"] + 0.0 * m["in_out"] \
        + 0.0 * m["default"]
    return weighted > grouped + small


_TIE_ROWS, _TIE_IN, _TIE_MID = range(1, 257), (2, 4), tuple(range(4, 65, 2))


@functools.cache
def _rounding_ties() -> tuple[TieSpec, ...]:
    """Every batch-1 tie in the drawn ranges whose float sum lands above the total (about
    one in a hundred: the interesting edge, so drawn on purpose)."""
    found: dict[int, TieSpec] = {}
    for rows in _TIE_ROWS:
        for c_in in _TIE_IN:
            for mid in _TIE_MID:
                spec = TieSpec(1, rows, c_in, mid)
                if spec.rounding:
                    found.setdefault(spec.scale, spec)
    return tuple(found[k] for k in sorted(found))


@st.composite
def exact_tie_nets(draw) -> TieSpec:
    """A :class:`TieSpec`: one in three from the ties whose float sum rounds above the total
    (torch keeps them contiguous), the rest anywhere in the ranges (most round to the total
    exactly: torch converts)."""
    if draw(st.sampled_from((False, False, True))):
        return draw(st.sampled_from(_rounding_ties()))
    return TieSpec(draw(st.integers(1, 2)), draw(st.integers(1, 64)),
                   draw(st.sampled_from(_TIE_IN)), draw(st.sampled_from(_TIE_MID)))


#: how a laid-out-input property lays out a net's input: channels-last (NHWC memory, as a
#: permuted NHWC tensor is); channels-last memory with every other column (not dense);
#: contiguous with height and width swapped in memory (dense, neither layout)
INPUT_LAYOUTS = ("channels_last", "channels_last_sliced", "hw_transposed")
#: the layers between the first conv and the optional final ``cat`` of a
#: :func:`laid_out_input_nets` net (a random order of these, each at most once)
_LAID_OUT_KINDS = ("relu", "bn", "as_strided", "pool", "relu_", "conv")
#: tails valid on a channels-last result (eager refuses ``view(-1)`` of one)
_LAID_OUT_TAILS = ("none", "as_strided")


def lay_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    """A new 4-d tensor equal to ``values`` and laid out as ``layout`` (INPUT_LAYOUTS)."""
    if layout == "channels_last":
        return values.contiguous(memory_format=torch.channels_last)
    if layout == "channels_last_sliced":
        n, c, h, w = values.shape
        wide = torch.zeros(n, c, h, 2 * w, dtype=values.dtype, device=values.device)
        wide = wide.contiguous(memory_format=torch.channels_last)
        wide[..., ::2] = values
        return wide[..., ::2]
    if layout == "hw_transposed":
        return values.transpose(2, 3).contiguous().transpose(2, 3)
    raise ValueError(f"layout={layout!r}: expected one of {INPUT_LAYOUTS}")


@st.composite
def laid_out_input_nets(draw, max_middle: int = len(_LAID_OUT_KINDS)) -> ConvNetSpec:
    """A :class:`ConvNetSpec` for inference on an input of any layout (INPUT_LAYOUTS, see
    :func:`lay_out`): a conv; up to ``max_middle`` layers in a random order of
    :data:`_LAID_OUT_KINDS`; three times in four a ``cat`` of the body's value with itself,
    last (its result reaches the head, the tail or the output); a linear head one time in
    five; a tail of :data:`_LAID_OUT_TAILS` (no view tail: eager refuses ``view(-1)`` of a
    channels-last value); maybe the first conv's output as a second output. Drawn apart
    from :func:`conv_nets`, whose draws (and so its properties' examples) stay as they are.
    """
    if not isinstance(max_middle, int) or max_middle < 0:
        raise ValueError(f"max_middle={max_middle!r}: expected an int >= 0")
    batch, channels = draw(st.integers(1, 2)), draw(st.sampled_from((3, 4, 8)))
    size = draw(st.integers(4, 8))
    layers = [draw(_conv(channels, size, first=True))]
    middle = draw(st.permutations(_LAID_OUT_KINDS))[:draw(st.integers(0, max_middle))]
    for kind in middle:
        if kind == "pool":  # 3x3, stride 1: the image keeps its size
            layers.append(LayerSpec(draw(st.sampled_from(("maxpool", "avgpool"))), kernel=3))
        elif kind == "conv":  # dense, 3x3, at most 64 channels
            layers.append(LayerSpec("conv", draw(st.sampled_from(CHANNELS[:6])), 3))
        else:
            layers.append(LayerSpec(kind))
    if draw(st.sampled_from((False, True, True, True))):
        layers.append(LayerSpec("cat"))  # from <= 128 channels (MAX_CAT_CHANNELS)
    head = draw(st.sampled_from(("none", "none", "none", "none", "linear")))
    return ConvNetSpec(batch, channels, size, tuple(layers), head,
                       draw(st.sampled_from(_LAID_OUT_TAILS)), draw(st.booleans()))


def _after_first(spec: ConvNetSpec) -> list[str]:
    """The kinds of the layers after the first conv: each reads a value the first conv made
    (channels-last in a converted graph)."""
    return [layer.kind for layer in spec.layers[1:]]


_INFERENCE = "test_layout.py::test_inference_outputs_match_eager"
_LAID_OUT = "test_layout_inputs.py::test_laid_out_inputs_keep_eager_values_and_strides"


def _net_feature(name: str, meaning: str, detect) -> Feature:
    return Feature("layout", name, meaning, conv_nets, detect, _INFERENCE)


FEATURES: tuple[Feature, ...] = (
    _net_feature("conv_after_conv", "a conv reads a value another layer computed",
                 lambda s: "conv" in _after_first(s)),
    _net_feature("batchnorm", "batch norm of a value a conv made",
                 lambda s: "bn" in _after_first(s)),
    _net_feature("pointwise", "an out-of-place activation (relu) of a conv's value",
                 lambda s: "relu" in _after_first(s)),
    _net_feature("inplace", "an in-place activation (relu_) writes into a conv's value",
                 lambda s: "relu_" in _after_first(s)),
    _net_feature("pooling", "max or average pooling of a conv's value",
                 lambda s: bool({"maxpool", "avgpool"} & set(_after_first(s)))),
    _net_feature("residual", "a residual block: conv, batch norm, add of its input, relu",
                 lambda s: "residual" in _after_first(s)),
    _net_feature("cat", "torch.cat of a conv's value with itself along channels",
                 lambda s: "cat" in _after_first(s)),
    _net_feature("linear_head", "pooling, flatten and a linear layer read the body's value",
                 lambda s: s.head == "linear"),
    _net_feature("view", "a view of the net's result is returned or mutated through",
                 lambda s: s.tail in ("view", "mutate_base", "mutate_view")),
    _net_feature("as_strided", "as_strided reads a conv's value (a layer) or the result (the "
                 "tail) at eager's strides",
                 lambda s: s.tail == "as_strided" or "as_strided" in _after_first(s)),
    _net_feature("several_outputs", "the net returns its result and the first conv's output",
                 lambda s: s.extra_output),
    _net_feature("returns_channels_last", "a 4-d value of the body (channels-last in a "
                 "converted graph) is a graph output", lambda s: (s.head == "none"
                 and s.tail in ("none", "mutate_view")) or s.extra_output),
    _net_feature("mutation_after_conv", "a value computed from a conv is mutated in place",
                 lambda s: "relu_" in _after_first(s)
                 or s.tail in ("mutate_base", "mutate_view")),
    Feature("layout", "rounding_tie", "an exact FLOP tie whose float sum rounds above the "
            "total (torch keeps it contiguous)", exact_tie_nets, lambda s: s.rounding,
            "test_layout_strength.py::test_exact_ties_decide_as_inductor"),
    *(Feature("layout", name, meaning, laid_out_input_nets, detect, _LAID_OUT)
      for name, meaning, detect in (
          ("input_cat_output", "on a laid-out input: a cat of the body's value is "
           "the body's last layer, read by the tail or returned",
           lambda s: _after_first(s)[-1:] == ["cat"] and s.head == "none"),
          ("input_as_strided", "on a laid-out input: as_strided reads a value laid "
           "out as the input", lambda s: s.tail == "as_strided"
           or "as_strided" in _after_first(s)),
          ("input_layout_output", "on a laid-out input: a 4-d value of the body is "
           "an output", lambda s: (s.head == "none" and s.tail == "none") or s.extra_output),
          ("input_inplace", "on a laid-out input: relu_ writes into a conv's value",
           lambda s: "relu_" in _after_first(s)),
          ("input_conv_after_conv", "on a laid-out input: a conv reads a value "
           "another layer computed", lambda s: "conv" in _after_first(s)),
      )),
)


def available_devices() -> tuple[str, ...]:
    """``("cpu",)``, plus ``"cuda"`` where torch sees a CUDA device."""
    return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def devices() -> st.SearchStrategy[str]:
    """The device axis: one of :func:`available_devices`."""
    return st.sampled_from(available_devices())
