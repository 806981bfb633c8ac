"""refimpl.expect.precision: one context manager states the float32 arithmetic of a
comparison (TF32 on or off for cuDNN convolutions and CUDA matmuls) and restores it after.

On CPU: the flags are set inside the block and restored exactly after it (also after an
exception), and either precision computes the same values. On CUDA: the TF32 precision
really reaches TF32 kernels (a matmul's error grows by orders of magnitude), the full
float32 one does not.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from refimpl.expect.precision import Precision, tf32_settings

BOTH = [Precision(), Precision(tf32=True)]


@pytest.fixture(autouse=True)
def torch_tf32_settings_kept():
    """Whatever a test sets, the next test starts from the settings this one found."""
    saved = tf32_settings()
    yield
    for owner, attr, value in saved:
        setattr(owner, attr, value)


def _values() -> list[object]:
    return [value for _, _, value in tf32_settings()]


def test_names():
    assert [Precision.named(p.name) for p in BOTH] == BOTH
    assert Precision().name == "float32" and Precision(tf32=True).name == "tf32"
    with pytest.raises(ValueError, match="'tf16' is not one of float32, tf32"):
        Precision.named("tf16")


@pytest.mark.parametrize("precision", BOTH, ids=lambda p: p.name)
def test_flags_inside_the_block(precision):
    for start in (False, True):
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = start
        with precision.applied():
            assert torch.backends.cudnn.allow_tf32 is precision.tf32
            assert torch.backends.cuda.matmul.allow_tf32 is precision.tf32


@pytest.mark.parametrize("precision", BOTH, ids=lambda p: p.name)
@pytest.mark.parametrize(("cudnn", "matmul"), [(True, False), (False, True), (True, True)])
def test_every_setting_restored_exactly(precision, cudnn, matmul):
    """torch's default (cuDNN on, matmul off) and two others; setting the legacy matmul flag
    rewrites ``torch.backends.cuda.matmul.fp32_precision``, which must come back too."""
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = cudnn, matmul
    before = _values()
    with precision.applied():
        pass
    assert _values() == before
    with pytest.raises(RuntimeError, match="inside"), precision.applied():
        raise RuntimeError("inside")
    assert _values() == before


def test_the_strings_torch_has_are_saved():
    """Where torch has the ``fp32_precision`` settings (>= 2.9), they are among the saved."""
    names = [(type(owner).__name__, attr) for owner, attr, _ in tf32_settings()]
    assert names[:2] == [(type(torch.backends.cudnn).__name__, "allow_tf32"),
                         (type(torch.backends.cuda.matmul).__name__, "allow_tf32")]
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        assert names[-1][1] == "fp32_precision" and len(names) == 5


def _conv_and_matmul(device: str) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 16, 12, 12, generator=gen), torch.randn(32, 16, 3, 3, generator=gen)
    a, b = torch.randn(256, 512, generator=gen), torch.randn(512, 128, generator=gen)
    x, w, a, b = (t.to(device) for t in (x, w, a, b))
    cl = x.to(memory_format=torch.channels_last)
    return [F.conv2d(x, w), F.conv2d(cl, w.to(memory_format=torch.channels_last)), a @ b]


def test_on_cpu_both_precisions_compute_the_same():
    results = []
    for precision in BOTH:
        with precision.applied():
            results.append(_conv_and_matmul("cpu"))
    assert all(torch.equal(f, t) for f, t in zip(*results))


@pytest.mark.cuda
def test_on_cuda_tf32_reaches_tf32_kernels():
    """A float32 matmul's error against float64 is ~1e-6 relative in full float32 and
    ~1e-3 with TF32 (a 10-bit mantissa): the flags reach the device."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(1024, 1024, generator=gen), torch.randn(1024, 1024, generator=gen)
    exact = (a.double() @ b.double()).cuda()
    errors = {}
    for precision in BOTH:
        with precision.applied():
            out = a.cuda() @ b.cuda()
        errors[precision.name] = ((out.double() - exact).norm() / exact.norm()).item()
    assert errors["float32"] < 1e-5 and errors["tf32"] > 1e-4, errors
