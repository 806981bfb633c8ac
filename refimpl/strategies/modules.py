"""Random module stacks for the checkpoint wrapper: ``module_stacks()``.

A drawn :class:`ModuleStack` is plain data: the activation shape ``(batch, channels, length)``,
a tuple of :class:`Layer` specs, a random subset of module paths to checkpoint, and a seed.
``build()`` turns it into an ``nn.Sequential`` (the same weights for the same seed), so a
property can build the plain model and a twin to wrap.

Layer kinds (every one maps ``(B, C, L)`` to ``(B, C, L)``):

| kind      | module |
| --------- | ------ |
| linear    | ``nn.Linear(L, L)`` on the last dim |
| conv      | ``nn.Conv1d(C, C, k, padding=k // 2)``, k odd |
| relu/gelu | the activation |
| dropout   | ``nn.Dropout(p)`` |
| layernorm | ``nn.LayerNorm(L)`` |
| batchnorm | ``nn.BatchNorm1d(C)``: buffers (running statistics) the forward updates |
| frozen    | ``nn.Linear(L, L)`` whose parameters do not require grad |
| fork      | ``Sequential(MultiOutput, MultiInput)``: two outputs feeding a tuple input |
| group     | a nested ``Sequential`` of 1-3 layers (nested checkpoints) |
| shared    | the module object of an earlier top-level linear layer, used again |

``stacks_with_buffers()`` draws a stack and appends a checkpointed group that holds a batchnorm,
so every example has buffers a recomputation updates.

Invariant: every path in ``checkpointed`` names a distinct module object of the built stack
(a shared module is named once, by its first path), so checkpointing them all is valid.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st
from torch import nn

__all__ = ["KINDS", "Layer", "ModuleStack", "module_stacks", "stacks_with_buffers"]

_LEAF_KINDS = ("linear", "conv", "relu", "gelu", "dropout", "layernorm", "batchnorm", "frozen",
               "fork")
KINDS = (*_LEAF_KINDS, "group", "shared")


@dataclass(frozen=True)
class Layer:
    """One layer: ``arg`` is the conv kernel, dropout p in tenths, or the shared layer's index."""

    kind: str
    arg: int = 0
    children: tuple[Layer, ...] = ()


