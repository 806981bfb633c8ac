"""Property: nothing a checkpoint recomputes outlives the backward that needed it.

A checkpoint trades memory for compute: the backward recomputes what the forward dropped,
uses it, and lets it go. A recomputed tensor still alive after the backward (held by the
checkpoint, or by a reference cycle through the recomputation's own autograd graph) is
memory the checkpoint was meant to save, kept for the life of the process.

Expectation (the unwrapped model, run the same way): a dispatch mode entered around
``loss.backward()`` records a weak reference to the storage of every tensor an op makes in
the backward (the recomputation's ops included). After the backward, with the loss and
the graph released (by reference counts alone: a storage kept by a reference cycle waits for
the garbage collector, and counts as kept), the storages still alive are exactly those of
the parameters, buffers and input and of their gradients (views and detached aliases of
them share those storages): the unwrapped model leaves nothing else (checked on each
example too), and the checkpointed model, on a drawn module stack
(``module_stacks(featured=True)``: dropouts, in-place layers, batchnorms, forks, nested
and shared checkpointed modules), must leave nothing else either.

Reach (each example): the checkpointed backward makes more tensors than the unwrapped one
(it recomputes).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from hypothesis import assume, given
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from refimpl.expect.checkpoint import COMPOSABLE, loss, wrapped
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.modules import ModuleStack, MultiInput, module_stacks


class _Made(TorchDispatchMode):
    """Records (op name, weak reference to the storage) of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, weakref.ref]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.made.append((str(func), weakref.ref(t.untyped_storage())))
        return out


def _left_alive(model: nn.Module, x: torch.Tensor) -> tuple[list[str], int]:
    """The ops whose storages, made in the backward of one step, outlive it other than as
    the storage of a parameter, a buffer, the input or a gradient (a view or a detached
    alias of those shares their storage); and how many tensors the backward made."""
    x = x.detach().clone().requires_grad_()
    torch.manual_seed(7)
    out = loss(model, x)
    made = _Made()
    with made:
        out.backward()
    del out
    held = [*model.parameters(), *model.buffers(), x]
    kept = {t.untyped_storage().data_ptr()
            for t in (*held, *(h.grad for h in held if h.grad is not None))}
    left = [name for name, ref in made.made
            if (storage := ref()) is not None and storage.data_ptr() not in kept]
    return left, len(made.made)


@given(stack=module_stacks(max_layers=3, featured=True))
def test_nothing_recomputed_outlives_the_backward(refimpl_backend, stack: ModuleStack) -> None:
    promise = getattr(refimpl_backend, "checkpoint_promise", None) or COMPOSABLE
    if not promise.nested_inputs:  # a tuple input, which such a backend does not support
        plain = stack.build()
        assume(not any(isinstance(plain.get_submodule(p), MultiInput)
                       for p in stack.checkpointed))
    x = stack.example_input()
    unwrapped, plain_made = _left_alive(stack.build(), x)
    apply = component(refimpl_backend, "checkpoint")
    left, made = _left_alive(wrapped(stack, apply).model, x)
    reach(made > plain_made)
    assert not unwrapped, f"expectation: the unwrapped model's backward leaves {unwrapped}"
    assert not left, (f"{refimpl_backend.name} checkpoint on {stack.checkpointed}: tensors "
                      f"made in the backward outlive it (ops {left}); the unwrapped model "
                      "leaves only its gradients")
