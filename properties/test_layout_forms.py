"""A layout component on graphs whose form the random nets never take, through the backend
under test: a conv module called with its input by keyword, a graph input that is not a
tensor, dynamic shapes (one compiled graph run at several image sizes), and a net returning
a pooled 1x1 image beside an unbatched (3-d) conv's output.

Each is a form a real model takes: ``self.conv(input=x)`` is plain Python; a scale factor or
a flag passed to ``forward`` is a graph input that is a number; and dynamo recompiles a net
with symbolic sizes when it sees a second image size (``automatic_dynamic_shapes``), after
which one graph runs at every size. A layout pass that expects a positional input, fakes
every graph input as a tensor, or converts a graph whose sizes are symbolic (restoring
strides read off the first size's example) crashes or returns wrong strides there. A
classifier's pooled features are a 1x1 image, whose channels-last strides differ from
eager's though both orders read its elements alike; and ``nn.Conv2d`` takes an unbatched
3-d input, which has no channels-last form.

The expectation is eager itself: the compiled module's outputs have eager's values (dynamo's
accuracy rule, :mod:`refimpl.expect.same`, against a float64 run) and exactly eager's strides,
and its input is left as it was. Nothing here reads refimpl's layout pass.

Reach: a conversion happened (the graph an FX pass returned computes a value channels-last,
:func:`refimpl.expect.layout.converted_values`, or a compiler decided to convert), and for
dynamic shapes, also a second, dynamic graph was compiled.
"""

from __future__ import annotations

import copy

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import fx, nn

from refimpl.expect.layout import converted_values
from refimpl.expect.same import mismatch
from refimpl.oracle import component
from refimpl.oracle.backend import provided_by
from refimpl.properties.layout_component import layout_compile
from refimpl.properties.reach import reach
from refimpl.strategies.nets import devices


