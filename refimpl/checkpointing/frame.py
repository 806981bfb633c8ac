"""One checkpointed call: drop what the forward saves, recompute it on first unpack.

Algorithm
    1. Keep the inputs. The call's tensor inputs (every pytree leaf of args and kwargs) are
       saved by :class:`_SaveInputs`, a no-op autograd Function applied *before* the dropping
       hooks are pushed: they go through autograd's ordinary saved-tensor mechanism, so outer
       saved-tensor hooks (an enclosing checkpoint, a memory meter, offloading) see them.
    2. Drop (``drop_pack``). Inside the forward, every tensor autograd saves is replaced by an
       empty :class:`_Holder`; the frame keeps a weak reference to it and the tensor's
       metadata (shape, dtype, device).
    3. Recompute (``unpack``). The first unpack in a backward (keyed by the graph task id)
       checks that nothing the forward read from outside was changed in place since
       (:mod:`~refimpl.checkpointing.versions`), unpacks the inputs, replays RNG and autocast
       state and reruns the module with ``recompute_pack`` on top: the i-th tensor saved now
       is the i-th tensor saved in the forward, and is put into the i-th holder if that holder
       is still alive. With early stop the rerun ends as soon as every holder is served.
    4. Check. The rerun must have saved as many tensors as the forward, with equal metadata
       (unless ``determinism_check="none"``); else a CheckpointError, with both op logs when
       ``debug=True``.
    5. Each unpack hands out its holder's tensor and forgets it (a second unpack in the same
       backward is an error), so recomputed tensors live no longer than the backward needs.

Invariant: between forward and backward the frame holds only the inputs (through outer
hooks), per-tensor metadata and weak references with versions; the backward sees tensors
equal to those the forward saved.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from refimpl.checkpointing import debug as debug_mode
from refimpl.checkpointing import replay
from refimpl.checkpointing.options import CheckpointError, CheckpointOptions
from refimpl.checkpointing.versions import Reads


class _StopRecomputation(Exception):
    """Raised by ``recompute_pack`` once every dropped tensor has been recomputed."""


class _Holder:
    """What autograd keeps in place of a dropped tensor: graph task id -> recomputed tensor."""

    __slots__ = ("__weakref__", "values")

    def __init__(self) -> None:
        self.values: dict[int, torch.Tensor] = {}


class _SaveInputs(torch.autograd.Function):
    """A no-op whose only effect is ``save_for_backward(*inputs)`` under the outer hooks."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(*tensors)
        return anchor.new_empty(0)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> Any:
        raise CheckpointError("internal error: the checkpoint's input saver was differentiated")


def _metadata(t: torch.Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), t.dtype, t.device)


def _graph_task_id() -> int:
    gid = torch._C._current_graph_task_id()
    # Outside a backward (e.g. reading grad_fn._saved_self) every unpack is its own "backward".
    return uuid.uuid4().int if gid == -1 else gid


