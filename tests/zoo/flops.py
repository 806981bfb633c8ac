"""FLOP-count bugs from torch's FlopCounterMode and its peers, re-planted in refimpl's counter.

Each backend's ``flop_counter`` is refimpl's :class:`~refimpl.flops.counter.FlopCounterMode`
with one table entry replaced (through ``custom_mapping``, as a user would) or removed, or,
for the per-module bug, one step of the attribution changed.
"""

from __future__ import annotations

from math import prod

import torch

from refimpl.flops.counter import FlopCounterMode
from refimpl.flops.formulas.conv import conv_backward_flops, conv_flops
from refimpl.flops.formulas.matmul import mm_count

aten = torch.ops.aten


def _counter(kwargs: dict, mapping: dict) -> FlopCounterMode:
    """refimpl's counter with ``mapping`` laid over the table (and over the caller's own)."""
    return FlopCounterMode(custom_mapping={**kwargs.pop("custom_mapping", {}), **mapping},
                           **kwargs)


class _PlantedFlops:
    component = "flops"


def _conv_groups_ignored(x, w, _b, _s, _p, _d, transposed, _op, groups, *args,
                         out_shape=None, **kwargs) -> int:
    return conv_flops(x, w, out_shape, bool(transposed)) * groups


class GroupsIgnoredFlops(_PlantedFlops):
    """pytorch/pytorch#105613, "Fix flop counting for grouped convolutions".

    The conv formula multiplied the input channels by the output channels as if every
    output channel read all of them; a grouped convolution reads ``C_in / groups``, so it
    was counted ``groups`` times too high. Planted: the count is multiplied by ``groups``.
    Caught by test_flops.py's ``test_conv_forward_is_the_hand_count``.
    """

    name = "zoo:flops-groups-ignored"
    issue = "pytorch/pytorch#105613"
    title = "Fix flop counting for grouped convolutions"
    catcher = "test_flops::test_conv_forward_is_the_hand_count"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.convolution: _conv_groups_ignored})


def _transposed_by_output(x, w, _b, _s, _p, _d, transposed, *args, out_shape=None,
                          **kwargs) -> int:
    return 2 * x[0] * prod(out_shape[2:]) * prod(w)


class TransposedByOutputFlops(_PlantedFlops):
    """facebookresearch/fvcore#78, "Wrong ConvTranspose flops".

    fvcore counted a transposed convolution as a plain one, over the *output's* spatial
    positions: ``ConvTranspose2d(32, 1, 3)`` on a 1x1 input gave 81 where 32 * 3 * 3 MACs
    are done. Planted: a transposed conv is counted over the output's spatial size. Caught
    by test_flops.py's ``test_conv_forward_is_the_hand_count``.
    """

    name = "zoo:flops-transposed-by-output"
    issue = "facebookresearch/fvcore#78"
    title = "Wrong ConvTranspose flops"
    catcher = "test_flops::test_conv_forward_is_the_hand_count"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.convolution: _transposed_by_output})


def _transposed_out_channels_from_dim0(x, w, _b, _s, _p, _d, transposed, _op, groups, *args,
                                       out_shape=None, **kwargs) -> int:
    count = conv_flops(x, w, out_shape, bool(transposed))
    if not transposed:
        return count
    # [C_in, C_out/groups, *K] read as [C_out, ...]: C_out/groups becomes C_in/groups
    return count * w[0] // (w[1] * groups)


class TransposedOutChannelsFlops(_PlantedFlops):
    """deepspeedai/DeepSpeed#3815, "[BUG] FLOP profiler for transposed convolutions infers
    out_channels wrongly".

    The profiler read ``out_channels = weight.shape[0]``, but a transposed convolution's
    weight is ``[in_channels, out_channels / groups, *kernel]``: wrong whenever
    ``in_channels != out_channels``. Planted: the output channels are read from dim 0.
    Caught by test_flops.py's ``test_conv_forward_is_the_hand_count``.
    """

    name = "zoo:flops-transposed-out-channels"
    issue = "deepspeedai/DeepSpeed#3815"
    title = "[BUG] FLOP profiler for transposed convolutions infers out_channels wrongly"
    catcher = "test_flops::test_conv_forward_is_the_hand_count"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.convolution: _transposed_out_channels_from_dim0})


