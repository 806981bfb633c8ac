"""Each formula against a count derived independently of it.

The derivation used throughout is the *ones trick*: for an op whose outputs are sums of
products, running it on all-ones inputs makes every output element equal to the number of
product terms it sums, so ``2 * op(ones).sum()`` is the FLOP count (2 per multiply-add) by
the op's own definition. Padding is made explicit (padded with ones) where the convention
counts padded taps. Shapes are tiny: the counts are exact integers at any size.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from refimpl.flops.formulas import conv as conv_formulas
from refimpl.flops.formulas import count_flops

aten = torch.ops.aten


def ones(*shape: int, dtype=torch.float64, grad: bool = False) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype, requires_grad=grad)


def terms(t: torch.Tensor) -> int:
    """2 x (number of product terms) when ``t`` was computed from all-ones inputs."""
    return 2 * int(t.sum().item())


def counted(op, *args, **kwargs) -> int:
    """refimpl's count for running ``op`` on ``args`` (the op runs to get the output)."""
    out = op(*args, **kwargs)
    return count_flops(op, args, kwargs, out)


@pytest.mark.parametrize("op,shapes", [
    (aten.mm.default, [(3, 4), (4, 5)]),
    (aten.bmm.default, [(2, 3, 4), (2, 4, 5)]),
    (aten.mv.default, [(3, 4), (4,)]),
    (aten.dot.default, [(6,), (6,)]),
    (aten.vdot.default, [(6,), (6,)]),
    (aten.outer.default, [(3,), (4,)]),
    (aten.ger.default, [(3,), (4,)]),
])
def test_products(op, shapes):
    args = [ones(*s) for s in shapes]
    assert counted(op, *args) == terms(op(*args)) > 0


