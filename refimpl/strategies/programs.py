"""Random differentiable programs with weights, for the partitioner's properties.

A :class:`ProgramSpec` is plain data: the batch size ``n``, the input width, and a list of
:class:`Step` s. Every value is an ``(n, width)`` float tensor; value 0 is the input ``x``
(``requires_grad``). Each step reads earlier values and appends one:

==========  ==========================================================================
mm          ``v @ W``, a new weight of shape ``(width(v), out)``: random weight shapes
pointwise   cos, sin, tanh, sigmoid, relu or gelu of ``v``
binary      ``v + u`` or ``v * u`` (same width)
reduction   ``v * v.sum(1, keepdim=True)`` or ``v * v.amax(1, keepdim=True)``
view        round trips through views: ``v.t().t()``, reshape, ``stack(v.unbind(0)).cos()``
conv        ``conv1d`` of ``v`` seen as ``(n, 1, width)``, a new ``(1, 1, 3)`` weight
attention   ``scaled_dot_product_attention(v, v, v)`` over the batch rows
dropout     ``dropout(v, p)`` (random)
rand        ``v * rand_like(v)`` (random)
inplace     ``v.clone().mul_(c)`` / ``.add_(c)`` / ``.relu_()`` (an in-place op on a fresh value)
==========  ==========================================================================

The program returns ``sum(v.sum() for v in outputs)``, a scalar. ``spec.make()`` returns the
callable ``fn(x, *weights)``; ``spec.inputs(seed)`` makes fresh inputs from a seed;
``str(spec)`` prints the program for a reproducer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch.nn import functional as F

__all__ = ["KINDS", "RANDOM_KINDS", "ProgramSpec", "Step", "programs"]

KINDS = ("mm", "pointwise", "binary", "reduction", "view", "conv", "attention", "dropout",
         "rand", "inplace")
RANDOM_KINDS = ("dropout", "rand")
POINTWISE = {"cos": torch.cos, "sin": torch.sin, "tanh": torch.tanh,
             "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu}


@dataclass(frozen=True)
class Step:
    """One op: its kind, a variant name, the values it reads, and its constants."""

    kind: str
    variant: str
    reads: tuple[int, ...]
    out_width: int  # width of the value it makes (mm: the new weight's columns)
    constant: float = 0.0


@dataclass(frozen=True)
class ProgramSpec:
    n: int
    width: int
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def widths(self) -> list[int]:
        return [self.width] + [s.out_width for s in self.steps]

    def weight_shapes(self) -> list[tuple[int, ...]]:
        widths, shapes = self.widths(), []
        for s in self.steps:
            if s.kind == "mm":
                shapes.append((widths[s.reads[0]], s.out_width))
            elif s.kind == "conv":
                shapes.append((1, 1, 3))
        return shapes

    @property
    def has_random(self) -> bool:
        return any(s.kind in RANDOM_KINDS for s in self.steps)

    def inputs(self, seed: int = 0) -> list[torch.Tensor]:
        """``x`` and the weights, all ``requires_grad``, drawn from ``seed``."""
        gen = torch.Generator().manual_seed(seed)
        shapes = [(self.n, self.width), *self.weight_shapes()]
        return [(torch.randn(s, generator=gen) / max(1, s[0]) ** 0.5).requires_grad_()
                for s in shapes]

    def make(self):
        """The program as a callable ``fn(x, *weights) -> scalar``."""
        def program(x, *weights):
            values, ws = [x], iter(weights)
            for step in self.steps:
                values.append(_apply(step, [values[i] for i in step.reads], ws))
            return sum(values[i].sum() for i in self.outputs)

        return program

    def __str__(self) -> str:
        lines = [f"ProgramSpec(n={self.n}, width={self.width}, outputs={self.outputs})"]
        lines += [f"  v{i + 1} = {s.kind}:{s.variant}({', '.join(f'v{r}' for r in s.reads)})"
                  + (f" c={s.constant}" if s.constant else "")
                  for i, s in enumerate(self.steps)]
        return "\n".join(lines)


def _apply(step: Step, vs: list[torch.Tensor], weights) -> torch.Tensor:
    v = vs[0]
    match step.kind:
        case "mm":
            return v @ next(weights)
        case "pointwise":
            return POINTWISE[step.variant](v)
        case "binary":
            return v + vs[1] if step.variant == "add" else v * vs[1]
        case "reduction":
            r = v.sum(1, keepdim=True) if step.variant == "sum" else v.amax(1, keepdim=True)
            return v * r
        case "view":
            if step.variant == "unbind":  # a tuple of views, stacked into a fresh tensor
                return torch.stack(v.unbind(0)).cos()
            return v.t().t() if step.variant == "transpose" else v.reshape(-1).reshape(v.shape)
        case "conv":
            return F.conv1d(v.unsqueeze(1), next(weights), padding=1).squeeze(1)
        case "attention":
            q = v.unsqueeze(0).unsqueeze(0)
            return F.scaled_dot_product_attention(q, q, q).squeeze(0).squeeze(0)
        case "dropout":
            return F.dropout(v, step.constant, training=True)
        case "rand":
            return v * torch.rand_like(v)
        case "inplace":
            fresh = v.clone()
            if step.variant == "relu_":
                return fresh.relu_()
            return getattr(fresh, step.variant)(step.constant)
    raise ValueError(f"step.kind={step.kind!r} is not one of {', '.join(KINDS)}")


@st.composite
def _step(draw, widths: list[int], kinds: tuple[str, ...], max_width: int) -> Step:
    kind = draw(st.sampled_from(kinds))
    i = draw(st.integers(0, len(widths) - 1))
    w = widths[i]
    if kind == "mm":
        return Step("mm", "mm", (i,), draw(st.integers(1, max_width)))
    if kind == "binary":
        same = [j for j, wj in enumerate(widths) if wj == w]
        return Step("binary", draw(st.sampled_from(["add", "mul"])),
                    (i, draw(st.sampled_from(same))), w)
    variants = {"pointwise": sorted(POINTWISE), "reduction": ["sum", "amax"],
                "view": ["transpose", "reshape", "unbind"], "inplace": ["mul_", "add_", "relu_"],
                "conv": ["conv1d"], "attention": ["sdpa"], "dropout": ["dropout"],
                "rand": ["rand_like"]}[kind]
    constant = draw(st.sampled_from([0.25, 0.5])) if kind in ("dropout", "inplace") else 0.0
    return Step(kind, draw(st.sampled_from(variants)), (i,), w, constant)


@st.composite
def programs(draw, max_steps: int = 8, max_width: int = 12,
             kinds: tuple[str, ...] = KINDS) -> ProgramSpec:
    """Random differentiable programs (module docstring); ``kinds`` limits the step kinds."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"kinds={kinds!r}: each must be one of {', '.join(KINDS)}")
    n, width = draw(st.integers(1, 6)), draw(st.integers(1, max_width))
    steps: list[Step] = []
    widths = [width]
    for _ in range(draw(st.integers(1, max_steps))):
        step = draw(_step(widths, kinds, max_width))
        steps.append(step)
        widths.append(step.out_width)
    last = len(steps)
    extra = draw(st.lists(st.integers(1, last), max_size=2, unique=True))
    return ProgramSpec(n, width, tuple(steps), tuple(sorted({last, *extra})))
