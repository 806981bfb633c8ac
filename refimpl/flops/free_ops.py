"""The ops that are free by convention: the declared list behind ``uncounted_ops()``.

The table counts contractions (matrix products, convolutions, attention, recurrent layers).
Every other op that reaches the counter is either *declared free* here, with the convention
that makes it free, or *uncounted*: FlopCounterMode reports it (``uncounted_ops()`` and a line
under the table) instead of silently counting 0. Nothing is free by default.

An op (its OpOverload) is free when one of these declared rules holds:

- ``view``: its schema returns an alias of an input (``OpOverload.is_view``): no arithmetic;
- ``elementwise``: torch tags one of its packet's overloads ``pointwise`` (one result per
  element: activations, adds, scalings, comparisons, casts; torch leaves most ``out``
  overloads untagged), or its packet is in ``FREE_BY_CONVENTION["elementwise"]``
  (activation backwards and in-place activations that torch leaves untagged, and
  ``leaky_relu``, untagged before torch 2.13);
- ``reduction``: torch tags one of its packet's overloads ``reduction`` (sum, mean, max,
  norms of one tensor), or it is in
  ``FREE_BY_CONVENTION["reduction"]`` (softmax, scans, sorting, losses);
- every op of a namespace in ``FREE_NAMESPACES`` (the profiler's markers);
- ``_foreach_*`` (an elementwise op over a list of tensors) is elementwise; an in-place
  ``op_`` is free when ``op`` is named below;
- a packet named in one of the other categories of ``FREE_BY_CONVENTION``: normalization,
  pooling and resampling (per-element weighted sums, as torch's counter: not counted), data
  movement (copies, concatenation, indexing, padding), creation and random draws, metadata.

Invariant: :func:`free_category` is a pure function of the op; it never looks at the table,
so an op with a formula is counted and an op with neither a formula nor a category here is
reported.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch._ops import OpOverload

_ACTIVATION_BACKWARDS = (
    "elu_backward gelu_backward glu_backward hardsigmoid_backward hardswish_backward "
    "hardtanh_backward leaky_relu_backward log_sigmoid_forward log_sigmoid_backward "
    "mish_backward rrelu_with_noise rrelu_with_noise_backward sigmoid_backward silu_backward "
    "softplus_backward softshrink_backward hardshrink_backward tanh_backward threshold_backward "
    "hardswish_ hardsigmoid_ silu_ mish_ elu_ gelu_ _prelu_kernel _prelu_kernel_backward "
    "native_dropout native_dropout_backward _masked_scale hardswish hardsigmoid prelu glu "
    "relu6 hardtanh_ leaky_relu leaky_relu_ threshold_ where _fused_adam_ _fused_adamw_ "
    "_fused_sgd_ "
    "_fused_adagrad_")

#: category -> aten packet names declared free (besides the view / pointwise / reduction rules).
FREE_BY_CONVENTION: dict[str, frozenset[str]] = {name: frozenset(ops.split()) for name, ops in {
    "elementwise": _ACTIVATION_BACKWARDS,
    "reduction": (
        "_softmax _log_softmax _safe_softmax _softmax_backward_data _log_softmax_backward_data "
        "cumsum cumprod logcumsumexp cummax cummin _logcumsumexp sort topk argsort kthvalue "
        "median nanmedian mode nll_loss_forward nll_loss_backward nll_loss2d_forward "
        "nll_loss2d_backward binary_cross_entropy binary_cross_entropy_backward mse_loss "
        "mse_loss_backward smooth_l1_loss smooth_l1_loss_backward huber_loss "
        "huber_loss_backward _ctc_loss _ctc_loss_backward"),
    "normalization": (
        "native_batch_norm native_batch_norm_backward _native_batch_norm_legit "
        "_native_batch_norm_legit_no_training _native_batch_norm_legit_functional "
        "batch_norm_backward _batch_norm_with_update _batch_norm_no_update "
        "native_layer_norm native_layer_norm_backward native_group_norm "
        "native_group_norm_backward _fused_rms_norm _fused_rms_norm_backward rms_norm "
        "cudnn_batch_norm cudnn_batch_norm_backward miopen_batch_norm "
        "miopen_batch_norm_backward _weight_norm_interface _weight_norm_interface_backward"),
    "pooling and resampling": (
        "max_pool2d_with_indices max_pool2d_with_indices_backward max_pool3d_with_indices "
        "max_pool3d_with_indices_backward avg_pool2d avg_pool2d_backward avg_pool3d "
        "avg_pool3d_backward _adaptive_avg_pool2d _adaptive_avg_pool2d_backward "
        "_adaptive_avg_pool3d _adaptive_avg_pool3d_backward adaptive_max_pool2d "
        "adaptive_max_pool2d_backward adaptive_max_pool3d adaptive_max_pool3d_backward "
        "max_unpool2d max_unpool3d _upsample_bilinear2d_aa _upsample_bicubic2d_aa "
        "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_linear1d "
        "upsample_bilinear2d upsample_bicubic2d upsample_trilinear3d _upsample_nearest_exact1d "
        "_upsample_nearest_exact2d _upsample_nearest_exact3d upsample_nearest1d_backward "
        "upsample_nearest2d_backward upsample_nearest3d_backward upsample_linear1d_backward "
        "upsample_bilinear2d_backward upsample_bicubic2d_backward "
        "upsample_trilinear3d_backward _upsample_nearest_exact2d_backward "
        "grid_sampler_2d grid_sampler_2d_backward grid_sampler_3d grid_sampler_3d_backward "
        "affine_grid_generator"),
    "data movement": (
        "cat stack _unsafe_view as_strided_ copy_ _copy_from _copy_from_and_resize _to_copy "
        "clone contiguous constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d "
        "reflection_pad1d_backward reflection_pad2d_backward reflection_pad3d_backward "
        "replication_pad1d replication_pad2d replication_pad3d replication_pad1d_backward "
        "replication_pad2d_backward replication_pad3d_backward roll flip index index_put "
        "index_put_ _index_put_impl_ _unsafe_index _unsafe_index_put index_select gather "
        "scatter scatter_ scatter_add scatter_add_ scatter_reduce index_add index_add_ "
        "index_copy index_fill masked_fill masked_scatter masked_scatter_backward masked_select "
        "nonzero "
        "select_backward slice_backward select_scatter slice_scatter diagonal_scatter "
        "as_strided_scatter unsafe_split unsafe_split_with_sizes split_with_sizes_copy "
        "embedding embedding_dense_backward _embedding_bag _embedding_bag_backward repeat "
        "tril triu im2col col2im pixel_shuffle pixel_unshuffle unfold_backward "
        "channel_shuffle native_channel_shuffle _reshape_copy view_copy"),
    "creation and random": (
        "empty empty_like empty_strided new_empty new_empty_strided new_zeros new_ones new_full "
        "zeros zeros_like ones ones_like full full_like fill_ zero_ arange linspace logspace "
        "scalar_tensor eye lift lift_fresh lift_fresh_copy detach alias resize_ set_ rand "
        "rand_like randn randn_like randint randint_like randperm normal normal_ uniform_ "
        "bernoulli bernoulli_ exponential_ random_ multinomial _nested_tensor_from_mask "
        "_nested_tensor_from_mask_left_aligned _nested_from_padded to_padded_tensor "
        "_nested_tensor_from_tensor_list repeat_interleave isin bucketize searchsorted "
        "_unique2 unique_dim unique_consecutive bincount histc one_hot "
        "_pack_padded_sequence _pad_packed_sequence"),
    "metadata": (
        "_local_scalar_dense _fused_sdp_choice _linalg_check_errors is_same_size is_nonzero "
        "_has_same_storage_numel "
        "equal allclose _assert_async _assert_scalar sym_constrain_range_for_size "
        "_make_dep_token _check_is_size record_stream _assert_tensor_metadata sym_size "
        "sym_stride sym_numel sym_storage_offset"),
}.items()}

#: namespaces whose every op is free: the profiler's record_function markers.
FREE_NAMESPACES = {"profiler": "metadata"}

_TAG_RULES = {torch.Tag.pointwise: "elementwise", torch.Tag.reduction: "reduction"}


def _packet_name(op: Any) -> str:
    packet = op.overloadpacket if isinstance(op, OpOverload) else op
    return getattr(packet, "__name__", str(packet)).split(".")[-1]


@cache
def _tag_category(packet: Any) -> str | None:
    """The tag rule that holds for some overload of ``packet`` (a pure function: cached)."""
    overloads = [getattr(packet, name) for name in packet.overloads()]
    for tag, category in _TAG_RULES.items():
        if any(tag in overload.tags for overload in overloads):
            return category
    return None


def free_category(op: Any) -> str | None:
    """The declared reason ``op`` (an OpOverload) costs no FLOPs, or None (not declared)."""
    if isinstance(op, OpOverload):
        if op.is_view:
            return "view"
        category = _tag_category(op.overloadpacket)
        if category is not None:
            return category
        if op.namespace in FREE_NAMESPACES:
            return FREE_NAMESPACES[op.namespace]
        if op.namespace not in ("aten", "prims", "prim"):
            return None
    name = _packet_name(op)
    if name.startswith("_foreach_"):
        return "elementwise"  # every _foreach_ op: one elementwise op over a tensor list
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    for category, names in FREE_BY_CONVENTION.items():
        if name in names or base in names:  # an in-place op is free when its base is
            return category
    return None


def is_free(op: Any) -> bool:
    """Whether ``op`` is declared free (see :func:`free_category`)."""
    return free_category(op) is not None