@pytest.mark.parametrize("op,shapes", [
    (aten.addmm.default, [(3, 5), (3, 4), (4, 5)]),
    (aten._addmm_activation.default, [(3, 5), (3, 4), (4, 5)]),
    (aten.baddbmm.default, [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    (aten.addbmm.default, [(3, 5), (2, 3, 4), (2, 4, 5)]),
    (aten.addmv.default, [(3,), (3, 4), (4,)]),
    (aten.addr.default, [(3, 4), (3,), (4,)]),
])
def test_products_with_bias(op, shapes):
    bias, *factors = shapes
    args = [torch.zeros(*bias, dtype=torch.float64), *(ones(*s) for s in factors)]
    assert counted(op, *args) == terms(op(*args)) > 0


def test_int_mm_and_scaled_mm_count_the_product():
    a, b = ones(17, 16, dtype=torch.int8), ones(16, 8, dtype=torch.int8)
    assert counted(aten._int_mm.default, a, b) == terms(torch._int_mm(a, b)) == 2 * 17 * 16 * 8
    a8 = ones(16, 32, dtype=torch.float32).to(torch.float8_e4m3fn)
    b8 = ones(16, 32, dtype=torch.float32).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)
    out = torch._scaled_mm(a8, b8, one, one, out_dtype=torch.float32)
    assert count_flops(aten._scaled_mm.default, (a8, b8, one, one), {}, out) == terms(out)


def test_cdist_forward_and_backward():
    x1, x2 = ones(2, 3, 5), torch.zeros(2, 4, 5, dtype=torch.float64)
    pairs_times_coords = torch.cdist(x1, x2, p=1)  # each distance = M = number of coords
    dist = aten._cdist_forward.default(x1, x2, 1.0, None)
    assert count_flops(aten._cdist_forward.default, (x1, x2, 1.0, None), {}, dist) == \
        terms(pairs_times_coords)
    grad = torch.ones_like(dist)
    args = (grad, x1, x2 + 1, 1.0, dist)
    out = aten._cdist_backward.default(*args)
    assert count_flops(aten._cdist_backward.default, args, {}, out) == terms(pairs_times_coords)


CONVS = [  # (spatial, in, out, groups, stride, padding, dilation, kernel)
    (1, 2, 4, 1, 1, 1, 1, 3),
    (1, 4, 6, 2, 2, 0, 2, 2),
    (2, 3, 6, 3, 1, 2, 1, 3),
    (2, 4, 4, 4, 2, 1, 1, 2),  # depthwise
    (3, 2, 2, 1, 1, 1, 2, 2),
]


def conv_config(spatial, cin, cout, groups, stride, padding, dilation, kernel):
    x = ones(2, cin, *[7] * spatial, grad=True)
    w = ones(cout, cin // groups, *[kernel] * spatial, grad=True)
    kw = dict(stride=[stride] * spatial, padding=[padding] * spatial,
              dilation=[dilation] * spatial, groups=groups)
    return x, w, kw


def explicit_padded_products(x, w, kw):
    """(forward, grad_input, grad_weight) product counts x2, padding made explicit with
    ones so that padded taps are counted like any other."""
    pad = kw["padding"][0]
    xp = F.pad(x.detach(), [pad, pad] * (x.dim() - 2), value=1.0).requires_grad_()
    w = w.detach().requires_grad_()
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
    out = conv(xp, w, stride=kw["stride"], dilation=kw["dilation"], groups=kw["groups"])
    out.backward(torch.ones_like(out))
    return terms(out), terms(xp.grad), terms(w.grad)


@pytest.mark.parametrize("config", CONVS)
def test_convolution_forward_and_backward(config):
    x, w, kw = conv_config(*config)
    args = (x, w, None, kw["stride"], kw["padding"], kw["dilation"], False,
            [0] * (x.dim() - 2), kw["groups"])
    out = aten.convolution.default(*args)
    forward, grad_input, grad_weight = explicit_padded_products(x, w, kw)
    assert count_flops(aten.convolution.default, args, {}, out) == forward
    for mask, expected in [([True, True, True], grad_input + grad_weight),
                           ([True, False, False], grad_input),
                           ([False, True, True], grad_weight), ([False, False, True], 0)]:
        bargs = (torch.ones_like(out), x, w, None, *args[3:], mask)
        grads = aten.convolution_backward.default(*bargs)
        assert count_flops(aten.convolution_backward.default, bargs, {}, grads) == expected


@pytest.mark.parametrize("config", CONVS)
@pytest.mark.parametrize("padding,output_padding", [(0, 0), (1, 1)])
def test_transposed_convolution(config, padding, output_padding):
    """A transposed conv multiplies each input element by each tap of its group's filters;
    with padding 0 nothing is cropped, so that output on ones counts every product, and
    padding (cropping) does not change the count by the convention."""
    spatial, cin, cout, groups, stride, _, dilation, kernel = config
    x = ones(2, cin, *[5] * spatial, grad=True)
    w = ones(cin, cout // groups, *[kernel] * spatial, grad=True)
    output_padding = min(output_padding, max(stride, dilation) - 1)
    args = (x, w, None, [stride] * spatial, [padding] * spatial, [dilation] * spatial, True,
            [output_padding] * spatial, groups)
    out = aten.convolution.default(*args)
    uncropped = aten.convolution.default(*args[:4], [0] * spatial, args[5], True,
                                         [0] * spatial, groups)
    assert count_flops(aten.convolution.default, args, {}, out) == terms(uncropped)
    uncropped.backward(torch.ones_like(uncropped))
    bargs = (torch.ones_like(out), x, w, None, *args[3:], [True, True, False])
    grads = aten.convolution_backward.default(*bargs)
    assert count_flops(aten.convolution_backward.default, bargs, {}, grads) == \
        terms(x.grad) + terms(w.grad)


def test_conv_tbc():
    x, w, bias = ones(6, 2, 3), ones(3, 3, 4), torch.zeros(4, dtype=torch.float64)
    xp = F.pad(x, [0, 0, 0, 0, 1, 1], value=1.0)  # pad=1 along time, made explicit
    out = aten.conv_tbc.default(x, w, bias, 1)
    assert count_flops(aten.conv_tbc.default, (x, w, bias, 1), {}, out) == \
        terms(aten.conv_tbc.default(xp, w, bias, 0))


def test_backend_conv_spellings_match_convolution():
    x, w = ones(2, 4, 6, 6), ones(6, 2, 3, 3)
    out = F.conv2d(x, w, groups=2, padding=1)
    base = count_flops(aten.convolution.default, (x, w, None, [1, 1], [1, 1], [1, 1], False,
                                                  [0, 0], 2), {}, out)
    assert base == terms(F.conv2d(F.pad(x, [1] * 4, value=1.0), w, groups=2))
    direct = (x, w, [1, 1], [1, 1], [1, 1], 2, True, False, True)  # cudnn_convolution args
    assert count_flops(aten.cudnn_convolution.default, direct, {}, out) == base
    assert count_flops(aten.mkldnn_convolution.default,
                       (x, w, None, [1, 1], [1, 1], [1, 1], 2), {}, out) == base
    xt, wt = ones(2, 4, 3, 3), ones(4, 3, 2, 2)
    out_t = F.conv_transpose2d(xt, wt, groups=2)
    targs = (xt, wt, [0, 0], [0, 0], [1, 1], [1, 1], 2, True, False, True)
    assert count_flops(aten.cudnn_convolution_transpose.default, targs, {}, out_t) == \
        terms(out_t)


@pytest.mark.parametrize("op", conv_formulas.DIRECT_KERNELS, ids=str)
def test_every_backend_conv_kernel(op):
    """The backend kernels' other arguments differ in order; only x, w and out are read."""
    x, w = ones(2, 4, 6, 6), ones(6, 2, 3, 3)
    out = F.conv2d(F.pad(x, [1] * 4, value=1.0), w, groups=2)  # padding 1, explicit
    assert count_flops(op, (x, w, "other", "arguments"), {}, out) == terms(out)


@pytest.mark.parametrize("op", conv_formulas.TRANSPOSED_KERNELS, ids=str)
def test_every_backend_transposed_conv_kernel(op):
    x, w = ones(2, 4, 3, 3), ones(4, 3, 2, 2)
    out = F.conv_transpose2d(x, w, groups=2)  # no padding: nothing cropped
    assert count_flops(op, (x, w, "other", "arguments"), {}, out) == terms(out)


def test_convolution_spellings_and_backward_overrideable():
    x, w = ones(1, 2, 5, 5, grad=True), ones(3, 2, 2, 2, grad=True)
    common = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    out = aten.convolution.default(x, w, None, *common)
    for op in (aten.convolution, aten._convolution, aten.convolution_overrideable):
        assert count_flops(op, (x, w, None, *common), {}, out) == terms(out)
    out.backward(torch.ones_like(out))
    grads = terms(x.grad) + terms(w.grad)
    args = (torch.ones_like(out), x, w, *common, [True, True, False])
    assert count_flops(aten.convolution_backward_overrideable, args, {}, None) == grads


def test_scaled_mm_v2_when_present():
    if not hasattr(aten, "_scaled_mm_v2"):
        pytest.skip("this torch has no aten._scaled_mm_v2")
    a, b = torch.empty(5, 16, device="meta"), torch.empty(16, 8, device="meta")
    assert count_flops(aten._scaled_mm_v2, (a, b, [], [], [], [], [], [], None, None)) == \
        terms(torch.ones(5, 16) @ torch.ones(16, 8))