class Frame:
    """The saved inputs, the holders and the recomputation of one checkpointed call."""

    def __init__(self, run: Callable[..., Any], args: tuple, kwargs: dict,
                 options: CheckpointOptions, recompute_ctx: Any,
                 logs: debug_mode.OpLogs | None, reads: Reads) -> None:
        self.run, self.options, self.recompute_ctx, self.logs = run, options, recompute_ctx, logs
        self.reads = reads
        self.global_state = replay.capture((args, kwargs), options.preserve_rng_state)
        leaves, self.spec = tree_flatten((args, kwargs))
        self.tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.leaves = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        anchor = torch.empty(0, requires_grad=True)
        self.saver = _SaveInputs.apply(anchor, *(leaves[i] for i in self.tensor_at))
        self.holders: list[weakref.ref[_Holder]] = []
        self.metadata: list[tuple[Any, ...] | None] = []
        self.recomputed_for: set[int] = set()
        self.early_stop = options.early_stop and not options.debug

    def inputs(self) -> tuple[tuple, dict]:
        """The call's (args, kwargs), tensors unpacked through autograd (and outer hooks)."""
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, self.saver.grad_fn.saved_tensors):
            leaves[i] = t
        return tree_unflatten(leaves, self.spec)

    # -- step 2: the forward drops ------------------------------------------------------
    def drop_pack(self, tensor: torch.Tensor) -> _Holder:
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        self.metadata.append(_metadata(tensor) if self.checks else None)
        return holder

    @property
    def checks(self) -> bool:
        return self.options.determinism_check != "none"

    def dropping_hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.drop_pack, self.unpack)

    # -- steps 3 and 5: the backward recomputes and hands out ------------------------------
    def unpack(self, holder: _Holder) -> torch.Tensor:
        gid = _graph_task_id()
        if gid not in self.recomputed_for:
            self.recompute(gid)
        try:
            return holder.values.pop(gid)
        except KeyError:
            raise CheckpointError(
                "a tensor saved inside a checkpointed module was unpacked twice in one backward, "
                "or the recomputation did not produce it (determinism_check='none' hides the "
                "cause); unpack each saved tensor once per backward") from None

    def recompute(self, gid: int) -> None:
        """Rerun the call under the recomputation hooks; fill the live holders for ``gid``."""
        self.reads.check()
        args, kwargs = self.inputs()
        recomputed_metadata: list[tuple[Any, ...] | None] = []
        pack = self._recompute_pack(gid, recomputed_metadata)
        with contextlib.ExitStack() as stack:
            stack.enter_context(replay.replayed(self.global_state))
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t))
            stack.enter_context(torch.enable_grad())
            stack.enter_context(self.recompute_ctx)
            if self.logs is not None:
                self.logs.recompute.clear()
                stack.enter_context(debug_mode.OpLog(self.logs.recompute))
            stack.enter_context(contextlib.suppress(_StopRecomputation))
            self.run(*args, **kwargs)
        self.recomputed_for.add(gid)
        if self.checks:
            self._check(recomputed_metadata)

    def _recompute_pack(self, gid: int, seen: list) -> Callable[[torch.Tensor], torch.Tensor]:
        def pack(tensor: torch.Tensor) -> torch.Tensor:
            # Detached: the holder must not keep the recomputation's graph alive.
            tensor = tensor.detach() if tensor.requires_grad else tensor
            index = len(seen)
            seen.append(_metadata(tensor) if self.checks else None)
            if index >= len(self.holders):
                if not self.checks:  # determinism_check="none": extra saves are not needed
                    return tensor
                raise CheckpointError(self._message(
                    f"the recomputation saved more tensors than the forward "
                    f"({len(self.holders)})"))
            holder = self.holders[index]()
            if holder is not None:
                holder.values[gid] = tensor
            if self.early_stop and len(seen) == len(self.holders):
                raise _StopRecomputation
            return tensor

        return pack

    # -- step 4: the determinism check ----------------------------------------------------
    def _check(self, recomputed: list[tuple[Any, ...] | None]) -> None:
        if len(recomputed) != len(self.metadata):
            raise CheckpointError(self._message(
                f"a different number of tensors was saved in the forward ({len(self.metadata)}) "
                f"and in the recomputation ({len(recomputed)})"))
        wrong = [f"tensor {i}: forward saved {a}, recomputation saved {b}"
                 for i, (a, b) in enumerate(zip(self.metadata, recomputed))
                 if a != b and self.holders[i]() is not None]
        if wrong:
            raise CheckpointError(self._message(
                "recomputed tensors differ from the saved ones (shape, dtype, device):\n  "
                + "\n  ".join(wrong)))

    def _message(self, what: str) -> str:
        tip = debug_mode.explain(self.logs) if self.logs is not None else (
            "\npass debug=True to checkpoint(...) to see the ops of both runs; "
            "determinism_check='none' disables this check")
        return f"checkpoint: the recomputation is not deterministic: {what}.{tip}"


@contextlib.contextmanager
def forward_region(frame: Frame | None, forward_ctx: Any) -> Iterator[None]:
    """The body of a checkpointed forward: under the dropping hooks and the forward context.

    ``frame`` is None when grad mode is off: nothing is saved, so nothing is dropped.
    """
    if frame is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(frame.dropping_hooks())
        stack.enter_context(forward_ctx)
        if frame.logs is not None:
            stack.enter_context(debug_mode.OpLog(frame.logs.forward))
        yield
    frame.reads.settle()
    replay.check_cuda_not_initialized_during(frame.global_state)
