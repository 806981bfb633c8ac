"""Runtime per node: the two estimators of ``PartitionOptions.runtime_estimator``.

``flops``    the FLOP table (:func:`refimpl.partition.cost.flops_runtime`).
``profile``  the node run alone on its own device, on random inputs of the recorded shapes,
             timed as torch's "profile" estimator times it (:func:`time_call`): a warm-up
             run, then repeated timed runs, and the least of them. On CUDA the runs are
             timed on the device with CUDA events, each after flushing the L2 cache,
             ``repeats`` of them and then as many as fit in 25 ms (at most 100), as torch's
             GPU benchmarker does; on CPU, ``repeats`` runs on the host clock. Cheap ops
             (pointwise, views, factories) are not timed: recomputing one costs 0 under
             either estimator (``refimpl.partition.fx_edge``), as torch's knapsack prices
             only the ops its min-cut will not recompute, so a plan never trades a matmul
             against a cosine's measured microseconds.
             Nodes that make the same call (op, and each argument's shape, strides, dtype and
             device, or value) are timed once and share the figure (:func:`shared_profile`):
             the same work costs the same, so noise cannot rank two identical matmuls apart
             and flip a plan on a busy machine.
Invariant: an estimate is a non-negative number of seconds (profile) or FLOPs (flops); the
partitioner compares estimates of one estimator only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils._mode_utils import no_dispatch
from torch.utils._pytree import tree_leaves, tree_map

from refimpl.partition.cost import flops_runtime, meta_args


def _materialise(val: Any, device: torch.device | None) -> Any:
    """A real tensor with the shape, strides, dtype and device of a fake one (its
    ``device``: a hinted value is on ``meta``)."""
    if not isinstance(val, torch.Tensor):
        return val
    real = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=device)
    if real.is_floating_point() or real.is_complex():
        return real.normal_()
    return real.zero_()


def _device_of(val: Any, default: torch.device | None) -> torch.device | None:
    """Where a hinted value really lives: its own device, unless it is a hinted ``meta``
    stand-in (then the node's output device, ``default``)."""
    if isinstance(val, torch.Tensor) and not val.is_meta:
        return val.device
    return default or torch.device("cpu")


#: torch's GPU benchmarker (``InductorBenchmarker.benchmark_gpu``): after the estimating
#: runs, at most this many timed runs, within this many milliseconds.
CUDA_RUNS = 100
CUDA_BUDGET_MS = 25.0
#: the L2 flush buffer's size where the device does not report its L2 (torch's fallback).
FALLBACK_L2_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class EventClock:
    """What the device benchmark needs of a device, as torch's uses CUDA's: ``select(device)``
    makes it current (a context manager), ``synchronize()`` waits for its queued work,
    ``event()`` makes a timing event (``record()``; ``start.elapsed_time(end)`` in
    milliseconds), ``l2_bytes(device)`` is its L2 cache size (0 where unknown)."""

    select: Callable[[torch.device], ContextManager]
    synchronize: Callable[[], None]
    event: Callable[[], Any]
    l2_bytes: Callable[[torch.device], int]


def _cuda_l2_bytes(device: torch.device) -> int:
    """The device's L2 cache in bytes (every CUDA device reports it)."""
    return torch.cuda.get_device_properties(device).L2_cache_size


CUDA_CLOCK = EventClock(select=torch.cuda.device, synchronize=torch.cuda.synchronize,
                        event=lambda: torch.cuda.Event(enable_timing=True),
                        l2_bytes=_cuda_l2_bytes)
#: device type -> the clock its nodes are timed on (:func:`_time_on_events`); a device type
#: not here is timed on the host clock. A test adds a fake clock under ``cpu`` to run the
#: device benchmark without a GPU.
EVENT_CLOCKS: dict[str, EventClock] = {"cuda": CUDA_CLOCK}


def time_call(call: Callable[[], Any], device: torch.device | None, repeats: int) -> float:
    """Seconds ``call`` takes: the least of repeated timed runs after one warm-up run.

    The statistic is the minimum, as torch's "profile" estimator takes it: work that other
    processes put on the machine or the device only ever lengthens a run, so the least run
    is the op's own time, while a median moves with the load. On CUDA the runs are timed
    on the device (:func:`_time_on_events`): the host clock around one launch and a
    synchronise measures launch latency as much as the kernel, comparable with a small
    kernel on a fast GPU, which squeezes the ratios between ops that a plan rests on."""
    clock = EVENT_CLOCKS.get(device.type) if device is not None else None
    if clock is not None:
        with clock.select(device):
            return _time_on_events(call, device, repeats, clock)
    call()  # warm-up: caches, lazy initialisation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _time_on_events(call: Callable[[], Any], device: torch.device, repeats: int,
                    clock: EventClock) -> float:
    """torch's GPU benchmark: synchronise, one warm-up run; ``repeats`` estimating runs,
    then as many more as fit in CUDA_BUDGET_MS by the estimate (1 to CUDA_RUNS) after
    CUDA_RUNS cache flushes; each run timed with a pair of device events after zeroing a
    buffer the size of the L2 cache (the op reads its inputs from memory, as in a graph
    where other ops ran between). Returns the least run, in seconds."""
    clock.synchronize()
    call()
    clock.synchronize()
    l2_bytes = clock.l2_bytes(device)
    flush = torch.empty((l2_bytes or FALLBACK_L2_BYTES) // 4, dtype=torch.int, device=device)
    estimate = min(_event_times(call, flush, repeats, clock))
    runs = CUDA_RUNS if estimate <= 0 else max(1, min(CUDA_RUNS,
                                                      int(CUDA_BUDGET_MS // estimate)))
    for _ in range(CUDA_RUNS):
        flush.zero_()
    return min(estimate, *_event_times(call, flush, runs, clock)) / 1000.0


def _event_times(call: Callable[[], Any], flush: torch.Tensor, runs: int,
                 clock: EventClock) -> list[float]:
    """Milliseconds of each of ``runs`` runs of ``call``, between two device events recorded
    on the current stream, each run after zeroing ``flush``; one synchronise at the end."""
    pairs = [(clock.event(), clock.event()) for _ in range(runs)]
    for start, end in pairs:
        flush.zero_()
        start.record()
        call()
        end.record()
    clock.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def profile_runtime(node: fx.Node, repeats: int) -> float:
    """Seconds of the node run alone on random inputs of its recorded shapes, timed by
    :func:`time_call` (0 for non-op nodes)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return 0.0
    fake_args, fake_kwargs = meta_args(node)
    outputs = [t for t in tree_leaves(node.meta.get("val")) if isinstance(t, torch.Tensor)]
    device = outputs[0].device if outputs else None  # a tuple's too (e.g. a backward op's)
    real = lambda a: _materialise(a, _device_of(a, device))
    # the partitioner runs inside AOTAutograd's fake mode: without leaving it, "real"
    # tensors would be fake ones, and the timing that of fake dispatch (no kernel runs)
    with no_dispatch():
        args, kwargs = tree_map(real, fake_args), tree_map(real, fake_kwargs)
        try:
            return time_call(lambda: node.target(*args, **kwargs), device, repeats)
        except Exception as exc:
            raise RuntimeError(f"runtime_estimator='profile' could not time node "
                               f"{node.name} ({node.target}): {exc}") from exc


def call_signature(node: fx.Node) -> tuple:
    """What a node's run time depends on: its op and, per argument, a tensor's shape, strides,
    dtype and device, or the value itself."""
    def describe(val: Any) -> Any:
        if isinstance(val, torch.Tensor):
            return ("tensor", tuple(val.shape), tuple(val.stride()), val.dtype, str(val.device))
        return repr(val)

    args, kwargs = meta_args(node)
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


def runtime_estimator(name: str, repeats: int) -> Callable[[fx.Node], float]:
    """The per-node runtime function for ``PartitionOptions.runtime_estimator`` (``name``:
    "flops" or "profile", as :class:`PartitionOptions` has checked)."""
    return flops_runtime if name == "flops" else shared_profile(repeats)
