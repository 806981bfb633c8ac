"""Joint graphs traced by AOTAutograd alone, for tests that read refimpl's partitioner
stages on a real joint ``GraphModule`` (refimpl itself traces through dynamo:
``refimpl.partition.api``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from functorch.compile import aot_function, make_boxed_func
from torch import fx

from refimpl.partition.errors import TraceError
from refimpl.partition.fx_edge import partition_fn
from refimpl.partition.options import PartitionOptions


def trace_joint(fn: Callable[..., Any], *args: Any) -> tuple[fx.GraphModule, int]:
    """The joint graph AOTAutograd builds for ``fn(*args)`` (no decompositions), and its
    number of forward outputs. ``fn`` runs once (forward only). Raises :class:`TraceError`
    if no input requires grad, so that there is no backward to partition."""
    leaves = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
    if not any(a.requires_grad for a in leaves):
        raise TraceError("args: no tensor argument requires grad, so fn has no backward "
                         "to partition (pass at least one tensor with requires_grad=True)")
    captured: list[tuple[fx.GraphModule, int]] = []

    def capture(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        captured.append((copy.deepcopy(joint), num_fwd_outputs))
        return partition_fn(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                            options=PartitionOptions(cse=False), **kwargs)

    nop = make_boxed_func
    compiled = aot_function(fn, fw_compiler=lambda g, _: nop(g), partition_fn=capture)
    try:
        compiled(*args)
    except Exception as exc:  # the tracer's own message is the useful part
        raise TraceError(f"fn could not be traced into a joint graph: {exc}") from exc
    if not captured:
        raise TraceError("fn produced no joint graph (are its outputs tensors that "
                         "require grad?)")
    return captured[0]