class MultiOutput(nn.Module):
    """x -> (sin(linear(x)), cos(x)): two outputs, so two gradients flow back into one call."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.linear = nn.Linear(length, length)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x).sin(), x.cos()


class MultiInput(nn.Module):
    """(a, b) -> a * b + linear(b): one call with two tensor inputs (a tuple)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.linear = nn.Linear(length, length)

    def forward(self, xs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        a, b = xs
        return a * b + self.linear(b)


@dataclass(frozen=True)
class ModuleStack:
    """A drawn stack: shapes, layers, the paths to checkpoint, and the seed of its weights."""

    batch: int
    channels: int
    length: int
    layers: tuple[Layer, ...]
    checkpointed: tuple[str, ...]
    seed: int

    def build(self) -> nn.Sequential:
        """The stack as modules, weights drawn from ``seed``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            built: list[nn.Module] = []
            for layer in self.layers:
                built.append(built[layer.arg] if layer.kind == "shared"
                             else self._module(layer))
        return nn.Sequential(*built)

    def _module(self, layer: Layer) -> nn.Module:
        c, n = self.channels, self.length
        if layer.kind == "group":
            return nn.Sequential(*(self._module(child) for child in layer.children))
        factories = {
            "linear": lambda: nn.Linear(n, n),
            "conv": lambda: nn.Conv1d(c, c, layer.arg, padding=layer.arg // 2),
            "relu": nn.ReLU, "gelu": nn.GELU,
            "dropout": lambda: nn.Dropout(layer.arg / 10),
            "layernorm": lambda: nn.LayerNorm(n),
            "batchnorm": lambda: nn.BatchNorm1d(c),
            "frozen": lambda: nn.Linear(n, n).requires_grad_(False),
            "fork": lambda: nn.Sequential(MultiOutput(n), MultiInput(n)),
        }
        return factories[layer.kind]()

    def example_input(self) -> torch.Tensor:
        """A ``(batch, channels, length)`` input that requires grad, drawn from ``seed``."""
        g = torch.Generator().manual_seed(self.seed + 1)
        shape = (self.batch, self.channels, self.length)
        return torch.randn(shape, generator=g).requires_grad_()


def candidate_paths(layers: tuple[Layer, ...], prefix: str = "") -> list[str]:
    """Paths of the distinct modules a stack of ``layers`` may checkpoint (shared ones once)."""
    paths: list[str] = []
    for i, layer in enumerate(layers):
        path = f"{prefix}{i}"
        if layer.kind == "shared":
            continue
        paths.append(path)
        if layer.kind == "fork":
            paths += [f"{path}.0", f"{path}.1"]
        if layer.kind == "group":
            paths += candidate_paths(layer.children, f"{path}.")
    return paths


def _layer_at(layers: tuple[Layer, ...], path: str) -> Layer:
    """The layer a candidate path names (``"2.0"``: child 0 of layer 2; a fork's children are
    its two modules, reported as the fork itself)."""
    head, _, tail = path.partition(".")
    layer = layers[int(head)]
    return _layer_at(layer.children, tail) if tail and layer.kind == "group" else layer


@st.composite
def _leaf(draw: st.DrawFn) -> Layer:
    kind = draw(st.sampled_from(_LEAF_KINDS))
    arg = {"conv": lambda: draw(st.sampled_from([1, 3, 5])),
           "dropout": lambda: draw(st.integers(0, 5))}.get(kind, lambda: 0)()
    return Layer(kind, arg)


_group = st.lists(_leaf(), min_size=1, max_size=3).map(lambda ls: Layer("group", 0, tuple(ls)))


@st.composite
def _layers(draw: st.DrawFn, max_layers: int) -> tuple[Layer, ...]:
    layers: list[Layer] = []
    for _ in range(draw(st.integers(1, max_layers))):
        linears = [i for i, layer in enumerate(layers) if layer.kind == "linear"]
        options = [_leaf(), _group] + ([st.sampled_from(linears).map(
            lambda i: Layer("shared", i))] if linears else [])
        layers.append(draw(st.one_of(*options)))
    return tuple(layers)


@st.composite
def module_stacks(draw: st.DrawFn, max_layers: int = 5, max_checkpointed: int = 4,
                  include_root: bool = True) -> ModuleStack:
    """A random :class:`ModuleStack` with a random, non-empty subset of modules checkpointed.

    ``include_root`` lets the whole stack (path ``""``) be one of the checkpointed modules.
    """
    if max_layers < 1 or max_checkpointed < 1:
        raise ValueError(f"max_layers={max_layers} and max_checkpointed={max_checkpointed} "
                         "must both be >= 1")
    layers = draw(_layers(max_layers))
    paths = candidate_paths(layers) + ([""] if include_root else [])
    # A call of several ops is what a checkpoint saves on: one is drawn first where there is
    # one (a group, a fork, or the root), so most stacks strictly drop bytes.
    composite = [p for p in paths if p == "" or _layer_at(layers, p).kind in ("group", "fork")]
    first = draw(st.sampled_from(composite or paths))
    rest = draw(st.lists(st.sampled_from(paths), max_size=min(max_checkpointed, len(paths)) - 1,
                         unique=True))
    chosen = {first, *rest}
    return ModuleStack(batch=draw(st.integers(1, 3)), channels=draw(st.integers(1, 3)),
                       length=draw(st.integers(2, 6)), layers=layers,
                       checkpointed=tuple(sorted(chosen)), seed=draw(st.integers(0, 2**16)))


@st.composite
def stacks_with_buffers(draw: st.DrawFn, max_layers: int = 4) -> ModuleStack:
    """A :func:`module_stacks` stack with one more top-level layer: a checkpointed group whose
    first layer is a batchnorm (then one more leaf), so a recomputation re-runs a forward that
    updates buffers."""
    stack = draw(module_stacks(max_layers=max_layers))
    group = Layer("group", 0, (Layer("batchnorm"), draw(_leaf())))
    path = str(len(stack.layers))
    return replace(stack, layers=(*stack.layers, group),
                   checkpointed=tuple(sorted({*stack.checkpointed, path})))
