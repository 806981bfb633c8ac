"""Every number asserted by PyTorch's test/test_flop_counter.py, reproduced on refimpl's
FlopCounterMode (the seed: shared/seeds/002_*.txt)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import refimpl
from refimpl.models import MODELS

aten = torch.ops.aten


def counter(**kwargs) -> refimpl.FlopCounterMode:
    return refimpl.FlopCounterMode(display=False, **kwargs)


def T(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=requires_grad)


def total(mode) -> int:
    return sum(mode.flop_counts["Global"].values())


def test_variety():
    mod = nn.Linear(9, 10)
    with counter() as mode:
        torch.mm(T(4, 5), T(5, 6))
        torch.addmm(T(4, 6), T(4, 5), T(5, 6), beta=0.5, alpha=0.5)
        torch.matmul(T(5, 6), T(6, 7))
        torch.einsum("ab,bc->ac", T(6, 7), T(7, 8))
        mod(T(8, 9))
    assert total(mode) == 3012


def test_op_counts_restart_at_each_with():
    with counter() as mode:
        torch.mm(T(4, 5), T(5, 6))
    assert total(mode) == 240
    with mode:
        torch.bmm(T(3, 4, 5), T(3, 5, 6))
    assert total(mode) == 720
    with mode:
        torch.addmm(T(4, 6), T(4, 5), T(5, 6))
        torch.addmm(T(4, 1), T(4, 5), T(5, 6))
        torch.addmm(T(6), T(4, 5), T(5, 6))
    assert total(mode) == 720
    with mode:
        torch.baddbmm(T(3, 4, 6), T(3, 4, 5), T(3, 5, 6))
    assert total(mode) == 720
    with mode:
        torch.conv2d(T(2, 3, 6, 6), T(6, 3, 4, 4), padding=1)
    assert total(mode) == 28800
    with mode:
        torch.conv1d(T(2, 3, 6), T(6, 3, 4), padding=1)
    assert total(mode) == 1440


def test_backward():
    with counter() as mode:
        a = T(4, 5, requires_grad=True)
        a = torch.mm(a, T(5, 6))
        a = a.unsqueeze(0).expand(7, 4, 6)
        a = torch.bmm(a, T(7, 6, 7))
        a.sum().backward()
    assert total(mode) == 5184


def test_backward_reset():
    with counter() as mode:
        a = T(4, 5, requires_grad=True)
        a.mm(a.t()).sum().backward()
        a.mm(a.t()).sum().backward()
    assert total(mode) == 960


def test_torchscript_counts_like_eager():
    def foo(x):
        return torch.mm(x, x)

    with counter() as mode:
        foo(T(5, 5))
    eager = total(mode)
    scripted = torch.jit.script(foo)
    with mode:
        scripted(T(5, 5))
    assert total(mode) == eager == 250


def test_autograd_function():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.mm(x, x)

        @staticmethod
        def backward(ctx, grad):
            return torch.mm(grad, grad) + torch.mm(grad, grad)

    a = T(5, 5, requires_grad=True)
    with counter() as mode:
        Square.apply(a).sum().backward()
    assert total(mode) == 750


class OnlyConvs(torch.autograd.Function):
    """conv1d / conv_transpose1d whose backward is written as forward convolutions: the
    decomposition refimpl's convolution_backward formula is derived from."""

    @staticmethod
    def forward(inp, weight, transposed):
        return F.conv_transpose1d(inp, weight) if transposed else F.conv1d(inp, weight)

    @staticmethod
    def setup_context(ctx, inputs, output):
        inp, weight, transposed = inputs
        ctx.save_for_backward(inp, weight)
        ctx.transposed = transposed

    @staticmethod
    def backward(ctx, grad_out):
        inp, weight = ctx.saved_tensors
        if not ctx.transposed:
            return F.conv_transpose1d(grad_out, weight), F.conv1d(
                inp.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1), None
        grad_weight = F.conv1d(grad_out.transpose(1, 0), inp.transpose(1, 0))
        return F.conv1d(grad_out, weight), grad_weight.transpose(1, 0), None


@pytest.mark.parametrize("transposed", [True, False])
def test_conv_backward_as_decomposition(transposed):
    from torch.func import grad

    x = torch.randn(2, 3, 16, dtype=torch.float64)
    weight = torch.randn(3, 4, 4, dtype=torch.float64) if transposed else \
        torch.randn(4, 3, 4, dtype=torch.float64)

    def boring(x, w):
        conv = F.conv_transpose1d if transposed else F.conv1d
        return conv(x, w).pow(2).sum()

    def only_convs(x, w):
        return OnlyConvs.apply(x, w, transposed).pow(2).sum()

    expected = grad(boring, argnums=(0, 1))(x, weight)
    actual = grad(only_convs, argnums=(0, 1))(x, weight)
    torch.testing.assert_close(actual, expected)
    # and the decomposed backward's convolutions cost what convolution_backward is charged
    x, weight = x.requires_grad_(), weight.requires_grad_()
    with counter() as fused:
        boring(x, weight).backward()
    with counter() as decomposed:
        only_convs(x, weight).backward()
    fused_counts = fused.get_flop_counts()["Global"]
    assert decomposed.get_total_flops() - fused_counts[aten.convolution] == \
        fused_counts[aten.convolution_backward]