def _transposed_backward_as_plain(grad_out, x, w, _bias, _s, _p, _d, transposed, _op, _g,
                                  output_mask, *args, out_shape=None, **kwargs) -> int:
    return conv_backward_flops(grad_out, x, w, False, output_mask)


class TransposedBackwardFlops(_PlantedFlops):
    """pytorch/pytorch#119806, "FLOP Counter utility seems incorrect for ConvTranspose2d
    backward".

    The backward formula treated a transposed convolution's backward as a plain one's: a
    ``ConvTranspose2d(192, 384, 2, stride=2)`` step was reported at 250x the forward.
    Planted: ``convolution_backward`` ignores ``transposed``. Caught by test_flops.py's
    ``test_conv_backward_is_twice_forward``.
    """

    name = "zoo:flops-transposed-backward"
    issue = "pytorch/pytorch#119806"
    title = "FLOP Counter utility seems incorrect for ConvTranspose2d backward"
    catcher = "test_flops::test_conv_backward_is_twice_forward"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.convolution_backward: _transposed_backward_as_plain})


class _WithoutEntries(FlopCounterMode):
    """refimpl's counter with some table entries removed (ops the table does not know)."""

    removed: tuple = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for packet in self.removed:
            self.flop_registry.pop(packet, None)


_CPU_FLASH = [getattr(aten, n) for n in ("_scaled_dot_product_flash_attention_for_cpu",
                                         "_scaled_dot_product_flash_attention_for_cpu_backward")
              if hasattr(aten, n)]


class _NoCpuFlash(_WithoutEntries):
    removed = tuple(_CPU_FLASH)


class CpuFlashAttentionUncountedFlops(_PlantedFlops):
    """pytorch/pytorch#195460, "FlopCounterMode counts 0 FLOPs for CPU
    scaled_dot_product_attention (flop_registry lacks
    aten::_scaled_dot_product_flash_attention_for_cpu)".

    On CPU, ``scaled_dot_product_attention`` dispatches to the ``_for_cpu`` flash kernel,
    which had no table entry: attention counted 0. Planted: the two ``_for_cpu`` entries
    are removed. Caught by test_flops.py's ``test_fused_inference_paths_count_the_same_math``.
    """

    name = "zoo:flops-cpu-flash-attention-uncounted"
    issue = "pytorch/pytorch#195460"
    title = ("FlopCounterMode counts 0 FLOPs for CPU scaled_dot_product_attention "
             "(flop_registry lacks aten::_scaled_dot_product_flash_attention_for_cpu)")
    catcher = "test_flops::test_fused_inference_paths_count_the_same_math"

    def flop_counter(self, **kwargs):
        return _NoCpuFlash(**kwargs)


def _mm_as_macs(a, b, *args, out_shape=None, **kwargs) -> int:
    return mm_count(a, b) // 2


class MatmulAsMacsFlops(_PlantedFlops):
    """facebookresearch/fvcore#108, "Matmul Flops".

    fvcore's matmul handle counted one per multiply-add (MACs) and called it FLOPs, half the
    ``2mnk`` the table (and torch) uses for ``mm``: off by 2x. Planted: ``mm`` counts
    ``mnk``. Caught by test_flops.py's ``test_mm_family_is_2mnk``.
    """

    name = "zoo:flops-matmul-as-macs"
    issue = "facebookresearch/fvcore#108"
    title = "Matmul Flops"
    catcher = "test_flops::test_mm_family_is_2mnk"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.mm: _mm_as_macs})


class _NoBmm(_WithoutEntries):
    removed = (aten.bmm, aten.baddbmm)


class BmmUncountedFlops(_PlantedFlops):
    """pytorch/pytorch#66636, "[PyTorch] Add flop count for bmm and baddbmm".

    The flop counter had no formula for ``bmm`` and ``baddbmm``: batched products (every
    attention score) counted nothing. Planted: both entries are removed. Caught by
    test_flops.py's ``test_mm_family_is_2mnk``.
    """

    name = "zoo:flops-bmm-uncounted"
    issue = "pytorch/pytorch#66636"
    title = "[PyTorch] Add flop count for bmm and baddbmm"
    catcher = "test_flops::test_mm_family_is_2mnk"

    def flop_counter(self, **kwargs):
        return _NoBmm(**kwargs)


def _mv_by_input_numel(a, x, *args, out_shape=None, **kwargs) -> int:
    return 2 * prod(a) * x[-1]


