"""Random differentiable programs with weights, for the partitioner's properties.

A :class:`ProgramSpec` is plain data: the batch size ``n``, the input width, and a list of
:class:`Step` s. Every value is an ``(n, width)`` float tensor; value 0 is the input ``x``
(``requires_grad``). Each step reads earlier values and appends one:

==========  ==========================================================================
mm          ``v @ W``, a new weight of shape ``(width(v), out)``: random weight shapes
pointwise   cos, sin, tanh, sigmoid, relu or gelu of ``v``
binary      ``v + u`` or ``v * u`` (same width, or one of them of width 1: broadcast)
reduction   ``v * v.sum(1, keepdim=True)`` or ``v * v.amax(1, keepdim=True)``
summary     a small value of ``v``: ``v.sum(1, keepdim=True)``, ``v.amax(...)``,
            ``v.mean(...)`` (width 1), or ``v[:, a:a + k]`` (a narrow view of ``v``)
view        round trips through views: ``v.t().t()``, reshape, ``stack(v.unbind(0)).cos()``
conv        ``conv1d`` of ``v`` seen as ``(n, 1, width)``, a new ``(1, 1, 3)`` weight
attention   ``scaled_dot_product_attention(v, v, v)`` over the batch rows
dropout     ``dropout(v, p)`` (random)
rand        ``v * rand_like(v)`` (random)
inplace     ``v.clone().mul_(c)`` / ``.add_(c)`` / ``.relu_()`` (an in-place op on a fresh value)
effect      ``aten._print`` (an ordered side effect: AOTAutograd threads a token through it,
            ``with_effects``; no plan may run it twice), then ``v.cos()``; only with
            ``programs(effects=p)``
==========  ==========================================================================

How a program is drawn (so that the memory budget binds and the plan is a real choice):
a program is two to four *motifs*, each built around an expensive op (``mm``, ``conv``,
``attention``) whose output the backward needs through a nonlinear op:

=========  ====================================================================================
chain      ``e = expensive(src); nonlinear(e)``: one value to save or recompute
summary    ``e = expensive(src); s = summary(e); nonlinear(s)`` (times a wide value, sometimes):
           saving the small ``s`` spares recomputing ``e``, the shape a knapsack over the
           expensive ops' outputs never sees
fanout     ``e`` read by two or three consumers (nonlinear ops, another ``mm``)
view       ``nonlinear(view(e))``: the backward reads a view of a saved storage
random     ``nonlinear(dropout(e))`` or ``rand``: a value that must be saved, never recomputed
single     one step of any kind (the table above), reading any earlier value
=========  ====================================================================================

With ``programs(input_views=p)`` a program, with probability ``p``, ends with a nonlinear op of
a view of the input (``x.t().t()``, a reshape round trip, or ``x[:, a:a + k]``): the backward
reads a view of a graph input, which costs no activation bytes. With ``programs(effects=p)``
it holds, with probability ``p``, one ``effect`` step reading any value.

``src`` is the input ``x`` half the time (shared inputs), else an earlier value. Every value
no later step reads is an output, so nothing is dead. The program returns
``sum(v.sum() for v in outputs)``, a scalar. ``spec.make()`` returns the callable
``fn(x, *weights)``; ``spec.inputs(seed)`` makes fresh inputs from a seed; ``str(spec)``
prints the program for a reproducer.

User checkpoint regions (``programs(user_regions=p)``; ``p`` defaults to 0, so the plain
properties see plain programs): with probability ``p`` a program wraps one or two spans of
consecutive steps, each starting at an expensive op, in
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` (:class:`Region`). A region's
policy is ``plain`` (everything in it recomputed), ``save_mm`` (a selective-checkpoint
policy from ``create_selective_checkpoint_contexts``: ``aten.mm`` MUST_SAVE, every other op
PREFER_RECOMPUTE), or ``nested`` (a plain region holding a plain inner region over its tail).
Random and in-place steps stay outside regions (recomputing a random op inside a region is
the random properties' business, and torch refuses in-place ops under a selective policy).
A region's body takes every earlier value and every weight as arguments and returns the
values it makes, so the recompute reads nothing from an iterator or a closure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from refimpl.strategies.features import Feature
from refimpl.strategies.mutating import (
    ALIASES,
    MUTATIONS,
    aliased_mutation_programs,
    mutation_programs,
)

__all__ = ["FEATURES", "KINDS", "MOTIFS", "RANDOM_KINDS", "REGION_POLICIES", "ProgramSpec",
           "Region", "Step", "parallel_matmuls", "pointwise_chains",
           "programs", "random_chains", "tied_matmuls"]

KINDS = ("mm", "pointwise", "binary", "reduction", "summary", "view", "conv", "attention",
         "dropout", "rand", "inplace")
RANDOM_KINDS = ("dropout", "rand")
EXPENSIVE_KINDS = ("mm", "conv", "attention")
MOTIFS = ("chain", "summary", "fanout", "view", "random", "single")
POINTWISE = {"cos": torch.cos, "sin": torch.sin, "tanh": torch.tanh,
             "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu}
#: a ``factory`` link of :func:`pointwise_chains` multiplies by a tensor made from no tensor
#: (``arange``, which decomposes to ``prims.iota``; ``full``): torch's partitioner lists both
#: as recomputable, and the multiply's backward reads the factory's value
FACTORIES = {"arange": lambda w, **kw: torch.arange(1, w + 1, **kw) / w,
             "full": lambda w, **kw: torch.full((w,), 0.5, **kw)}
#: an ``indexing`` link of :func:`pointwise_chains` reads its value through a reversed-column
#: index (``gather`` or ``index``, both on torch's recomputable allowlist); the index, an int64
#: ``arange`` made from no tensor, is read by the link's backward scatter (not pointwise)
INDEXINGS = ("gather", "index")
#: pointwise ops whose backward reads their input (relu's reads its output's sign only).
NONLINEAR = ("cos", "sin", "tanh", "sigmoid")
REGION_POLICIES = ("plain", "save_mm", "nested")
#: the side-effect step (module docstring): drawn only with ``programs(effects=p)``
EFFECT = "effect"
#: step kinds a region never holds (module docstring).
OUTSIDE_REGIONS = ("dropout", "rand", "inplace", EFFECT)


@dataclass(frozen=True)
class Step:
    """One op: its kind, a variant name, the values it reads, and its constants."""

    kind: str
    variant: str
    reads: tuple[int, ...]
    out_width: int  # width of the value it makes (mm: the new weight's columns)
    constant: float = 0.0
    offset: int = 0  # summary:slice: the first column of the slice


@dataclass(frozen=True)
class Region:
    """Steps ``start`` to ``stop - 1`` (step indices; step ``i`` makes value ``i + 1``) run
    inside one checkpoint region of ``policy`` (:data:`REGION_POLICIES`); ``inner`` is the
    nested region's span, for ``policy == "nested"``."""

    start: int
    stop: int
    policy: str = "plain"
    inner: tuple[int, int] | None = None