def conv_forward_and_backward(f) -> tuple[int, int]:
    with counter() as mode:
        f()
    counts = mode.get_flop_counts()["Global"]
    return counts[aten.convolution], counts[aten.convolution_backward]


def test_convs_small():
    x = torch.rand(1, 1, 2, 2, requires_grad=True)
    w = torch.randn(1, 1, 2, 2, requires_grad=True)
    fwd, bwd = conv_forward_and_backward(lambda: F.conv_transpose2d(x, w).sum().backward())
    assert (fwd, bwd) == (32, 64)
    w = torch.randn(1, 1, 1, 1, requires_grad=True)
    fwd, bwd = conv_forward_and_backward(lambda: F.conv2d(x, w).sum().backward())
    assert (fwd, bwd) == (8, 16)


@pytest.mark.parametrize("in_channels,out_channels,groups",
                         [(1, 1, 1), (1, 3, 1), (3, 1, 1), (3, 7, 1), (2, 4, 2), (4, 2, 2)])
def test_convs_backward_is_twice_forward(in_channels, out_channels, groups):
    # as the seed: the weights are [out, in, 2, 2] / [in, out, 2, 2] and groups is not passed
    x = torch.rand(1, in_channels, 4, 4, requires_grad=True)
    w = torch.randn(out_channels, in_channels, 2, 2, requires_grad=True)
    fwd, bwd = conv_forward_and_backward(lambda: F.conv2d(x, w).sum().backward())
    assert bwd == 2 * fwd > 0
    wt = torch.randn(in_channels, out_channels, 2, 2, requires_grad=True)
    fwd, bwd = conv_forward_and_backward(lambda: F.conv_transpose2d(x, wt).sum().backward())
    assert bwd == 2 * fwd > 0


def test_resnet18_module_hierarchy():
    model = MODELS["resnet18"]()
    with pytest.warns(UserWarning, match="not needed"), counter(mods=model) as mode:
        model(T(1, 3, 224, 224, requires_grad=True)).sum().backward()
    assert total(mode) == 10884440064
    assert mode.flop_counts["ResNet.layer1"][aten.convolution] == 924844032
    assert mode.flop_counts["ResNet.layer1"][aten.convolution_backward] == 1849688064


def test_conv_transpose_loop():
    x = torch.rand(1, 4, 30, 2)
    model = nn.ConvTranspose2d(4, 8, (2, 2), stride=2)
    with counter() as mode:
        for _ in range(50):
            model(x).sum().backward()
    assert mode.get_total_flops() == 1536000


def test_custom_mapping_shapes_and_raw():
    with counter(custom_mapping={aten.add: lambda *args, out_shape: 5}) as mode:
        a = T(4, 5)
        a + a
    assert total(mode) == 5

    def count(*args, out_val):
        return out_val.numel()

    count._get_raw = True
    with counter(custom_mapping={aten.add: count}) as mode:
        a = T(4, 5)
        a + a
    assert total(mode) == 20


def test_noop_counts_nothing():
    with counter() as mode:
        T(4, 5).cos()
    assert mode.get_total_flops() == 0
    # refimpl always has "Global" (issue 10; torch's is {}: docs/differences.md)
    assert mode.get_flop_counts() == {"Global": {}}


def test_mm_out_variant():
    def f(x):
        y = torch.zeros(10, 10)
        return torch.mm(x, x, out=y)

    with counter() as mode:
        f(torch.randn(10, 10))
    assert total(mode) == 2000


def global_hook_counts() -> tuple[int, int]:
    module = nn.modules.module
    return len(module._global_forward_pre_hooks), len(module._global_forward_hooks)


def test_hook_registration():
    model = nn.Linear(100, 100)
    x = torch.randn(3, 100)
    before = global_hook_counts()
    with counter():
        assert global_hook_counts() == (before[0] + 1, before[1] + 1)
        model(x).sum().backward()
    assert global_hook_counts() == before == (0, 0)


def test_hooks_removed_when_body_raises():
    with pytest.raises(ZeroDivisionError), counter():
        nn.Linear(2, 2)(torch.randn(1, 2))
        raise ZeroDivisionError
    assert global_hook_counts() == (0, 0)


def test_pytrees():
    class Foo(nn.Module):
        def forward(self, x):
            x = x["a"].relu_()
            return {"a": torch.mm(x, x)}

    class Mod(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Foo()
            self.b = Foo()

        def forward(self, x):
            return self.b(self.a(x))

    with counter() as mode:
        Mod()({"a": torch.randn(10, 10, requires_grad=True).clone()})["a"].sum().backward()
    assert mode.flop_counts["Mod"][aten.mm] == 12000

    class Mod2(nn.Module):
        def forward(self, x):
            return (torch.mm(x, x),)

    with counter() as mode:
        Mod2()(torch.randn(10, 10, requires_grad=True))[0].sum().backward()
    assert mode.flop_counts["Mod2"][aten.mm] == 6000


def test_mods_argument_warns_not_needed():
    with pytest.warns(UserWarning, match="not needed"):
        refimpl.FlopCounterMode(nn.Linear(2, 2))
