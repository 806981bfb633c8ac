"""The seed's tests (torch test/inductor/test_layout_optim.py), in our own code, on CPU.

Every compile goes through ``torch.compile(backend="refimpl")``, wrapped by a recorder that
keeps the layout pass's result (``gm.meta["refimpl_layout"]``) for each graph, so each test
also checks that the compiled model ran and what the pass decided.

Where the seed's check could not fail, ours is stricter: the training test compares
gradients cloned before the compiled run (the seed compared ``param.grad`` objects with
themselves), and the nll_loss test calls the compiled model (the seed never did).

Precision (refimpl.expect.precision): every run a value comparison rests on runs inside one
``Precision.applied()`` block. Each such test runs on CPU and, on CUDA, twice: in full
float32 (TF32 off; judged against contiguous eager, as the seed judges) and with TF32 on
(judged against eager run channels-last with TF32, the kernels a converted graph reaches).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from refimpl import same
from refimpl.expect.layout import run_channels_last
from refimpl.expect.precision import Precision
from refimpl.expect.same import mismatch
from refimpl.layout import META_KEY

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
FLOAT32, TF32 = Precision(), Precision(tf32=True)
#: (device, precision) of the tests that compare values with eager: TF32 changes nothing on
#: CPU, so CPU runs once; CUDA runs in both precisions.
PRECISE_DEVICES = [pytest.param("cpu", FLOAT32, id="cpu"),
                   pytest.param("cuda", FLOAT32, marks=pytest.mark.cuda, id="cuda"),
                   pytest.param("cuda", TF32, marks=pytest.mark.cuda, id="cuda-tf32")]


class Recorder:
    """A dynamo backend: refimpl's, keeping the layout pass's result for each graph."""

    def __init__(self, inner=None) -> None:
        self.inner = inner or _refimpl_backend()
        self.results = []

    def __call__(self, gm, example_inputs):
        compiled = self.inner(gm, example_inputs)
        self.results.append(gm.meta.get(META_KEY))
        return compiled

    @property
    def converted(self) -> list[bool]:
        return [r is not None and r.decision.channels_last for r in self.results]


def _refimpl_backend():
    from torch._dynamo import lookup_backend

    return lookup_backend("refimpl")


def compile_recorded(fn, inner=None, **kwargs):
    torch._dynamo.reset()
    recorder = Recorder(inner)
    return torch.compile(fn, backend=recorder, **kwargs), recorder


class Model2Conv(nn.Module):
    def __init__(self, dim=512, manual_graph_break=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, dim, kernel_size=3, stride=2, bias=False)
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, stride=2, bias=False)
        self.manual_graph_break = manual_graph_break

    def forward(self, x):
        x = self.conv1(x)
        if self.manual_graph_break:
            torch._dynamo.graph_break()
        return self.conv2(x)

    def get_example_inputs(self):
        return (torch.rand(2, 3, 16, 16),)


class Model3Conv(nn.Module):
    def __init__(self, dim=512, patch_size=7, kernel_size=7, manual_graph_break=False):
        super().__init__()
        self.seq = nn.Sequential(
            nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size, bias=False),
            nn.Conv2d(dim, dim, kernel_size, groups=dim, padding="same", bias=False))
        self.conv = nn.Conv2d(dim, dim, kernel_size=1, bias=False)
        self.manual_graph_break = manual_graph_break

    def forward(self, x):
        x = self.seq(x)
        if self.manual_graph_break:
            torch._dynamo.graph_break()
        return self.conv(x)

    def get_example_inputs(self):
        return (torch.randn(2, 3, 16, 16),)


class MutateBaseOfConvOutput(nn.Module):
    def __init__(self, manual_graph_break=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 512, kernel_size=3, stride=2, bias=False)

    def forward(self, x):
        x = self.conv(x)
        y = x.view(-1)
        x.mul_(2)
        return y

    def get_example_inputs(self):
        return (torch.rand(2, 3, 16, 16),)


class MutateViewOfConvOutput(MutateBaseOfConvOutput):
    def forward(self, x):
        x = self.conv(x)
        y = x.view(-1)
        y.mul_(2)
        return x


def wrap(module, train):
    """The module itself, or (train) a function returning cloned grads after backward."""
    if not train:
        return module

    def step(*inputs):
        module(*inputs).sum().backward()
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                for p in module.parameters()]

    return step


def verify_accuracy(model_class, *, device="cpu", precision=FLOAT32, ddp=False, train=False):
    """Eager vs compiled (with an fp64 reference) under ``same``, every run in ``precision``;
    values against contiguous eager (TF32: channels-last eager), strides against contiguous
    eager. Returns the recorder."""
    torch.manual_seed(0)
    mod = model_class(manual_graph_break=not ddp).to(device)
    inputs = [t.to(device) for t in mod.get_example_inputs()]
    with precision.applied():
        reference = (run_channels_last(mod, *inputs, lambda m, x: wrap(m, train)(x))
                     if precision.tf32 else None)  # before the eager step: fresh grads
        expected = wrap(mod, train)(*inputs)
        fp64_out = wrap(copy.deepcopy(mod).double(), train)(*[t.double() for t in inputs])
        mod.zero_grad(set_to_none=True)
        target = mod
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            target = DistributedDataParallel(mod)
        opt, recorder = compile_recorded(wrap(target, train))
        actual = opt(*inputs)
    assert recorder.results, "the compiled model never ran through the backend"
    reference = expected if reference is None else reference
    assert same(reference, actual, fp64_ref=fp64_out), mismatch(reference, actual, fp64_out)
    if not train:
        assert actual.stride() == expected.stride()
    return recorder


@pytest.mark.parametrize(("device", "precision"), PRECISE_DEVICES)
def test_2conv_with_graph_break(device, precision):
    recorder = verify_accuracy(Model2Conv, device=device, precision=precision)
    assert recorder.converted == [True, True]  # one graph on each side of the break


@pytest.mark.parametrize(("device", "precision"), PRECISE_DEVICES)
def test_3conv_with_graph_break(device, precision):
    recorder = verify_accuracy(Model3Conv, device=device, precision=precision)
    assert recorder.converted == [True, True]
    depthwise = recorder.results[0].decision.convs[1]
    assert depthwise.groups == 512 and depthwise.kind == "default"  # in/groups == 1


@pytest.fixture(scope="module")
def gloo_world():
    """A one-process gloo group, as the seed's one-process NCCL group."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    yield
    dist.destroy_process_group()


