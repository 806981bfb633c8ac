"""Cost model: bytes per value (from shape and dtype) and runtime per node.

Bytes
    A saved tensor keeps its whole storage alive, so a value costs the ``nbytes`` of its
    storage (for a fresh result: numel x element size; for a view: its base's storage),
    the figure the activation meter (``refimpl.memory``) reports. Symbols cost nothing;
    tuples cannot be saved as such (their elements, reached through ``getitem``, can).
Runtime, two estimators (``PartitionOptions.runtime_estimator``)
    ``flops``    the FLOP table, ``refimpl.flops.formulas.count_flops``, on the node's fake
                 values (0 for ops the table does not list: pointwise, views, reductions).
    ``profile``  the least wall time of the node run alone (``repeats`` runs after a
                 warm-up), on its own device, on random inputs of the recorded shapes
                 (synchronising CUDA around each run). The least, not the median: other
                 work on the machine only ever adds time, so the minimum is the op's own.
                 Nodes that make the same call (op, and each argument's shape, strides,
                 dtype and device, or value) are timed once and share the figure: the same
                 work costs the same, so noise cannot rank two identical matmuls apart and
                 flip a plan on a busy machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_map


def is_sym(val: Any) -> bool:
    return isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool)


def is_savable(val: Any) -> bool:
    """A tensor or a symbol can be handed to the backward graph; a tuple cannot."""
    return isinstance(val, torch.Tensor) or is_sym(val)


def value_bytes(val: Any) -> int:
    """Storage bytes a value keeps alive (tuples: the sum over their tensors)."""
    if isinstance(val, torch.Tensor):
        try:
            return int(val.untyped_storage().nbytes())
        except (NotImplementedError, RuntimeError):  # e.g. sparse or nested layouts
            return val.numel() * val.element_size()
    if isinstance(val, list | tuple):
        return sum(value_bytes(v) for v in val)
    return 0


def _meta_args(node: fx.Node) -> tuple[tuple, dict]:
    """The node's args and kwargs with every input node replaced by its ``meta['val']``."""
    to_val = lambda a: a.meta.get("val") if isinstance(a, fx.Node) else a
    return tree_map(to_val, node.args), tree_map(to_val, node.kwargs)


def flops_runtime(node: fx.Node) -> float:
    """FLOPs of one call_function node, from the FLOP table (0 for unlisted ops)."""
    from refimpl.flops.formulas import count_flops

    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return 0.0
    args, kwargs = _meta_args(node)
    return float(count_flops(node.target, args, kwargs, node.meta.get("val")))


def _materialise(val: Any) -> Any:
    """A real tensor with the shape, strides, dtype and device of a fake one."""
    if not isinstance(val, torch.Tensor):
        return val
    real = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)
    if real.is_floating_point() or real.is_complex():
        return real.normal_()
    return real.zero_()


def _sync(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_runtime(node: fx.Node, repeats: int = 5) -> float:
    """Least seconds of the node run alone on random inputs (0 for non-op nodes)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return 0.0
    fake_args, fake_kwargs = _meta_args(node)
    args, kwargs = tree_map(_materialise, fake_args), tree_map(_materialise, fake_kwargs)
    val = node.meta.get("val")
    device = val.device if isinstance(val, torch.Tensor) else None
    times = []
    try:
        for _ in range(repeats + 1):  # the first run warms caches and is dropped
            _sync(device)
            start = time.perf_counter()
            node.target(*args, **kwargs)
            _sync(device)
            times.append(time.perf_counter() - start)
    except Exception as exc:
        raise RuntimeError(f"runtime_estimator='profile' could not time node {node.name} "
                           f"({node.target}): {exc}") from exc
    return min(times[1:])


def call_signature(node: fx.Node) -> tuple:
    """What a node's run time depends on: its op and, per argument, a tensor's shape, strides,
    dtype and device, or the value itself."""
    def describe(val: Any) -> Any:
        if isinstance(val, torch.Tensor):
            return ("tensor", tuple(val.shape), tuple(val.stride()), val.dtype, str(val.device))
        return repr(val)

    args, kwargs = _meta_args(node)
    return (node.op, str(node.target), repr(tree_map(describe, (args, sorted(kwargs.items())))))


def shared_profile(repeats: int) -> Callable[[fx.Node], float]:
    """:func:`profile_runtime`, timed once per :func:`call_signature` and shared."""
    timed: dict[tuple, float] = {}

    def estimate(node: fx.Node) -> float:
        key = call_signature(node)
        if key not in timed:
            timed[key] = profile_runtime(node, repeats)
        return timed[key]

    return estimate


def runtime_estimator(name: str, repeats: int = 5) -> Callable[[fx.Node], float]:
    """The per-node runtime function for ``PartitionOptions.runtime_estimator``."""
    if name == "flops":
        return flops_runtime
    if name == "profile":
        return shared_profile(repeats)
    raise ValueError(f"runtime_estimator={name!r} is not one of flops, profile")