def _save_mm(ctx, op, *args, **kwargs):
    """The ``save_mm`` selective-checkpoint policy: save matmuls, recompute the rest."""
    if op is torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


@dataclass(frozen=True)
class ProgramSpec:
    n: int
    width: int
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    regions: tuple[Region, ...] = ()

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

    def weight_of(self) -> dict[int, int]:
        """Step index -> the index (among the weights) of the weight it reads."""
        holders = [i for i, s in enumerate(self.steps) if s.kind in ("mm", "conv")]
        return {step: k for k, step in enumerate(holders)}

    def make(self):
        """The program as a callable ``fn(x, *weights) -> scalar``: the steps in order, the
        ones in a :class:`Region` inside its checkpoint."""
        weight_of = self.weight_of()
        top = [(r.start, r.stop, r.policy, r.inner) for r in self.regions]

        def run(values: list, weights: tuple, start: int, stop: int, regions: list) -> None:
            """Append the values of steps ``start..stop-1`` to ``values``."""
            i = start
            while i < stop:
                region = next((r for r in regions if r[0] == i), None)
                if region is None:
                    step = self.steps[i]
                    values.append(_apply(step, [values[j] for j in step.reads],
                                         weights[weight_of[i]] if i in weight_of else None))
                    i += 1
                    continue
                r_start, r_stop, policy, inner = region
                nested = [(*inner, "plain", None)] if inner else []
                known = len(values)

                def body(*args, r_start=r_start, r_stop=r_stop, nested=nested, known=known):
                    inside = list(args[:known])
                    run(inside, args[known:], r_start, r_stop, nested)
                    return tuple(inside[known:])

                values.extend(checkpoint(body, *values, *weights, use_reentrant=False,
                                         **_checkpoint_kwargs(policy)))
                i = r_stop

        def program(x, *weights):
            values = [x]
            run(values, weights, 0, len(self.steps), top)
            return sum(values[i].sum() for i in self.outputs)

        return program

    def __str__(self) -> str:
        lines = [f"ProgramSpec(n={self.n}, width={self.width}, outputs={self.outputs})"]
        lines += [f"  v{i + 1} = {s.kind}:{s.variant}({', '.join(f'v{r}' for r in s.reads)})"
                  f" width={s.out_width}" + (f" c={s.constant}" if s.constant else "")
                  + (f" offset={s.offset}" if s.offset else "")
                  for i, s in enumerate(self.steps)]
        lines += [f"  checkpoint region {r.policy}: v{r.start + 1}..v{r.stop}"
                  + (f" (inner region v{r.inner[0] + 1}..v{r.inner[1]})" if r.inner else "")
                  for r in self.regions]
        return "\n".join(lines)


