"""Which nn.Modules are running right now, in the forward and in the backward.

Algorithm. While the tracker is entered it holds two global module hooks:

- forward pre-hook: *enter* the module's name; then, on the inputs that require grad, a
  gradient hook that *leaves* the name when their gradients are computed (in the backward,
  the module's work ends when its inputs' gradients exist);
- forward hook: *leave* the name; then, on the outputs (any pytree) that require grad, a
  gradient hook that *enters* the name when their gradients are ready (the module's
  backward begins).

Both gradient hooks wait for all the non-leaf tensors; leaves are left out because torch's
all-gradients hook raises on them inside ``torch.autograd.grad`` (a tensor list of leaves
only waits for the first). This works under ``.backward()`` and ``autograd.grad`` alike.

The first backward hook of each backward pass queues a callback on the autograd engine
that resets the stack when that backward finishes.

Names (torch's ModuleTracker names modules the same way). A module seen for the first time
with no name yet is a root, named by its class (``ResNet``); the first time a module is seen,
each of its children is named by its parent's name and attribute (``ResNet.layer1.0.conv1``),
replacing any name the child had. So a module shared between parents ends with the name its
last-seen parent gave it (``Sequential(p1, p2)``, both holding ``shared``: ``shared`` is
``Sequential.1.0``), and a module's children keep the names they got when the module was
first seen. Names are not unique: two roots of one class, or a first root and a later child
whose path spells the same, share a name, and the modules that share a name share its
entry (their FLOPs add up) and its enter count (the name is active while any of them runs).

Invariant: :attr:`parents` always holds ``"Global"`` plus each name whose enter count
exceeds its leave count, so a module called re-entrantly (a shared block applied twice in a
nest) stays active until its outermost call leaves. On exit every hook is removed, also when
the body raised. One tracker is entered by one FlopCounterMode, which refuses to be entered
twice at once.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import register_multi_grad_hook
from torch.utils._pytree import tree_leaves

GLOBAL = "Global"


def _grad_tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor) and t.requires_grad]


def _when_grads_ready(tensors: list[torch.Tensor], fn: Any) -> Any:
    """Call ``fn`` in a backward once the gradients of ``tensors`` exist: all of the non-leaf
    ones; if every tensor is a leaf, the first of them. (The "all" mode of
    register_multi_grad_hook cannot inspect leaves during ``torch.autograd.grad``: it
    raises, so leaves go through the "any" mode, which inspects nothing.)"""
    inner = [t for t in tensors if t.grad_fn is not None]
    if inner:
        return register_multi_grad_hook(inner, fn)
    return register_multi_grad_hook(tensors, fn, mode="any")


class ModuleTracker:
    """Context manager; read :attr:`parents` (a set of names) while it is entered."""

    def __init__(self) -> None:
        self._active: Counter[str] = Counter()
        self._names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self._expanded: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        self._handles: list[Any] = []
        self._callback_queued = False

    @property
    def parents(self) -> set[str]:
        """``"Global"`` and every module whose forward or backward is running."""
        return {GLOBAL, *(name for name, depth in self._active.items() if depth > 0)}

    def name_of(self, module: nn.Module) -> str:
        """The module's path name (class name for a root), naming its children on first
        sight so that they get ``parent.attribute`` paths."""
        if module not in self._names:
            self._names[module] = type(module).__name__
        name = self._names[module]
        if module not in self._expanded:
            self._expanded.add(module)
            for child_name, child in module.named_children():
                self._names[child] = f"{name}.{child_name}"
                self.name_of(child)
        return name

    def _enter(self, name: str) -> None:
        self._active[name] += 1

    def _leave(self, name: str) -> None:
        if self._active[name] > 0:
            self._active[name] -= 1

    def _backward_hook(self, name: str, enter: bool):
        def hook(_grads: Any) -> None:
            self._reset_after_backward()
            (self._enter if enter else self._leave)(name)

        return hook

    def _reset_after_backward(self) -> None:
        if self._callback_queued:
            return

        def reset() -> None:
            self._active.clear()
            self._callback_queued = False

        torch.autograd.Variable._execution_engine.queue_callback(reset)
        self._callback_queued = True

    def _pre_hook(self, module: nn.Module, args: Any) -> None:
        name = self.name_of(module)
        self._enter(name)
        tensors = _grad_tensors(args)
        if tensors:
            hook = self._backward_hook(name, enter=False)
            self._handles.append(_when_grads_ready(tensors, hook))

    def _post_hook(self, module: nn.Module, args: Any, output: Any) -> None:
        name = self.name_of(module)
        self._leave(name)
        tensors = _grad_tensors(output)
        if tensors:
            hook = self._backward_hook(name, enter=True)
            self._handles.append(_when_grads_ready(tensors, hook))

    def __enter__(self) -> ModuleTracker:
        self._active.clear()
        self._handles = [nn.modules.module.register_module_forward_pre_hook(self._pre_hook),
                         nn.modules.module.register_module_forward_hook(self._post_hook)]
        return self

    def __exit__(self, *exc_info: Any) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        self._active.clear()
