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
| inplace   | ``InPlace``: sin of a linear, then scaled and rectified in place |
| group     | a nested ``Sequential`` of 1-3 layers (nested checkpoints) |
| shared    | the module object of an earlier top-level linear layer, used again |

``stacks_with_buffers()`` draws a stack and appends a checkpointed group that holds a batchnorm,
so every example has buffers a recomputation updates.

Invariant: every path in ``checkpointed`` names a distinct module object of the built stack
(a shared module is named once, by its first path), so checkpointing them all is valid.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st
from torch import nn

from refimpl.strategies.features import Feature

__all__ = ["AMBIENTS", "FEATURES", "INPUT", "KINDS", "POLICIES", "Layer", "ModuleStack",
           "checkpointed_reads", "module_stacks", "stacks_with_buffers"]

_LEAF_KINDS = ("linear", "conv", "relu", "gelu", "dropout", "layernorm", "batchnorm", "frozen",
               "fork", "inplace")
KINDS = (*_LEAF_KINDS, "group", "shared")
#: what a step may run under (``ModuleStack.ambient`` holds a subset, entered in this order):
#: CPU autocast (bfloat16), an observing torch-function mode, outer saved-tensor hooks that
#: copy what they pack
AMBIENTS = ("autocast", "function_mode", "saved_hooks")
#: the selective-checkpoint policy (``ModuleStack.policy``): none, or keep the matmuls' outputs
POLICIES = ("none", "save_matmuls")
#: the name ``ModuleStack.changed`` gives the model's input (the others are parameter names)
INPUT = "input"


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