def _checkpoint_kwargs(policy: str) -> dict:
    if policy not in REGION_POLICIES:
        raise ValueError(f"policy={policy!r} is not one of {', '.join(REGION_POLICIES)}")
    if policy == "save_mm":
        return {"context_fn": functools.partial(create_selective_checkpoint_contexts, _save_mm)}
    return {}


def _summary(step: Step, v: torch.Tensor) -> torch.Tensor:
    if step.variant == "slice":
        return v[:, step.offset:step.offset + step.out_width]
    return {"sum": v.sum, "mean": v.mean}.get(step.variant, v.amax)(1, keepdim=True)


def _apply(step: Step, vs: list[torch.Tensor], weight: torch.Tensor | None) -> torch.Tensor:
    v = vs[0]
    match step.kind:
        case "mm":
            return v @ weight
        case "pointwise":
            return POINTWISE[step.variant](v)
        case "binary":
            return v + vs[1] if step.variant == "add" else v * vs[1]
        case "reduction":
            r = v.sum(1, keepdim=True) if step.variant == "sum" else v.amax(1, keepdim=True)
            return v * r
        case "summary":
            return _summary(step, v)
        case "view":
            if step.variant == "unbind":  # a tuple of views, stacked into a fresh tensor
                return torch.stack(v.unbind(0)).cos()
            return v.t().t() if step.variant == "transpose" else v.reshape(-1).reshape(v.shape)
        case "conv":
            return F.conv1d(v.unsqueeze(1), weight, padding=1).squeeze(1)
        case "attention":
            q = v.unsqueeze(0).unsqueeze(0)
            return F.scaled_dot_product_attention(q, q, q).squeeze(0).squeeze(0)
        case "dropout":
            return F.dropout(v, step.constant, training=True)
        case "rand":
            return v * torch.rand_like(v)
        case "effect":
            torch.ops.aten._print.default("refimpl.strategies.programs: effect step")
            return v.cos()
        case "factory":
            return v * FACTORIES[step.variant](v.shape[1], dtype=v.dtype, device=v.device)
        case "indexing":
            idx = torch.arange(v.shape[1] - 1, -1, -1, device=v.device)
            return v.gather(1, idx.expand(v.shape)) if step.variant == "gather" else v[:, idx]
        case "inplace":
            fresh = v.clone()
            if step.variant == "relu_":
                return fresh.relu_()
            return getattr(fresh, step.variant)(step.constant)
    raise ValueError(f"step.kind={step.kind!r} is not one of {', '.join(KINDS)}, {EFFECT}")


VARIANTS = {"pointwise": sorted(POINTWISE), "reduction": ["sum", "amax"],
            "summary": ["sum", "slice", "amax", "mean"],
            "view": ["transpose", "reshape", "unbind"], "inplace": ["mul_", "add_", "relu_"],
            "conv": ["conv1d"], "attention": ["sdpa"], "dropout": ["dropout"],
            "rand": ["rand_like"]}