@pytest.mark.distributed
@pytest.mark.parametrize(("model", "train"), [
    (Model2Conv, False), (Model3Conv, False), (Model2Conv, True),
    (MutateBaseOfConvOutput, False), (MutateViewOfConvOutput, False)])
def test_with_ddp_wrapper(gloo_world, model, train):
    """The seed's default (USE_DDP_WRAPPER=1): DDP instead of manual graph breaks."""
    recorder = verify_accuracy(model, ddp=True, train=train)
    assert any(recorder.converted)


class OneConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 128, kernel_size=3, padding=1, stride=1, bias=False)

    def forward(self, x):
        return self.conv(x)


@pytest.mark.parametrize(("device", "precision"), PRECISE_DEVICES)
@torch.no_grad()
def test_keep_output_layout_infer(device, precision):
    mod = OneConv().to(device)
    x = torch.randn(2, 3, 5, 5, device=device)
    with precision.applied():
        out = mod(x)
        reference = run_channels_last(mod, x, lambda m, cl_x: m(cl_x)) if precision.tf32 else out
        opt, recorder = compile_recorded(mod)
        opt_out = opt(x)
    assert recorder.converted == [True]  # the conv ran channels-last inside
    out.view(5, -1)
    opt_out.view(5, -1)  # fails if the output were left channels-last
    assert opt_out.stride() == out.stride()
    assert torch.allclose(opt_out, reference, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_keep_output_layout_with_freezing():
    """Freezing (inductor folds parameters into the graph as constants) without inductor:
    the module is frozen (eval, no grad) and traced with fx.symbolic_trace, so the conv
    weight is a constant of the graph (a call_module on the frozen module), not an input."""
    from refimpl.layout import optimize_layout

    mod = OneConv().eval().requires_grad_(False)
    x = torch.randn(2, 3, 5, 5)
    out = mod(x)
    gm = optimize_layout(torch.fx.symbolic_trace(mod), [x])
    result = gm.meta[META_KEY]
    assert result.decision.channels_last and result.decision.is_inference
    assert result.plan.convert_inputs == ["conv"]
    opt_out = gm(x)
    opt_out.view(5, -1)
    assert opt_out.stride() == out.stride()
    assert torch.allclose(opt_out, out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("device", "precision"), PRECISE_DEVICES)
def test_training_acc(device, precision):
    recorder = verify_accuracy(Model2Conv, device=device, precision=precision, train=True)
    with_conv = [r.decision.channels_last for r in recorder.results if r.decision.convs]
    assert with_conv == [True, True]  # the two conv graphs; the rest collect grads


@pytest.mark.parametrize("device", DEVICES)
def test_mutate_view(device):
    def f(x):
        y = x.view(3, 2)
        y.mul_(2)

    opt, recorder = compile_recorded(f)
    x = torch.ones(2, 3, device=device)
    opt(x)
    assert torch.equal(x, torch.ones(2, 3, device=device) * 2)
    assert recorder.results[0].decision.reason == "no 2-d convolution in the graph"


@pytest.mark.parametrize("device", DEVICES)
def test_mutate_base(device):
    def f(x):
        y = x.view(3, 2)
        x.mul_(2)
        return y

    opt, recorder = compile_recorded(f)
    x = torch.ones(2, 3, device=device)
    y = opt(x)
    assert torch.equal(y, torch.ones(3, 2, device=device) * 2)
    assert recorder.results


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", [MutateBaseOfConvOutput, MutateViewOfConvOutput])
def test_mutate_conv_output(device, model):
    """The conv runs channels-last; its viewed output is restored before any view. Full
    float32 only (the seed's tf32_off): the TF32 reference, eager channels-last, cannot run
    these models, as eager refuses ``view(-1)`` of a channels-last conv output."""
    recorder = verify_accuracy(model, device=device, precision=FLOAT32)
    plan = recorder.results[0].plan
    assert plan.restore_at_definition == plan.channels_last == ["x"]


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_shape_specialization(device):
    def f(a, b):
        return a.sin() + b.cos()

    for size in (4, 8, 16):
        a = torch.randn(2, size, device=device, requires_grad=True)
        b = torch.randn(2, size, device=device)
        opt, recorder = compile_recorded(f, dynamic=True)
        actual = opt(a, b)
        assert torch.allclose(f(a, b), actual)
        actual.sum().backward()
        assert torch.allclose(a.grad, a.detach().cos())
        assert recorder.results


class NllModel(nn.Module):
    def __init__(self, input_dim, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(1, num_classes, 3, 1, padding="same")
        self.out = nn.Linear(input_dim * num_classes, num_classes)

    def forward(self, x, targets):
        x = self.conv(x)
        b, c, t, f = x.size()
        x = self.out(x.reshape(b, t, c * f))
        logits = x.reshape(x.size(0), x.size(2), x.size(1))
        return nn.functional.cross_entropy(logits, targets)


def _loss_and_grads(model, x, targets):
    loss = model(x, targets)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


@pytest.mark.parametrize(("device", "precision"), PRECISE_DEVICES)
def test_nll_loss_backward(device, precision):
    """pytorch/pytorch#120759: nll_loss2d_backward needs its ``self`` contiguous; the pass
    must never hand it a channels-last tensor. Unlike the seed, the compiled model runs."""
    batch, seq_len, input_dim, num_classes = 48, 144, 39, 111
    torch.manual_seed(0)
    model = NllModel(input_dim, num_classes).to(device)
    x = torch.ones(batch, 1, seq_len, input_dim, device=device)
    targets = torch.randint(0, num_classes - 1, (batch, seq_len), device=device)
    step = lambda m, inp: _loss_and_grads(m, inp, targets)
    with precision.applied():
        ref, ref_grads = run_channels_last(model, x, step) if precision.tf32 else step(model, x)
        opt, recorder = compile_recorded(model)
        loss = opt(x, targets)
        loss.backward()
    assert recorder.converted == [True]
    assert torch.allclose(ref, loss, atol=1e-5, rtol=1e-5)
    for got, want in zip([p.grad for p in model.parameters()], ref_grads):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-3)


def test_partition_options_turn_the_pass_off():
    from refimpl import PartitionOptions
    from refimpl.partition.backend import DynamoBackend

    x = torch.randn(2, 3, 5, 5)
    for enabled in (True, False):
        backend = DynamoBackend(PartitionOptions(optimize_layout=enabled))
        opt, recorder = compile_recorded(OneConv(), inner=backend)
        with torch.no_grad():
            opt(x)
        assert (recorder.results[0] is not None) == enabled