class InPlace(nn.Module):
    """sin(linear(x)), then ``mul_(0.5)`` and ``relu_()`` on that intermediate: in-place ops
    inside a call, never on its input, nor on a matmul's output (which a selective policy
    may keep, and torch's selective checkpoint forbids changing what it keeps)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.linear = nn.Linear(length, length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x).sin()
        h.mul_(0.5)
        return h.relu_()


@dataclass(frozen=True)
class ModuleStack:
    """A drawn stack: shapes, layers, the paths to checkpoint, and the seed of its weights;
    what a step runs under (a subset of :data:`AMBIENTS`), the selective policy (one of
    :data:`POLICIES`), and the tensors (parameter names, :data:`INPUT`) to change in place
    between the forward and the backward."""

    batch: int
    channels: int
    length: int
    layers: tuple[Layer, ...]
    checkpointed: tuple[str, ...]
    seed: int
    ambient: tuple[str, ...] = ()
    policy: str = "none"
    changed: tuple[str, ...] = ()

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
            "inplace": lambda: InPlace(n),
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


#: kinds drawn twice as often as the others: random numbers and in-place ops inside a call
_FAVOURED = ("dropout", "inplace")


@st.composite
def _leaf(draw: st.DrawFn) -> Layer:
    kind = draw(st.sampled_from(_LEAF_KINDS + _FAVOURED))
    arg = {"conv": lambda: draw(st.sampled_from([1, 3, 5])),
           "dropout": lambda: draw(st.integers(1, 5))}.get(kind, lambda: 0)()
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
                  include_root: bool = True, contexts: bool = False,
                  changes: bool = False, featured: bool = False) -> ModuleStack:
    """A random :class:`ModuleStack` with a random, non-empty subset of modules checkpointed.

    ``include_root`` lets the whole stack (path ``""``) be one of the checkpointed modules;
    ``contexts`` draws ``ambient`` and ``policy`` (else none); ``changes`` draws ``changed``
    (:func:`_changes`; else empty); ``featured`` appends, each half the time, a checkpointed
    group that starts with a dropout (p > 0) and one that starts with an ``InPlace`` layer.
    What varies on its own (contexts, appended groups) is drawn first, so it does not move
    with the layers' draws.
    """
    if max_layers < 1 or max_checkpointed < 1:
        raise ValueError(f"max_layers={max_layers} and max_checkpointed={max_checkpointed} "
                         "must both be >= 1")
    # drawn first: the contexts vary on their own, not with the layers' mutations
    ambient = tuple(a for a in AMBIENTS if draw(st.booleans())) if contexts else ()
    policy = draw(st.sampled_from(POLICIES)) if contexts else "none"
    appended = [Layer("group", 0, (Layer(kind, draw(st.integers(1, 5)) if kind == "dropout"
                                         else 0), draw(_leaf())))
                for kind in ("dropout", "inplace") if featured and draw(st.booleans())]
    layers = draw(_layers(max_layers))
    paths = candidate_paths(layers) + ([""] if include_root else [])
    # A call of several ops is what a checkpoint saves on: one is drawn first where there is
    # one (a group, a fork, or the root), so most stacks strictly drop bytes.
    composite = [p for p in paths if p == "" or _layer_at(layers, p).kind in ("group", "fork")]
    first = draw(st.sampled_from(composite or paths))
    # Half the time a module inside the first is checkpointed too (nested checkpoints).
    inner = [p for p in paths if p != first and (first == "" or p.startswith(first + "."))]
    nested = [draw(st.sampled_from(inner))] \
        if inner and max_checkpointed > 1 and draw(st.booleans()) else []
    rest = draw(st.lists(st.sampled_from(paths), max_size=min(max_checkpointed, len(paths))
                         - 1 - len(nested), unique=True))
    stack = ModuleStack(batch=draw(st.integers(1, 3)), channels=draw(st.integers(1, 3)),
                        length=draw(st.integers(2, 6)), layers=layers,
                        checkpointed=tuple(sorted({first, *nested, *rest})),
                        seed=draw(st.integers(0, 2**16)))
    stack = replace(stack, ambient=ambient, policy=policy)
    if appended:
        paths = [str(len(layers) + i) for i in range(len(appended))]
        stack = replace(stack, layers=(*layers, *appended),
                        checkpointed=tuple(sorted({*stack.checkpointed, *paths})))
    return replace(stack, changed=draw(_changes(stack))) if changes else stack


def checkpointed_reads(stack: ModuleStack) -> set[str]:
    """What the checkpointed calls read from outside, by the names ``changed`` uses: the
    parameters of each checkpointed module, and :data:`INPUT` where a checkpointed call is the
    root or a first layer all the way down (it is handed the model's input itself)."""
    names = [n for n, _ in stack.build().named_parameters()]
    reads = {n for n in names for p in stack.checkpointed if p == "" or n.startswith(p + ".")}
    if any(p == "" or set(p.split(".")) == {"0"} for p in stack.checkpointed):
        reads.add(INPUT)
    return reads


@st.composite
def _changes(draw: st.DrawFn, stack: ModuleStack) -> tuple[str, ...]:
    """Names to change in place between forward and backward: mostly one that a
    checkpointed call reads first, then up to two of any; in 1 of 10 none."""
    if draw(st.integers(0, 9)) == 9:  # the simplest draw (0) changes something
        return ()
    names = [INPUT, *(n for n, _ in stack.build().named_parameters())]
    first = draw(st.sampled_from(sorted(checkpointed_reads(stack)) or names))
    rest = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    return tuple(dict.fromkeys([first, *rest]))


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


# -- the features the checkpoint properties must draw (refimpl.strategies.features) --------

def _inside_checkpoint(stack: ModuleStack, path: str) -> bool:
    return any(p == "" or path == p or path.startswith(p + ".") for p in stack.checkpointed)


def _layer_paths(layers: tuple[Layer, ...], prefix: str = "") -> list[tuple[str, Layer]]:
    found: list[tuple[str, Layer]] = []
    for i, layer in enumerate(layers):
        found.append((f"{prefix}{i}", layer))
        found += _layer_paths(layer.children, f"{prefix}{i}.")
    return found


def checkpoints_a(stack: ModuleStack, kind: str, least_arg: int = 0) -> bool:
    """Whether a checkpointed call holds a layer of ``kind`` with ``arg >= least_arg``."""
    return any(layer.kind == kind and layer.arg >= least_arg and _inside_checkpoint(stack, path)
               for path, layer in _layer_paths(stack.layers))


def nests_checkpoints(stack: ModuleStack) -> bool:
    """Whether a checkpointed path lies inside another one (the root is around every path)."""
    return any(q != p and (q == "" or p.startswith(q + "."))
               for p in stack.checkpointed for q in stack.checkpointed)


def changes_what_a_checkpoint_reads(stack: ModuleStack) -> bool:
    return bool(checkpointed_reads(stack).intersection(stack.changed))


_GRADIENTS = "test_checkpoint_properties.py::test_gradients_and_rng_match_unwrapped"
_CONTEXTS = functools.partial(module_stacks, contexts=True, featured=True)


def _feature(name: str, meaning: str, detect, strategy=_CONTEXTS, used_by=_GRADIENTS):
    return Feature("checkpoint", name, meaning, strategy, detect, used_by)


FEATURES = (
    _feature("rng_cpu", "a checkpointed call draws random numbers on the CPU (dropout, p > 0)",
             lambda s: checkpoints_a(s, "dropout", 1)),
    _feature("rng_cuda", "the same, on a CUDA device (faked on a machine without one)",
             lambda s: checkpoints_a(s, "dropout", 1),
             strategy=functools.partial(module_stacks, featured=True),
             used_by="test_checkpoint_fake_cuda.py::test_cuda_generator_restored_fake_device"),
    _feature("autocast", "the forward runs under CPU autocast (bfloat16)",
             lambda s: "autocast" in s.ambient),
    _feature("function_mode", "the forward runs under a torch-function mode",
             lambda s: "function_mode" in s.ambient),
    _feature("saved_tensor_hooks", "the forward runs under outer saved-tensor hooks",
             lambda s: "saved_hooks" in s.ambient),
    _feature("inplace", "a checkpointed call runs in-place ops on its intermediates",
             lambda s: checkpoints_a(s, "inplace")),
    _feature("nested", "a checkpointed module inside another checkpointed one",
             nests_checkpoints),
    _feature("selective", "a selective policy keeps the matmuls' outputs",
             lambda s: s.policy == "save_matmuls"),
    _feature("changed", "a tensor a checkpointed call reads is changed in place between the "
             "forward and the backward", changes_what_a_checkpoint_reads,
             strategy=functools.partial(module_stacks, changes=True),
             used_by="test_checkpoint_changed.py::"
                     "test_changed_between_forward_and_backward_as_eager"),
)