@st.composite
def _one(draw, kind: str, i: int, widths: list[int], max_width: int) -> Step:
    """A step of ``kind`` reading value ``i`` (and, for binary, a value of a fitting width)."""
    w = widths[i]
    if kind == "mm":
        return Step("mm", "mm", (i,), draw(st.integers(1, max_width)))
    if kind == "binary":
        fits = [j for j, wj in enumerate(widths) if wj == w or wj == 1 or w == 1]
        j = draw(st.sampled_from(fits))
        return Step("binary", draw(st.sampled_from(["mul", "add"])), (i, j), max(w, widths[j]))
    variant = draw(st.sampled_from(VARIANTS[kind]))
    if kind == "summary" and variant == "slice":
        k = draw(st.integers(1, w))
        return Step("summary", "slice", (i,), k, offset=draw(st.integers(0, w - k)))
    if kind == "summary":
        return Step("summary", variant, (i,), 1)
    constant = draw(st.sampled_from([0.25, 0.5])) if kind in ("dropout", "inplace") else 0.0
    return Step(kind, variant, (i,), w, constant)


class _Builder:
    """The steps drawn so far, and their widths (value 0 is the input)."""

    def __init__(self, width: int, max_width: int, kinds: tuple[str, ...]) -> None:
        self.steps: list[Step] = []
        self.widths = [width]
        self.max_width = max_width
        self.kinds = kinds

    def add(self, step: Step) -> int:
        self.steps.append(step)
        self.widths.append(step.out_width)
        return len(self.steps)

    def nonlinear(self, draw, i: int) -> int:
        if "pointwise" not in self.kinds:
            return i
        return self.add(Step("pointwise", draw(st.sampled_from(NONLINEAR)), (i,),
                             self.widths[i]))

    def expensive(self, draw, src: int) -> int:
        kinds = [k for k in EXPENSIVE_KINDS if k in self.kinds]
        if not kinds:
            return src
        kind = draw(st.sampled_from(kinds))
        return self.add(draw(_one(kind, src, self.widths, self.max_width)))

    def one_of(self, draw, kinds: tuple[str, ...], i: int) -> int:
        allowed = [k for k in kinds if k in self.kinds]
        if not allowed:
            return i
        return self.add(draw(_one(draw(st.sampled_from(allowed)), i, self.widths,
                                  self.max_width)))


def _motif(draw, b: _Builder, motif: str) -> None:
    """Append one motif (module docstring) to ``b``."""
    last = len(b.steps)
    src = 0 if draw(st.booleans()) else draw(st.integers(0, last))
    if motif == "single":
        b.one_of(draw, KINDS, draw(st.integers(0, last)))
        return
    if motif == "summary":
        _summary_motif(draw, b, src)
        return
    e = b.expensive(draw, src)
    if motif == "chain":
        b.nonlinear(draw, e)
    elif motif == "fanout":
        b.nonlinear(draw, e)
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                b.nonlinear(draw, e)
            else:
                b.nonlinear(draw, b.one_of(draw, ("mm",), e))
    elif motif == "view":
        b.nonlinear(draw, b.one_of(draw, ("view", "summary"), e))
    else:  # random
        b.nonlinear(draw, b.one_of(draw, RANDOM_KINDS, e))


