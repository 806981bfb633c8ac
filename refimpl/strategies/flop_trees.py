"""Random trees of nested modules, for the FLOP counter's per-module properties: the
per-module attribution of every op family (:func:`module_trees`) and the report a user
reads, ``get_table`` (:func:`table_programs`).

**Module trees.** :func:`module_trees` draws a :class:`ModuleTree`: plain data describing a
tree of :class:`Block` containers (each runs its children in order) whose leaves are one-op
layers of the FLOP table's families (:data:`TREE_FAMILIES`), how it runs (:data:`RUN_MODES`:
forward and backward, forward only, under ``no_grad`` or ``inference_mode``) and which
container, if any, is wrapped by ``torch.compile``. ``build()`` makes the module, ``inputs()``
its input and ``run(model, x, mode)`` runs it in one of its modes.

Every leaf maps ``[batch, width_in]`` to ``[batch, width_out]``, reshaping inside for the
layers that need more axes (a convolution reads ``[batch, channels, length]``, attention
``[batch, heads, tokens, dim]``, an RNN ``[batch, steps, features]``), so any sequence of
leaves fits together. Leaves take their families from a drawn permutation of
:data:`TREE_FAMILIES`, in order, so every family is equally likely in every tree. Each tree
runs in two distinct modes of :data:`RUN_MODES` (drawn as the start of a permutation), and
torch.compile wraps no container or one (the root or one nested at any depth).

Module names (as a FLOP counter reports them): the root is ``Block`` (``OptimizedModule``
with child ``_orig_mod`` when the root is compiled), a child is its parent's name and its
index (``Block.1.0``), a compiled container adds ``._orig_mod`` under its own name, and a leaf
with an inner torch module (``nn.Linear``, ``nn.Conv1d``, ``nn.GRU``, ...) names it
``inner``. Sizes are small (a few thousand FLOPs).

**Table programs**, whose FLOP table shows every kind of row: :func:`table_programs` draws
a :class:`TableProgram`: matrix products (``mm``, ``addmm``, ``bmm``; :class:`MatCall`) run
outside every module (``"Global"`` only) and inside a few root modules, each a tree of
nested :class:`StageModule` containers (up to three levels of children) that run products
before and after their children. Products run on the meta device, so their sizes cost
nothing: a program draws a scale ``s`` (0-16) and each size on a log scale between
``2**(s-3)`` and ``2**s`` (a ``bmm``'s batch near ``2**(s // 2)``), so the global total
spans every unit of the table (none, thousands, ... trillions); one product in ten has an
empty inner dimension (0 FLOPs: a row of 0). One program in four is a single product whose
global total lies on the edge where the table's unit changes (``10 * 1000**p`` FLOPs, p = 0
to 5, past T) or 2 below it.

Names, as a counter reports them: a root is named by its class (roots have distinct class
names drawn from :data:`ROOT_NAMES`), a child by its parent's name and its attribute name
(from :data:`CHILD_NAMES`, which sort as strings: ``b10`` before ``b2``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn

__all__ = ["CHILD_NAMES", "MAT_OPS", "ROOT_NAMES", "RUN_MODES", "TREE_FAMILIES", "UNIT_EDGES",
           "Block", "LeafSpec", "MatCall", "ModuleTree", "Stage", "StageModule", "TableProgram",
           "TreeSpec", "module_trees", "table_programs", "unit_edge_program"]

#: the leaf families a tree draws from (one FLOP-table family each; docs/features.md).
TREE_FAMILIES = ("linear", "mm", "addmm", "bmm", "baddbmm", "matmul_broadcast", "matmul_1d",
                 "conv", "conv_transpose", "sdpa", "rnn")
#: how a tree runs: forward + backward (autograd on), forward only, no_grad, inference_mode.
RUN_MODES = ("backward", "forward", "no_grad", "inference")


@dataclass(frozen=True)
class LeafSpec:
    """One leaf: its family, input and output widths and its family's sizes (``sizes``, a
    sorted tuple of (name, value); see :func:`_leaf_sizes`)."""

    family: str
    width_in: int
    width_out: int
    sizes: tuple[tuple[str, Any], ...]

    def size(self, name: str) -> Any:
        return dict(self.sizes)[name]

    @property
    def has_parameters(self) -> bool:
        return self.family != "sdpa"


@dataclass(frozen=True)
class TreeSpec:
    """A container: its children (leaves or containers) and whether ``torch.compile`` wraps
    it."""

    children: tuple[LeafSpec | TreeSpec, ...]
    compiled: bool = False


@dataclass(frozen=True)
class ModuleTree:
    """A drawn tree, its input ``[batch, width]``, run mode, whether the input requires grad
    and the seed of its weights and input."""

    root: TreeSpec
    batch: int
    width: int
    modes: tuple[str, ...]
    input_grad: bool
    seed: int

    def leaves(self) -> list[LeafSpec]:
        found: list[LeafSpec] = []
        stack: list[LeafSpec | TreeSpec] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, LeafSpec):
                found.append(node)
            else:
                stack.extend(reversed(node.children))
        return found

    def build(self) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            return _build(self.root)

    def inputs(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed + 1)
        return torch.randn(self.batch, self.width, generator=g, requires_grad=self.input_grad)

    def containers(self) -> list[TreeSpec]:
        """Every container, root first (preorder)."""
        found: list[TreeSpec] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(c for c in reversed(node.children) if isinstance(c, TreeSpec))
        return found

    @staticmethod
    def run(model: nn.Module, x: torch.Tensor, mode: str) -> None:
        """``model(x)`` in ``mode`` (:data:`RUN_MODES`); in "backward", then
        ``out.sum().backward()`` when the output requires grad."""
        context = {"backward": torch.enable_grad, "forward": torch.enable_grad,
                   "no_grad": torch.no_grad, "inference": torch.inference_mode}[mode]
        with context():
            out = model(x)
            if mode == "backward" and out.requires_grad:
                out.sum().backward()


class Block(nn.Module):
    """A container: runs its children ``0, 1, ...`` in order."""

    def __init__(self, children: list[nn.Module]) -> None:
        super().__init__()
        for i, child in enumerate(children):
            self.add_module(str(i), child)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for child in self.children():
            x = child(x)
        return x


class Inner(nn.Module):
    """A leaf that holds a torch layer (``inner``) and reshapes around it."""

    def __init__(self, spec: LeafSpec, inner: nn.Module) -> None:
        super().__init__()
        self.spec, self.inner = spec, inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.spec
        if s.family in ("conv", "conv_transpose"):
            y = self.inner(x.reshape(x.shape[0], s.size("channels"), -1))
        elif s.family == "rnn":
            y = self.inner(x.reshape(x.shape[0], s.size("steps"), -1))[0]
        else:
            y = self.inner(x)
        return y.reshape(x.shape[0], -1)


class Product(nn.Module):
    """A leaf that calls one matrix-product op on its own parameters."""

    def __init__(self, spec: LeafSpec) -> None:
        super().__init__()
        self.spec = spec
        n_in, n_out, groups = spec.width_in, spec.width_out, spec.size("groups")
        shape = {"mm": (n_in, n_out), "addmm": (n_in, n_out), "matmul_1d": (n_out, n_in)}
        self.weight = nn.Parameter(torch.randn(shape.get(spec.family, (groups, n_in, n_out))))
        self.bias = nn.Parameter(torch.randn(groups, 1, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        family, w = self.spec.family, self.weight
        if family == "mm":
            return torch.mm(x, w)
        if family == "addmm":
            return torch.addmm(self.bias[0, 0], x, w)
        if family == "matmul_1d":  # one matrix-vector product per output column
            return torch.stack([torch.matmul(x, w[j]) for j in range(w.shape[0])], 1)
        if family == "matmul_broadcast":  # [b, k] @ [g, k, n]: x broadcast over the groups
            return torch.matmul(x, w).sum(0)
        stacked = x.expand(w.shape[0], *x.shape)
        if family == "bmm":
            return torch.bmm(stacked, w).sum(0)
        return torch.baddbmm(self.bias, stacked, w).sum(0)


class Attention(nn.Module):
    """A leaf: self-attention of its input read as ``[batch, heads, tokens, dim]``."""

    def __init__(self, spec: LeafSpec) -> None:
        super().__init__()
        self.spec = spec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.spec
        # contiguous: CPU attention runs the flash kernel (the hand count's) only when the
        # last dimension has stride 1; an LSTM's batch-first output, reshaped, has stride 2
        # there, and torch then runs the math path (bmm, no recomputed scores)
        q = x.reshape(x.shape[0], s.size("heads"), s.size("tokens"), -1).contiguous()
        return F.scaled_dot_product_attention(q, q, q).reshape(x.shape[0], -1)


def _leaf_module(spec: LeafSpec) -> nn.Module:
    if spec.family == "linear":
        return Inner(spec, nn.Linear(spec.width_in, spec.width_out, bias=spec.size("bias")))
    if spec.family in ("conv", "conv_transpose"):
        cls = nn.ConvTranspose1d if spec.family == "conv_transpose" else nn.Conv1d
        return Inner(spec, cls(spec.size("channels"), spec.size("out_channels"),
                               spec.size("kernel"), stride=spec.size("stride"),
                               groups=spec.size("groups"), bias=spec.size("bias")))
    if spec.family == "rnn":
        cls = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}[spec.size("kind")]
        features = spec.width_in // spec.size("steps")
        return Inner(spec, cls(features, spec.size("hidden"), batch_first=True))
    if spec.family == "sdpa":
        return Attention(spec)
    return Product(spec)


def _build(node: TreeSpec) -> nn.Module:
    children = [_leaf_module(c) if isinstance(c, LeafSpec) else _build(c)
                for c in node.children]
    block = Block(children)
    return torch.compile(block, backend="aot_eager") if node.compiled else block


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _leaf_sizes(draw: st.DrawFn, family: str, width: int) -> tuple[dict[str, Any], int]:
    """The family's sizes for an input of ``width`` features, and its output width."""
    if family in ("linear", "mm", "addmm", "bmm", "baddbmm", "matmul_broadcast",
                  "matmul_1d"):
        out = draw(st.integers(1, 8))
        groups = draw(st.integers(2, 3)) if family in ("bmm", "baddbmm",
                                                       "matmul_broadcast") else 1
        return {"bias": draw(st.booleans()), "groups": groups}, out
    if family in ("conv", "conv_transpose"):
        channels = draw(st.sampled_from(_divisors(width)))
        length = width // channels
        groups = draw(st.sampled_from(_divisors(channels)[::-1]))  # grouped where it can
        out_channels = groups * draw(st.integers(1, 2))
        kernel = draw(st.integers(1, length)) if family == "conv" else draw(st.integers(1, 2))
        stride = draw(st.integers(1, 2))
        out_length = ((length - kernel) // stride + 1 if family == "conv"
                      else (length - 1) * stride + kernel)
        return {"channels": channels, "out_channels": out_channels, "groups": groups,
                "kernel": kernel, "stride": stride, "bias": draw(st.booleans()),
                "length": length}, out_channels * out_length
    if family == "sdpa":
        heads = draw(st.sampled_from(_divisors(width)))
        tokens = draw(st.sampled_from(_divisors(width // heads)))
        return {"heads": heads, "tokens": tokens, "dim": width // heads // tokens}, width
    steps = draw(st.sampled_from(_divisors(width)))
    hidden = draw(st.integers(1, 3))
    return {"kind": draw(st.sampled_from(["LSTM", "GRU", "RNN"])), "steps": steps,
            "hidden": hidden}, steps * hidden


class _Leaves:
    """Hands out leaves in drawing order: families from a permutation, widths chained."""

    def __init__(self, draw: st.DrawFn, width: int) -> None:
        self.draw, self.width, self.made = draw, width, 0
        self.families = draw(st.permutations(TREE_FAMILIES))

    def next(self) -> LeafSpec:
        family = self.families[self.made % len(self.families)]
        sizes, out = _leaf_sizes(self.draw, family, self.width)
        leaf = LeafSpec(family, self.width, out, tuple(sorted(sizes.items())))
        self.made, self.width = self.made + 1, out
        return leaf


def _container(draw: st.DrawFn, leaves: _Leaves, depth: int) -> TreeSpec:
    """A container of 1-3 children (3-6 at the root); below depth 2 each child may be a
    container."""
    children: list[LeafSpec | TreeSpec] = []
    for _ in range(draw(st.integers(3 if depth == 0 else 1, 6 if depth == 0 else 3))):
        if depth < 2 and draw(st.booleans()):
            children.append(_container(draw, leaves, depth + 1))
        else:
            children.append(leaves.next())
    return TreeSpec(tuple(children))


def _compiled(node: TreeSpec, target: int, seen: list[int]) -> TreeSpec:
    """``node`` with its ``target``-th container in preorder (counting in ``seen``) wrapped
    by torch.compile."""
    index = seen[0]
    seen[0] += 1
    children = tuple(_compiled(c, target, seen) if isinstance(c, TreeSpec) else c
                     for c in node.children)
    return TreeSpec(children, compiled=index == target)


@st.composite
def module_trees(draw: st.DrawFn) -> ModuleTree:
    """A :class:`ModuleTree` (module docstring); shrinks towards three leaves, eager, run
    forward + backward, forward only and under no_grad."""
    width = draw(st.integers(1, 8))
    leaves = _Leaves(draw, width)
    root = _container(draw, leaves, 0)
    if draw(st.booleans()):
        count = len(ModuleTree(root, 1, width, (), False, 0).containers())
        root = _compiled(root, draw(st.integers(0, count - 1)), [0])
    modes = tuple(draw(st.permutations(RUN_MODES))[:3])
    return ModuleTree(root, draw(st.integers(1, 3)), width, modes, draw(st.booleans()),
                      draw(st.integers(0, 2**16)))


# ---- table programs: matrix products in nested modules, for get_table ----------------------

MAT_OPS = ("mm", "addmm", "bmm")
ROOT_NAMES = ("Net", "Head", "Body")
CHILD_NAMES = ("a", "b2", "b10", "layer")


@dataclass(frozen=True)
class MatCall:
    """One product on meta tensors: ``mm`` ``[m, k] x [k, n]``, ``addmm`` the same plus a
    bias ``[n]``, ``bmm`` ``[batch, m, k] x [batch, k, n]`` (batch is 1 for the others)."""

    op: str
    batch: int
    m: int
    k: int
    n: int

    def run(self) -> None:
        meta = lambda *shape: torch.empty(*shape, device="meta")
        if self.op == "bmm":
            torch.bmm(meta(self.batch, self.m, self.k), meta(self.batch, self.k, self.n))
        elif self.op == "addmm":
            torch.addmm(meta(self.n), meta(self.m, self.k), meta(self.k, self.n))
        else:
            torch.mm(meta(self.m, self.k), meta(self.k, self.n))


@dataclass(frozen=True)
class Stage:
    """A module: its name (class name for a root, attribute name for a child), the products
    it runs before its children, its children, and the products it runs after them."""

    name: str
    before: tuple[MatCall, ...]
    children: tuple[Stage, ...]
    after: tuple[MatCall, ...]


class StageModule(nn.Module):
    """Runs a :class:`Stage`: its ``before`` products, each child, its ``after`` products."""

    def __init__(self, stage: Stage) -> None:
        super().__init__()
        self.stage = stage
        for child in stage.children:
            self.add_module(child.name, StageModule(child))

    def forward(self) -> None:
        for call in self.stage.before:
            call.run()
        for child in self.stage.children:
            getattr(self, child.name)()
        for call in self.stage.after:
            call.run()


@dataclass(frozen=True)
class TableProgram:
    """Products run outside every module, then each root module once."""

    outside: tuple[MatCall, ...]
    roots: tuple[Stage, ...]

    def build(self) -> list[nn.Module]:
        """One module per root, of a class named as the root."""
        return [type(root.name, (StageModule,), {})(root) for root in self.roots]

    def run(self, modules: list[nn.Module]) -> None:
        """The ``outside`` products, then each module of :meth:`build` once."""
        for call in self.outside:
            call.run()
        for module in modules:
            module()


def _size(scale: int) -> st.SearchStrategy[int]:
    """At most ``2**scale`` and above ``2**(scale - 3)`` (an exponent ``e`` from ``scale - 2``
    to ``scale``, then a value in ``(2**(e-1), 2**e]``), at least 1."""
    return st.integers(max(0, scale - 2), scale).flatmap(
        lambda e: st.integers(max(1, 2 ** (e - 1)), 2 ** e))


@st.composite
def mat_calls(draw: st.DrawFn, scale: int) -> MatCall:
    """A product whose sizes are near ``2**scale`` (the batch near ``2**(scale // 2)``)."""
    op = draw(st.sampled_from(MAT_OPS))
    batch = draw(_size(scale // 2)) if op == "bmm" else 1
    m, k, n = (draw(_size(scale)) for _ in range(3))
    empty = draw(st.integers(0, 9)) == 0
    return MatCall(op, batch, m, 0 if empty else k, n)


def _calls(draw: st.DrawFn, scale: int, least: int = 0) -> tuple[MatCall, ...]:
    return tuple(draw(st.lists(mat_calls(scale), min_size=least, max_size=2)))


def _stage(draw: st.DrawFn, name: str, level: int, scale: int, least: int = 0) -> Stage:
    names = draw(st.lists(st.sampled_from(CHILD_NAMES), unique=True,
                          max_size=2 if level < 3 else 0))
    before = _calls(draw, scale, least)
    children = tuple(_stage(draw, child, level + 1, scale) for child in names)
    return Stage(name, before, children, _calls(draw, scale))


#: the table's units change where the global total reaches 10 * 1000**p (two digits before
#: the point); p = 5 is past T, the largest unit.
UNIT_EDGES = tuple(10 * 1000**p for p in range(6))


def unit_edge_program(edge: int, below: bool) -> TableProgram:
    """One ``mm`` ``[m, 1] x [1, 1]`` in a root ``Net``: a global total of ``edge`` FLOPs, or
    2 below it (``below``), where the table's unit changes (:data:`UNIT_EDGES`)."""
    total = edge - 2 if below else edge
    return TableProgram((), (Stage("Net", (MatCall("mm", 1, total // 2, 1, 1),), (), ()),))


@st.composite
def table_programs(draw: st.DrawFn) -> TableProgram:
    """A :class:`TableProgram` (module docstring); the first root runs at least one
    product, so the counts are never empty. One program in four puts the global total on a
    unit's edge or 2 below it (:func:`unit_edge_program`)."""
    if draw(st.integers(0, 3)) == 0:
        return unit_edge_program(draw(st.sampled_from(UNIT_EDGES)), draw(st.booleans()))
    scale = draw(st.integers(0, 16))
    outside = _calls(draw, scale)
    names = draw(st.lists(st.sampled_from(ROOT_NAMES), unique=True, min_size=1, max_size=2))
    roots = tuple(_stage(draw, name, 1, scale, least=int(i == 0))
                  for i, name in enumerate(names))
    return TableProgram(outside, roots)