def _dot_by_input_numel(a, b, *args, out_shape=None, **kwargs) -> int:
    return 2 * prod(a) * b[-1]


class MatmulFamilyNumelFlops(_PlantedFlops):
    """deepspeedai/DeepSpeed#8419, "Fix flop counts for the matmul family in the flops
    profiler".

    ``_matmul_flops_compute`` counted ``prod(input.shape) * other.shape[-1]`` MACs, right for
    a 2-d product but not for a vector: ``(8,) @ (8,)`` gave 64 MACs for 8, ``(4, 8) @ (8,)``
    256 for 32. Planted: ``mv`` and ``dot`` are counted that way. Caught by
    test_flops_strength.py's ``test_every_matmul_op_is_2bmkn``.
    """

    name = "zoo:flops-matmul-family-numel"
    issue = "deepspeedai/DeepSpeed#8419"
    title = "Fix flop counts for the matmul family in the flops profiler"
    catcher = "test_flops_strength::test_every_matmul_op_is_2bmkn"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.mv: _mv_by_input_numel, aten.dot: _dot_by_input_numel})


class _ParentThreeQuarters(FlopCounterMode):
    """Each op's FLOPs go in full to "Global" and to the innermost module; every enclosing
    module gets three quarters of them."""

    def _record(self, func, args, kwargs, out) -> None:
        before = {name: dict(ops) for name, ops in self.flop_counts.items()}
        super()._record(func, args, kwargs, out)
        parents = set(self.mod_tracker.parents) - {"Global"}
        enclosing = {p for p in parents if any(q.startswith(p + ".") for q in parents)}
        for name in enclosing:
            for packet, total in self.flop_counts[name].items():
                added = total - before.get(name, {}).get(packet, 0)
                self.flop_counts[name][packet] = total - added + added * 3 // 4


class EnclosingModuleShortchangedFlops(_PlantedFlops):
    """pytorch/pytorch#124196, "[torch.compile][FlopCounter] AssertionError: Global is not
    OptimizedModule._orig_mod".

    Under a compiled module the totals were right, but the per-module table credited the
    ``OptimizedModule`` wrapper with 162 of its child's 216 FLOPs (75%: half the forward
    ``addmm``). Planted: an enclosing module gets 3/4 of each op run inside a child. Caught
    by test_flops_modules.py's ``test_module_attribution_is_the_hand_count``.
    """

    name = "zoo:flops-enclosing-module-shortchanged"
    issue = "pytorch/pytorch#124196"
    title = "[torch.compile][FlopCounter] AssertionError: Global is not OptimizedModule._orig_mod"
    catcher = "test_flops_modules::test_module_attribution_is_the_hand_count"

    def flop_counter(self, **kwargs):
        return _ParentThreeQuarters(**kwargs)


def _baddbmm_without_kwargs(bias, a, b, *args, out_shape=None) -> int:
    """The formula as before the fix: no ``**kwargs``, so a call with ``beta``/``alpha``
    keywords raises inside the counter."""
    (batch, m, k), (_, _, n) = a, b
    return 2 * batch * m * n * k


class BaddbmmKwargsFlops(_PlantedFlops):
    """pytorch/pytorch#98247, "fix an issue in baddbmm flop counter".

    The ``baddbmm`` formula's signature missed ``**kwargs``: counting a call that passed
    ``beta``/``alpha`` by keyword raised a TypeError instead of counting it. Planted: the
    formula takes no extra keywords. Caught by test_flops.py's ``test_mm_family_is_2mnk``
    when it draws ``baddbmm`` with keyword scalars.
    """

    name = "zoo:flops-baddbmm-kwargs"
    issue = "pytorch/pytorch#98247"
    title = "fix an issue in baddbmm flop counter"
    catcher = "test_flops::test_mm_family_is_2mnk"

    def flop_counter(self, **kwargs):
        return _counter(kwargs, {aten.baddbmm: _baddbmm_without_kwargs})


ZOO = [GroupsIgnoredFlops, TransposedByOutputFlops, TransposedOutChannelsFlops,
       TransposedBackwardFlops, CpuFlashAttentionUncountedFlops, MatmulAsMacsFlops,
       BmmUncountedFlops, MatmulFamilyNumelFlops, EnclosingModuleShortchangedFlops,
       BaddbmmKwargsFlops]
