"""Did a layout pass convert anything? Read off the graph it returned, not off its own report.

:func:`converted_values` runs the returned ``fx.GraphModule`` node by node
(``fx.Interpreter``) on the example inputs and lists the nodes whose value is a 4-d tensor
in channels-last memory order that is not also plain contiguous (a tensor with one channel
or a 1x1 image is both, and proves nothing). Eager convolutions on contiguous inputs give
contiguous outputs, so any such value is a conversion the pass made.

Invariant: the answer depends only on the values the graph computes, so it holds for any
backend's pass (refimpl's, or one under test).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_leaves

from refimpl.layout.backend import make_layout_backend

__all__ = ["compile_with", "converted_values"]


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.channels_last: list[str] = []

    def run_node(self, n: fx.Node) -> Any:
        value = super().run_node(n)
        if n.op != "placeholder" and any(_channels_last(t) for t in tree_leaves(value)):
            self.channels_last.append(n.name)
        return value


def _channels_last(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last))


def converted_values(gm: fx.GraphModule, example_inputs: list[Any]) -> list[str]:
    """Names of the nodes of ``gm`` whose value is channels-last and not contiguous."""
    inputs = [t.detach().clone() if isinstance(t, torch.Tensor) else copy.copy(t)
              for t in example_inputs]
    recorder = _Recorder(gm)
    with torch.no_grad():
        recorder.run(*inputs)
    return recorder.channels_last


def zero_by_construction(fp64: list[Any], rel: float = 1e-9) -> list[bool]:
    """Which float64 reference tensors are zero up to float64 rounding (at most ``rel`` times
    the largest magnitude among them): e.g. a conv's bias gradient before a training-mode
    batch norm, which subtracts the bias back out. Comparing such values compares rounding
    noise, which the accuracy rule's RMSE ratio cannot judge."""
    tensors = [t for t in fp64 if isinstance(t, torch.Tensor) and t.numel()]
    scale = max((t.abs().max().item() for t in tensors), default=0.0)
    return [isinstance(t, torch.Tensor) and t.numel() > 0
            and t.abs().max().item() <= rel * scale for t in fp64]


#: How much noisier than eager's own a value zero by construction may come out: dynamo's
#: accuracy rule allows a compiled result 3x eager's error (refimpl.expect.same).
NOISE_MULTIPLIER = 3.0


def assert_noise_only(actual: torch.Tensor, scale: float, what: str, rel: float = 1e-3,
                      references: tuple = ()) -> None:
    """A value that is zero by construction must come out as noise: |actual| <= rel * scale
    (``scale`` the largest magnitude among the run's other results), or no more than
    NOISE_MULTIPLIER times the noise an eager reference run itself gives for it (found at
    1,000 examples: three training batch norms in a row, where eager's own bias gradient
    is 0.141 against a float64 1.5e-10)."""
    observed = actual.abs().max().item() if actual.numel() else 0.0
    eager_noise = max((r.abs().max().item() for r in references
                       if isinstance(r, torch.Tensor) and r.numel()), default=0.0)
    bound = max(rel * scale, NOISE_MULTIPLIER * eager_noise)
    assert observed <= bound, (f"{what}: zero by construction (float64), expected "
                               f"|value| <= {bound:.3g} (max of {rel:g} x {scale:.3g} and "
                               f"{NOISE_MULTIPLIER:g} x eager's noise {eager_noise:.3g}), "
                               f"observed {observed:.3g}")


def run_channels_last(module, x: torch.Tensor, step):
    """``step(m, x)`` on copies of ``module`` and ``x`` in channels-last memory format:
    eager's own computation with torch's channels-last kernels, which round differently
    from the contiguous ones (a second eager reference for a layout pass's values).

    A :class:`refimpl.strategies.nets.ConvNet` whose tail views or mutates its conv output
    gets that output made contiguous first (``contiguous_tail``): a layout pass restores
    eager's strides there, and eager itself refuses ``view(-1)`` of a channels-last tensor.
    """

    cl_module = copy.deepcopy(module).to(memory_format=torch.channels_last)
    if hasattr(cl_module, "contiguous_tail"):
        cl_module.contiguous_tail = True
    return step(cl_module, x.clone().to(memory_format=torch.channels_last))


def compile_with(pass_fn, module):
    """``module`` compiled with the layout pass ``pass_fn`` on its dynamo graph (then eager
    AOTAutograd), and the list that gets, per graph the pass saw, the names of the values its
    result computes channels-last (empty: no conversion). Dynamo is reset first."""

    seen: list[list[str]] = []

    def recording(gm, example_inputs):
        out = pass_fn(gm, example_inputs)
        seen.append(converted_values(out, list(example_inputs)))
        return out

    torch._dynamo.reset()
    return torch.compile(module, backend=make_layout_backend(recording)), seen