def _summary_motif(draw, b: _Builder, src: int) -> None:
    """A wide ``mm`` (or another expensive op) summarised into a small value read through a
    nonlinear op, sometimes times a wide value; half the time beside a cheaper, narrower
    ``mm`` whose output is larger than the summary: then the optimum at middle budgets
    saves the summary and recomputes the cheap ``mm``, which a knapsack over the expensive
    ops' outputs cannot do (issue 13)."""
    if "mm" in b.kinds:
        wide = draw(st.integers(max(2, b.max_width // 2), b.max_width))
        e = b.add(Step("mm", "mm", (src,), wide))
    else:
        e = b.expensive(draw, src)
    p = b.nonlinear(draw, b.one_of(draw, ("summary",), e))
    wp = b.widths[p]
    wide_values = [j for j, w in enumerate(b.widths) if w > 1 and j != p and wp in (1, w)]
    if wide_values and "binary" in b.kinds and draw(st.booleans()):
        j = draw(st.sampled_from(wide_values))
        b.add(Step("binary", "mul", (p, j), b.widths[j]))
    if "mm" in b.kinds and b.widths[e] > 2 and draw(st.booleans()):
        narrow = draw(st.integers(2, b.widths[e] - 1))
        b.nonlinear(draw, b.add(Step("mm", "mm", (src,), narrow)))


@st.composite
def parallel_matmuls(draw) -> ProgramSpec:
    """Two or three matmuls side by side, each read by the backward through a nonlinear op,
    of different costs: each ``mm`` reads the input ``x`` (wide: many FLOPs per byte it
    makes) or an earlier nonlinear value (narrow: few), into its own width. Saving one
    output spares its FLOPs only, so the Pareto frontier of save-sets has middle points
    (save some matmuls, recompute the others) whose FLOPs differ from both ends: at a budget
    between them, only a solver that weighs each value's bytes against its FLOPs finds the
    least recompute. (The motifs of :func:`programs` mostly make two-point frontiers: save
    the expensive value or recompute all of it.) Every nonlinear value is an output."""
    n, width = draw(st.integers(2, 6)), draw(st.integers(4, 12))
    steps: list[Step] = []
    widths = [width]
    for _ in range(draw(st.integers(2, 3))):
        sources = [0] + [i for i in range(2, len(widths), 2)]  # x or a nonlinear value
        src = draw(st.sampled_from(sources))
        out = draw(st.sampled_from([w for w in range(1, 9) if w not in widths[1:]]))
        steps.append(Step("mm", "mm", (src,), out))
        steps.append(Step("pointwise", draw(st.sampled_from(NONLINEAR)), (len(steps),), out))
        widths += [out, out]
    return ProgramSpec(n, width, tuple(steps), outputs=tuple(range(2, len(widths), 2)))


#: matmul output widths of :func:`tied_matmuls`: few, so equal sizes and FLOPs recur (2 and
#: up: inductor decomposes a CPU matmul with one output column, or one row, into a multiply
#: and a sum, which the FLOP table does not count)
TIED_WIDTHS = (2, 4)
#: the input widths of :func:`tied_matmuls` (not ``uniform``): a matmul reading an ``x`` of
#: width 8 costs 4 FLOPs per output byte, one reading a width-2 value 1, so a small value
#: can cost more to recompute than a large one: the knapsack whose best runtime is not its
#: most memory
TIED_INPUT_WIDTHS = (*TIED_WIDTHS, 8)


@st.composite
def tied_matmuls(draw, uniform: bool = False, matmuls: int = 3,
                 summaries: bool = True, swapped: bool = False) -> ProgramSpec:
    """Tiny programs with ties drawn on purpose: two to ``matmuls`` matmuls, each reading the
    input ``x`` (of a width in :data:`TIED_INPUT_WIDTHS`) or an earlier nonlinear value, into
    a width of :data:`TIED_WIDTHS`, read by the backward through a nonlinear op, a quarter of
    the time through ``e * e.sum(1)`` first (the product's backward reads ``e`` and its small
    sum: a save-set of a few bytes more). The values no later step reads are the outputs.
    Two matmuls of one shape tie in bytes and FLOPs; a wide one beside a narrow one ties in
    bytes with two narrow ones, and so on: save-sets of one size recur, and a solver's
    tie-break decides. A matmul reading a wide ``x`` costs more per byte than one reading a
    narrow value, so a smaller value can cost more to recompute. With ``uniform`` every
    matmul is ``(n, w) @ (w, w)``, ``w`` in :data:`TIED_WIDTHS` (the same call, so any
    runtime estimator prices them alike) and no summary is drawn (a reduction is priced by
    time but costs no FLOPs); nor without ``summaries`` (fewer forward values: an enumerating
    solver's limit). With ``swapped`` the first two matmuls are ``x (width 4) @ (4, 2)`` and
    ``f(that) @ (2, 4)``, or, half the time, ``x (width 2) @ (2, 4)`` and ``f(that) @ (4,
    2)``: the same FLOPs, twice the bytes, the tie a knapsack must break towards less memory,
    with the larger one first or second (a solver that keeps the first of two equal runtimes
    breaks it by graph order)."""
    n = draw(st.integers(2, 4))
    outs = draw(st.sampled_from(((4, 2), (2, 4)))) if swapped else (2, 4)
    width = 6 - outs[0] if swapped else \
        draw(st.sampled_from(TIED_WIDTHS if uniform else TIED_INPUT_WIDTHS))
    steps: list[Step] = []
    widths = [width]
    nonlinear = [0]  # values a matmul may read: x, or a nonlinear value
    for k in range(draw(st.integers(min(2, matmuls), matmuls))):
        src = nonlinear[k] if swapped and k < 2 else draw(st.sampled_from(nonlinear))
        out = outs[k] if swapped and k < 2 else \
            width if uniform else draw(st.sampled_from(TIED_WIDTHS))
        steps.append(Step("mm", "mm", (src,), out))
        e = len(steps)
        if summaries and not uniform and draw(st.integers(0, 3)) == 0:
            steps.append(Step("summary", "sum", (e,), 1))
            steps.append(Step("binary", "mul", (e, e + 1), out))
            e = len(steps)
        steps.append(Step("pointwise", draw(st.sampled_from(NONLINEAR)), (e,), out))
        nonlinear.append(len(steps))
        widths += [out] * (len(steps) + 1 - len(widths))
    return ProgramSpec(n, width, tuple(steps), outputs=tuple(sorted(_sinks(steps))))


@st.composite
def random_chains(draw) -> ProgramSpec:
    """One to three random steps in a row (``v * rand_like(v)``, sometimes ``dropout``), each
    reading the one before it or the input: the backward reads only random draws (and
    dropout's masks), which no plan may recompute, so the one valid plan saves every value
    the backward reads, at every budget. The last value is the output."""
    n, width = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    steps: list[Step] = []
    for i in range(draw(st.integers(1, 3))):
        src = draw(st.sampled_from(sorted({0, i})))
        if draw(st.integers(0, 3)) < 3:  # Hypothesis favours small draws: rand mostly
            steps.append(Step("rand", "rand_like", (src,), width))
        else:
            steps.append(Step("dropout", "dropout", (src,), width, 0.5))
    return ProgramSpec(n, width, tuple(steps), outputs=tuple(sorted(_sinks(steps))))


@st.composite
def pointwise_chains(draw) -> ProgramSpec:
    """``x @ W`` read through a chain of two or three links, each (a third of the time
    each) a nonlinear pointwise op, a ``factory`` link (``v * arange(...)`` or
    ``v * full(...)``, :data:`FACTORIES`) or an ``indexing`` link (``gather`` or ``index``
    by a reversed-column int64 ``arange``, :data:`INDEXINGS`, between two nonlinear
    pointwise links): the backward reads the
    matmul's output and each link of the chain (and each factory's value) through a
    pointwise op, and an indexing link's index through its scatter, which is not
    pointwise. Keeping the matmul's output (and the index, which that scatter reads from
    memory anyway) and recomputing the rest of the chain recomputes no FLOPs. The last
    link is the output."""
    n, width, out = draw(st.integers(1, 6)), draw(st.integers(2, 8)), draw(st.integers(2, 8))
    steps = [Step("mm", "mm", (0,), out)]
    links = st.one_of(st.tuples(st.just("pointwise"), st.sampled_from(NONLINEAR)),
                      st.tuples(st.just("factory"), st.sampled_from(sorted(FACTORIES))),
                      st.tuples(st.just("indexing"), st.sampled_from(INDEXINGS)))
    for _ in range(draw(st.integers(2, 3))):
        kind, variant = draw(links, label="link")
        # an indexing link sits between two pointwise ones: its output is read by the
        # backward and is not the matmul's own, so keeping it costs bytes a plan can spare
        around = [Step("pointwise", draw(st.sampled_from(NONLINEAR)), (), out)
                  for _ in range(2 if kind == "indexing" else 0)]
        for step in [*around[:1], Step(kind, variant, (), out), *around[1:]]:
            steps.append(replace(step, reads=(len(steps),)))
    return ProgramSpec(n, width, tuple(steps), outputs=(len(steps),))


def _sinks(spec_steps: list[Step]) -> set[int]:
    """Values no later step reads (step values only, never the input)."""
    read = {r for s in spec_steps for r in s.reads}
    return {i for i in range(1, len(spec_steps) + 1) if i not in read}


def _region(draw, steps: list[Step], start: int, stop_limit: int) -> Region | None:
    """A region from step ``start`` (an expensive op) over as many of the next three steps
    as fit: up to ``stop_limit`` and before any step that stays outside regions (a shorter
    region mostly leaves the expensive op's reader outside, and changes no plan); None if
    ``start`` itself must stay outside."""
    stop = start
    while stop < stop_limit and stop - start < 4 and steps[stop].kind not in OUTSIDE_REGIONS:
        stop += 1
    if stop == start:
        return None
    policy = draw(st.sampled_from(REGION_POLICIES))
    if policy == "nested" and stop - start < 2:
        policy = "plain"
    inner = (draw(st.integers(start + 1, stop - 1)), stop) if policy == "nested" else None
    return Region(start, stop, policy, inner)


def _regions(draw, steps: list[Step]) -> tuple[Region, ...]:
    """One or two disjoint regions, each starting at an expensive step (module docstring)."""
    starts = [i for i, s in enumerate(steps) if s.kind in EXPENSIVE_KINDS]
    if not starts:
        return ()
    chosen = sorted(set(draw(st.lists(st.sampled_from(starts), min_size=1, max_size=2))))
    regions: list[Region] = []
    for k, start in enumerate(chosen):
        limit = chosen[k + 1] if k + 1 < len(chosen) else len(steps)
        region = _region(draw, steps, start, limit)
        if region is not None:
            regions.append(region)
    return tuple(regions)


@st.composite
def back_to_back_regions(draw) -> ProgramSpec:
    """``mm -> pointwise`` in one checkpoint region, then ``mm -> pointwise`` reading it in
    the next: the value between the two regions is marked recompute in the first and read
    by a node marked recompute in the second, the case torch's partitioner saves
    (``cleanup_recompute_tags``) as eager checkpointing saves a region's input. In a third
    of the programs the first region ends with a view of its pointwise value (``t().t()`` or
    a reshape there and back), so the value saved between the regions is a view. The first
    region is plain or saves its matmul; the second is plain (so its matmul is marked
    recompute)."""
    n, width = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    mid, out = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    first, second = (draw(st.sampled_from(NONLINEAR)) for _ in range(2))
    between = draw(st.sampled_from(["value", "value", "view"]), label="between")
    steps = [Step("mm", "mm", (0,), mid), Step("pointwise", first, (1,), mid)]
    if between == "view":
        variant = draw(st.sampled_from(["transpose", "reshape"]), label="view")
        steps.append(Step("view", variant, (2,), mid))
    boundary = len(steps)
    steps += [Step("mm", "mm", (boundary,), out), Step("pointwise", second, (boundary + 1,), out)]
    policy = draw(st.sampled_from(["plain", "save_mm"]))
    return ProgramSpec(n, width, tuple(steps), outputs=(len(steps),),
                       regions=(Region(0, boundary, policy), Region(boundary, len(steps), "plain")))


@st.composite
def programs(draw, max_steps: int = 8, max_width: int = 12,
             kinds: tuple[str, ...] = KINDS, require_random: bool = False,
             user_regions: float = 0.0, input_views: float = 0.0,
             effects: float = 0.0) -> ProgramSpec:
    """Random differentiable programs (module docstring): motifs until ``max_steps`` steps
    (at least one step); ``kinds`` limits the step kinds; ``require_random`` ends a program
    without a random op with the random motif (up to three steps past ``max_steps``);
    ``user_regions``, ``input_views`` and ``effects`` are the probabilities of drawing
    checkpoint regions (:class:`Region`), a nonlinear op of a view of the input, and an
    effect step (each up to two steps past ``max_steps``)."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"kinds={kinds!r}, max_steps={max_steps!r}: kinds must each be one "
                         f"of {', '.join(KINDS)} and max_steps an int >= 1")
    for name, p in (("user_regions", user_regions), ("input_views", input_views),
                    ("effects", effects)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name}={p!r}: a probability in [0, 1]")
    n, width = draw(st.integers(1, 6)), draw(st.integers(1, max_width))
    b = _Builder(width, max_width, tuple(kinds))
    for _ in range(draw(st.integers(2, 4))):
        before = len(b.steps)
        _motif(draw, b, draw(st.sampled_from((*MOTIFS, "summary"))))  # summary: 2 in 7
        if len(b.steps) > max_steps:  # the motif does not fit: drop it, stop
            del b.steps[before:], b.widths[before + 1:]
            break
    if not b.steps:
        b.one_of(draw, tuple(kinds), 0)
    if require_random and not any(st_.kind in RANDOM_KINDS for st_ in b.steps):
        if not set(RANDOM_KINDS) & set(kinds):
            raise ValueError(f"require_random=True needs one of {RANDOM_KINDS} in kinds")
        _motif(draw, b, "random")
    if _chance(draw, input_views):
        b.nonlinear(draw, b.add(draw(_input_view(b.widths[0]))))
    if _chance(draw, effects):
        i = draw(st.integers(0, len(b.steps)))
        b.add(Step(EFFECT, "print", (i,), b.widths[i]))
    extra = draw(st.lists(st.integers(1, len(b.steps)), max_size=1))
    outputs = tuple(sorted(_sinks(b.steps) | set(extra)))
    regions = _regions(draw, b.steps) if _chance(draw, user_regions) else ()
    return ProgramSpec(n, width, tuple(b.steps), outputs, regions)


def _chance(draw, p: float) -> bool:
    """True with probability ``p`` (no draw at 0 or 1, so ``p = 0`` leaves programs as they
    were)."""
    return p > 0 and (p == 1.0 or draw(st.floats(0.0, 1.0, exclude_max=True)) < p)


@st.composite
def _input_view(draw, width: int) -> Step:
    """A view of the input ``x`` (value 0): transpose or reshape round trip, or a slice."""
    variant = draw(st.sampled_from(["transpose", "reshape", "slice"]))
    if variant != "slice":
        return Step("view", variant, (0,), width)
    k = draw(st.integers(1, width))
    return Step("summary", "slice", (0,), k, offset=draw(st.integers(0, width - k)))


#: the rates of the widened draws that ``test_partition_within_budget_and_exact`` uses
WIDENED = {"input_views": 0.4, "effects": 0.4}
#: the non-random kinds that the user-regions property draws from
REGION_KINDS = tuple(k for k in KINDS if k not in RANDOM_KINDS)


def _reads_an_input_view(spec: ProgramSpec) -> bool:
    return any(s.reads == (0,) and (s.kind == "view" or (s.kind, s.variant) == (
        "summary", "slice")) for s in spec.steps)


def _features() -> tuple[Feature, ...]:
    within = "test_partition_properties.py::test_partition_within_budget_and_exact"
    widened = lambda: programs(**WIDENED)
    return (
        Feature("partition", "input_mutation", "an in-place write to a graph input before "
                "a value of it the backward reads", mutation_programs,
                lambda spec: spec.mutate in MUTATIONS,
                "test_partition_mutation.py::test_partition_input_mutation_as_eager"),
        Feature("partition", "zero_size_inputs", "empty inputs (x and the mutated w): the "
                "same storage address, no shared storage", mutation_programs,
                lambda spec: spec.width == 0,
                "test_partition_mutation.py::test_partition_input_mutation_as_eager"),
        Feature("partition", "aliased_mutated_inputs", "two non-empty inputs share a "
                "storage (an input and its view) and the program writes to one of them",
                aliased_mutation_programs,
                lambda spec: spec.alias in ALIASES and spec.program.width > 0,
                "test_partition_mutation.py::"
                "test_partition_aliased_input_mutation_as_eager_or_refused"),
        Feature("partition", "factory_ops", "a tensor made from no tensor (arange, full) "
                "that the forward needs and the backward reads", pointwise_chains,
                lambda spec: any(s.kind == "factory" for s in spec.steps),
                "test_partition_properties.py::"
                "test_partition_at_budget_one_recomputes_a_pointwise_chain"),
        Feature("partition", "indexing_ops", "gather or index by an int64 index made from "
                "no tensor (arange), which the backward's scatter reads", pointwise_chains,
                lambda spec: any(s.kind == "indexing" for s in spec.steps),
                "test_partition_properties.py::"
                "test_partition_at_budget_one_recomputes_a_pointwise_chain"),
        Feature("partition", "checkpoint_regions", "user checkpoint regions (plain, "
                "selective, nested)", lambda: programs(kinds=REGION_KINDS, user_regions=1.0),
                lambda spec: bool(spec.regions),
                "test_partition_properties.py::test_partition_honours_user_checkpoint_regions"),
        Feature("partition", "rng", "random ops (dropout, rand_like): never recomputed",
                lambda: programs(require_random=True), lambda spec: spec.has_random,
                "test_partition_properties.py::test_partition_keeps_random_draws"),
        Feature("partition", "effectful_ops", "an ordered side effect (aten._print, a "
                "with_effects token)", widened,
                lambda spec: any(s.kind == EFFECT for s in spec.steps), within),
        Feature("partition", "input_views", "the backward reads a view of a graph input",
                widened, _reads_an_input_view, within),
        Feature("partition", "several_outputs", "two or more of the program's values are "
                "outputs (summed into the returned scalar)", widened,
                lambda spec: len(spec.outputs) >= 2, within),
        Feature("partition", "varied_shapes", "values of three or more widths in one program "
                "(matmul widths, width-1 summaries, broadcasts)", widened,
                lambda spec: len(set(spec.widths())) >= 3, within),
    )


FEATURES = _features()
