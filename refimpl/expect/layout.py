"""Did a layout pass convert anything? Read off the graph it returned, not off its own report.

:func:`converted_values` runs the returned ``fx.GraphModule`` node by node
(``fx.Interpreter``) on the example inputs and lists the nodes whose value is a 4-d tensor
in channels-last memory order that is not also plain contiguous (a tensor with one channel
or a 1x1 image is both, and proves nothing). Eager convolutions on contiguous inputs give
contiguous outputs, so any such value is a conversion the pass made.

Invariant: the answer depends only on the values the graph computes, so it holds for any
backend's pass (refimpl's, or one under test). Nothing here reads refimpl's own layout pass
(:mod:`refimpl.layout`): the facts used are torch's documented semantics (an eager
convolution of a contiguous input returns a contiguous output; ``Tensor.is_contiguous(
memory_format=...)``), and :func:`make_layout_backend` is plain torch (dynamo, then
AOTAutograd with eager compilers).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_leaves

__all__ = ["ConvCall", "compile_with", "converted_values", "inductor_conv_class",
           "inductor_decides", "make_layout_backend"]


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


def _boxed_eager(gm: fx.GraphModule, example_inputs: list[Any]):
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def make_layout_backend(pass_fn: Callable[[fx.GraphModule, list[Any]], fx.GraphModule]):
    """A dynamo backend: ``pass_fn(gm, example_inputs)`` on dynamo's graph, then AOTAutograd
    tracing what the pass made (forward and backward) and running the traced graphs eagerly,
    so any difference from eager comes from the pass."""
    if not callable(pass_fn):
        raise TypeError(f"pass_fn must be callable (gm, example_inputs) -> GraphModule, got "
                        f"{type(pass_fn).__name__}")
    # torch's compiler stack (dynamo, AOTAutograd, inductor): ~1 s to import, loaded on use
    from torch._dynamo.backends.common import aot_autograd

    aot = aot_autograd(fw_compiler=_boxed_eager, bw_compiler=_boxed_eager)

    def backend(gm: fx.GraphModule, example_inputs: list[Any]):
        return aot(pass_fn(gm, example_inputs), example_inputs)

    return backend


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


def inductor_conv_class(weight_shape: tuple[int, int, int, int], groups: int) -> str:
    """A 2-d conv's class in inductor's layout rule (``GraphLowering.decide_layout_opt``,
    torch/_inductor/graph.py), written here by hand from that rule: ``weight_shape`` is
    ``(out, in/groups, kh, kw)``. First match wins:

    ``grouped``  more than one group and more than one input channel a group (a depthwise
                 conv, one input channel a group, is not grouped);
    ``small``    at most 64 output and at most 64 input channels (a group's);
    ``in_out``   twice the output channels at most the input channels, and a kernel more
                 than one row high (inductor reads the weight's dim 2 only);
    ``default``  the rest.

    tests/test_layout_conv_class.py holds it to torch's own ``decide_layout_opt``."""
    out_channels, group_inputs, kernel_height, _ = weight_shape
    if groups != 1 and group_inputs != 1:
        return "grouped"
    if max(out_channels, group_inputs) < 65:
        return "small"
    if out_channels + out_channels <= group_inputs and kernel_height >= 2:
        return "in_out"
    return "default"


@dataclass(frozen=True)
class ConvCall:
    """One 2-d convolution as eager ran it: shapes and hyper-parameters, nothing derived."""

    input_shape: tuple[int, int, int, int]
    weight_shape: tuple[int, int, int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1


def inductor_decides(convs: list[ConvCall], is_inference: bool) -> bool:
    """torch's own answer: inductor's ``GraphLowering.decide_layout_opt`` run on an aten graph
    holding one ``aten.convolution`` per call (each on its own inputs), traced with meta
    tensors. On the meta device inductor's mkldnn-on-CPU shortcut (every CPU graph with a
    conv goes channels-last) does not apply, which is the rule refimpl states for every
    device; layout optimisation is on and not forced. inductor counts each conv's FLOPs with
    torch's own FlopCounterMode, so nothing here is refimpl's arithmetic. The graph has
    ``3 * len(convs) + 1`` nodes, far under inductor's 300 nodes a conv."""
    from torch._inductor import config
    from torch._inductor.graph import GraphLowering
    from torch.fx.experimental.proxy_tensor import make_fx

    def convolutions(*tensors):
        pairs = zip(tensors[::2], tensors[1::2], convs)
        return tuple(torch.ops.aten.convolution(
            x, w, None, list(c.stride), list(c.padding), list(c.dilation), False, [0, 0],
            c.groups) for x, w, c in pairs)

    inputs = [torch.empty(shape, device="meta") for c in convs
              for shape in (c.input_shape, c.weight_shape)]
    gm = make_fx(convolutions)(*inputs)
    with config.patch(layout_optimization=True, force_layout_optimization=False):
        return bool(GraphLowering.decide_layout_opt(gm, is_inference=is_inference))
