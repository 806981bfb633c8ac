"""``memory_efficient_fusion``, through the backend under test: a function or a module
compiled by AOTAutograd with the target's partitioner trains as eager does.

``functorch.compile.memory_efficient_fusion`` (torch's target) and
``refimpl.memory_efficient_fusion`` (refimpl's: its partitioner at budget 1.0) take a
function or an ``nn.Module`` and return a callable of the same arguments. A module is traced
with its parameters as graph inputs (``aot_module``), so their gradients flow; a function's
tensors arguments are its inputs (``aot_function``). Expectation: eager PyTorch on the same
inputs: the output, each input's gradient and, for a module, each parameter's gradient,
within ``torch.testing.assert_close``'s default tolerances (torch's compiles may fuse).
A target without ``memory_efficient_fusion`` is skipped, with the reason.

Both fusions plan at the default budget, torch's ``activation_memory_budget`` default of 1.0
(refimpl's ``PartitionOptions()``; functorch's min-cut partitioner under the untouched
config). So, for a function, the bytes the fused forward leaves for the backward (refimpl's
meter, :func:`refimpl.memory.measure_saved`) equal those of torch's
``functorch.compile.memory_efficient_fusion`` of the same function on the same inputs: a
fusion that planned at another budget keeps other bytes (at 0, not the activation's input;
its matmul is recomputed). (Not those of the target's ``compile`` at 1.0: a fusion traces
without dynamo and without decompositions, and both torch's and refimpl's save the
activation's output as well there.)

The programs: ``act(x @ W1) @ W2`` with the activation drawn, as a function of ``(x, W1,
W2)`` and as ``Sequential(Linear, act, Linear)`` of ``x``; widths 2-8.

Reach (``refimpl.properties.reach``): every example has a value the backward needs (the
activation's input), saved or recomputed by the partitioner.
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from refimpl.memory import measure_saved
from refimpl.properties.reach import reach

ACTIVATIONS = {"cos": torch.cos, "sin": torch.sin, "tanh": torch.tanh,
               "sigmoid": torch.sigmoid}


class Act(nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ACTIVATIONS[self.name](x)


def fusion_of(backend):
    fuse = getattr(backend, "memory_efficient_fusion", None)
    if fuse is None:
        pytest.skip(f"backend {backend.name!r} has no memory_efficient_fusion")
    return fuse


def grads_of(out: torch.Tensor, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch.autograd.grad(out.sum(), tensors))


@given(n=st.integers(1, 6), widths=st.lists(st.integers(2, 8), min_size=3, max_size=3),
       act=st.sampled_from(sorted(ACTIVATIONS)), as_module=st.booleans())
def test_memory_efficient_fusion_trains_as_eager(refimpl_backend, n, widths, act, as_module):
    fuse = fusion_of(refimpl_backend)
    reach(True)
    torch.manual_seed(0)
    first, hidden, last = widths
    x = torch.randn(n, first, requires_grad=True)
    if as_module:
        module = nn.Sequential(nn.Linear(first, hidden), Act(act), nn.Linear(hidden, last))
        eager, compiled_module = module, fuse(copy.deepcopy(module))
        tensors = [x, *eager.parameters()]
        out = eager(x)
        compiled_x = x.detach().clone().requires_grad_()
        got = compiled_module(compiled_x)
        got_grads = grads_of(got, [compiled_x, *compiled_module.parameters()])
    else:
        w1 = torch.randn(first, hidden, requires_grad=True)
        w2 = torch.randn(hidden, last, requires_grad=True)
        fn = lambda x, w1, w2: ACTIVATIONS[act](x @ w1) @ w2
        tensors = [x, w1, w2]
        out = fn(*tensors)
        got = fuse(fn)(*tensors)
        got_grads = grads_of(got, tensors)
    want_grads = grads_of(out, tensors)
    what = (f"memory_efficient_fusion ({refimpl_backend.name}) of act={act} "
            f"{'module' if as_module else 'function'}, n={n}, widths={widths}")
    torch.testing.assert_close(got, out, msg=lambda m: f"{what}: output\n{m}")
    assert len(got_grads) == len(want_grads), f"{what}: {len(got_grads)} gradients"
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        torch.testing.assert_close(g, w, msg=lambda m, i=i: f"{what}: gradient {i}\n{m}")
    if not as_module:
        check_saved_as_torch_fusion(fuse, fn, tensors, what)


def check_saved_as_torch_fusion(fuse, fn, tensors, what: str) -> None:
    """The fused function's saved bytes are those of functorch's fusion (module docstring),
    each measured by the meter on fresh copies of the inputs."""
    # torch's compiler stack (~1 s to import), loaded on use as refimpl.oracle.builtin does
    from functorch.compile import memory_efficient_fusion as torch_memory_efficient_fusion

    fresh = lambda: [t.detach().clone().requires_grad_() for t in tensors]
    fused = measure_saved(fuse(fn), *fresh()).bytes
    expected = measure_saved(torch_memory_efficient_fusion(fn), *fresh()).bytes
    assert fused == expected, (f"{what}: the fused forward saves {fused} bytes, functorch's "
                               f"memory_efficient_fusion (budget 1.0) {expected}")
