"""A custom op that multiplies like ``x @ w`` and whose body a property instruments.

Properties that watch how often, or on what, a backend runs an op (the partitioner's
profiling estimator, for one) define a ``torch.library.custom_op`` whose body records its
call and returns ``x @ w``. :func:`as_matmul` gives such an op what AOTAutograd needs to
trace and differentiate it: a fake kernel of the product's shape and the product's
gradients (``grad @ w.T`` and ``x.T @ grad``), so the op behaves as a matmul in every plan.
"""

from __future__ import annotations

import torch


def _fake(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], w.shape[1])


def _backward(ctx, grad: torch.Tensor):
    x, w = ctx.saved_tensors
    return grad @ w.t(), x.t() @ grad


def _save(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def as_matmul(op):
    """Register ``op``'s fake kernel and autograd as ``x @ w``'s (2-d ``x`` and ``w``);
    return ``op``."""
    op.register_fake(_fake)
    op.register_autograd(_backward, setup_context=_save)
    return op