class KeywordScaled(nn.Module):
    """Two default convs (72 -> 96 -> 96: inductor's rule converts them in inference), the
    first called ``self.first(input=x)`` when ``keyword``, and the result times ``scale``, a
    number passed to ``forward``."""

    def __init__(self, keyword: bool) -> None:
        super().__init__()
        self.first = nn.Conv2d(72, 96, 3, padding=1)
        self.second = nn.Conv2d(96, 96, 3, padding=1)
        self.keyword = keyword

    def forward(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        h = self.first(input=x) if self.keyword else self.first(x)
        return self.second(torch.relu(h)) * scale


def assert_as_eager(expected: torch.Tensor, actual: torch.Tensor, fp64: torch.Tensor,
                    where: str) -> None:
    why = mismatch(expected, actual, fp64)
    assert why is None, f"against eager: {why} ({where})"
    assert actual.stride() == expected.stride(), (
        f"strides {actual.stride()} != eager {expected.stride()} ({where})")


@given(keyword=st.booleans(), scale=st.sampled_from([0.5, 2.0, -3.0]),
       size=st.integers(2, 5), device=devices())
def test_keyword_input_and_number_argument_keep_eager_outputs(refimpl_backend, keyword,
                                                              scale, size, device):
    """A conv module called with its input by keyword, and a number among the graph's
    inputs: eager's values and strides, the input left as it was."""
    torch.manual_seed(0)
    module = KeywordScaled(keyword).eval().to(device)
    fp64_module = copy.deepcopy(module).double()
    x = torch.randn(1, 72, size, size, device=device)
    given_x = x.clone()
    with torch.no_grad():
        expected, fp64 = module(x, scale), fp64_module(x.double(), scale)
        if provided_by(refimpl_backend, "layout") == "layout_compiler":
            compiled, seen = layout_compile(refimpl_backend, module, device)
            actual = compiled(x, scale)
            converted = any(seen)
        else:
            gm = fx.symbolic_trace(module)  # the keyword call stays a call_module node
            out = component(refimpl_backend, "optimize_layout")(gm, [x, scale])
            converted = bool(converted_values(out, [x, scale]))
            actual = out(x, scale)
    where = f"keyword={keyword}, scale={scale}, {size}x{size} image"
    reach(converted)
    assert torch.equal(x, given_x), f"the compiled run changed its input ({where})"
    assert_as_eager(expected, actual, fp64, where)


class ConvPair(nn.Module):
    """A default conv (72 -> 96), a relu and a second conv, at any image size; beside them a
    third default conv of a second input, whose size never changes."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(72, 96, 3, padding=1)
        self.second = nn.Conv2d(96, 96, 3, padding=1)
        self.fixed = nn.Conv2d(72, 96, 3, padding=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        return self.second(torch.relu(self.first(x))), torch.relu(self.fixed(y))


@given(sizes=st.lists(st.integers(3, 7), min_size=3, max_size=3, unique=True),
       device=devices())
def test_dynamic_shapes_keep_eager_outputs(refimpl_backend, sizes, device):
    """One compiled module run at three image sizes of ``x`` (``y`` keeps its 4x4): dynamo
    compiles a static graph for the first and a dynamic one (symbolic sizes of ``x``) at the
    second, which the third reuses. Every run: eager's values and strides. The dynamic graph
    is left alone, its conv of the static ``y`` too: inductor's rule declines a graph in
    which any conv has a symbolic size (``decide_layout_opt``, pytorch/pytorch#102670).
    Reach: the static graph converted and a second graph was compiled."""
    torch.manual_seed(0)
    module = ConvPair().eval().to(device)
    fp64_module = copy.deepcopy(module).double()
    y = torch.randn(1, 72, 4, 4, device=device)
    runs = []
    with torch.no_grad():
        compiled, seen = layout_compile(refimpl_backend, module, device)
        for size in sizes:
            x = torch.randn(1, 72, size, size, device=device)
            runs.append((size, module(x, y), compiled(x, y), fp64_module(x.double(), y.double())))
    reach(len(seen) >= 2 and bool(seen[0]))
    for size, expected, actual, fp64 in runs:
        for what, e, a, f in zip(("x's convs", "y's conv"), expected, actual, fp64):
            assert_as_eager(e, a, f, f"{what}, {size}x{size} image, sizes {sizes}")
    assert not any(seen[1:]), (
        f"{refimpl_backend.name} converted a graph with symbolic sizes (sizes {sizes}): "
        f"{seen[1:]}")


class PooledAndUnbatched(nn.Module):
    """Two default convs (72 -> 96 -> 96) pooled to a 1x1 image (``adaptive_avg_pool2d``,
    as a classifier's head does), and a 1x1 conv of the first image alone, unbatched
    (72 -> 8 channels on a 3-d input): returns the pooled features, the unbatched output and
    the second conv's output."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(72, 96, 3, padding=1)
        self.second = nn.Conv2d(96, 96, 3, padding=1)
        self.side = nn.Conv2d(72, 8, 1)

    def forward(self, x: torch.Tensor):
        h = self.second(torch.relu(self.first(x)))
        pooled = torch.nn.functional.adaptive_avg_pool2d(torch.relu(h), 1)
        return pooled, self.side(x[0]), h


@given(size=st.integers(2, 5), device=devices())
def test_pooled_and_unbatched_outputs_keep_eager_strides(refimpl_backend, size, device):
    """A net returning a 1x1 pooled image, an unbatched conv's 3-d output and a 4-d conv
    output: each has eager's values and exactly eager's strides. Reach: a conversion
    happened."""
    torch.manual_seed(0)
    module = PooledAndUnbatched().eval().to(device)
    fp64_module = copy.deepcopy(module).double()
    x = torch.randn(1, 72, size, size, device=device)
    with torch.no_grad():
        expected, fp64 = module(x), fp64_module(x.double())
        compiled, seen = layout_compile(refimpl_backend, module, device)
        actual = compiled(x)
    reach(any(bool(s) for s in seen))
    for what, e, a, f in zip(("pooled 1x1", "unbatched conv", "second conv"), expected,
                             actual, fp64):
        assert_as_eager(e, a, f, f"{what}, {size}x{size} image")
