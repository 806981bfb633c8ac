"""Random models of one matmul-class layer family, for the model-level FLOP properties.

``flop_models(family)`` draws a :class:`FlopModel`: plain data (the family, its sizes and a
seed) whose ``build()`` makes the module and ``inputs()`` its example inputs. One family per
model, so a peer counter whose conventions cover that family can be compared exactly.

| family | model |
| --- | --- |
| linear | 1-3 ``nn.Linear`` layers (bias drawn per layer) on a 2-d or 3-d input |
| linear_fn | the same as :class:`FunctionalLinear` layers: ``F.linear`` called by a custom module |
| conv | one ``nn.ConvNd`` from :func:`refimpl.strategies.conv.conv_configs` (groups, stride, ...) |
| conv_transpose | one ``nn.ConvTransposeNd`` (groups, stride, output_padding, dilation) |
| sdpa | :class:`SdpaBlock`: q/k/v projections, ``F.scaled_dot_product_attention``, out proj |
| mha | ``nn.MultiheadAttention`` self-attention (bias, need_weights drawn); or, with
  ``inference``, in eval mode under ``torch.inference_mode()`` (its fused fast path) |
| lstm, gru | ``nn.LSTM`` / ``nn.GRU`` (layers, bidirectional, bias, batch_first drawn) |

Sizes are small (a few thousand FLOPs), so a peer that traces or hooks runs fast. Every
drawn model is valid by construction and shrinks towards one small layer.

:data:`FEATURES` is the FLOP component's feature table (refimpl.strategies.features): what
the FLOP properties' generators must draw, each held at 20% of ci-profile draws by
tests/test_features.py and listed in docs/features.md. Most live in
:mod:`refimpl.strategies.flop_trees` (every op family, nesting, run modes, torch.compile),
the fused inference paths in :mod:`refimpl.strategies.fused`, the mm-family calls'
keyword scalars in :mod:`refimpl.strategies.matmul`, the ``get_table`` programs also in
:mod:`refimpl.strategies.flop_trees`, the in-place and ``torch.cond`` programs in
:mod:`refimpl.strategies.flop_programs`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn

from refimpl.strategies.conv import ConvConfig, conv_configs
from refimpl.strategies.features import Feature
from refimpl.strategies.flop_programs import (
    CondProgram,
    InplaceProgram,
    cond_programs,
    inplace_programs,
    loop_programs,
)
from refimpl.strategies.flop_trees import (
    LeafSpec,
    MatCall,
    ModuleTree,
    Stage,
    TableProgram,
    TreeSpec,
    module_trees,
    table_programs,
)
from refimpl.strategies.fused import FUSED_MODULES, fused_cases
from refimpl.strategies.matmul import matmul_cases

__all__ = ["FEATURES", "FLOP_MODEL_FAMILIES", "FlopModel", "FunctionalLinear", "SdpaBlock",
           "flop_models"]

FLOP_MODEL_FAMILIES = ("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha", "lstm",
                       "gru")


class FunctionalLinear(nn.Module):
    """A linear layer as custom code writes one (swin's attention, GPT-2's Conv1D): its own
    parameters and a call to ``F.linear``, not an ``nn.Linear`` module."""

    def __init__(self, n_in: int, n_out: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / n_in**0.5)
        self.bias = nn.Parameter(torch.zeros(n_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class SdpaBlock(nn.Module):
    """Self-attention through ``F.scaled_dot_product_attention``: q/k/v projections
    (``kv_heads`` key/value heads: grouped-query attention when fewer than ``heads``), the
    attention (optionally causal) and an output projection."""

    def __init__(self, embed: int, heads: int, kv_heads: int, bias: bool, causal: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, embed // heads
        self.causal = causal
        self.q = nn.Linear(embed, embed, bias=bias)
        self.k = nn.Linear(embed, kv_heads * self.head_dim, bias=bias)
        self.v = nn.Linear(embed, kv_heads * self.head_dim, bias=bias)
        self.out = nn.Linear(embed, embed, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.kv_heads != self.heads:  # broadcast each key/value head to its query heads
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, s, e))


class _FirstOutput(nn.Module):
    """Calls ``inner`` and returns its first output (MHA and RNNs return tuples)."""

    def __init__(self, inner: nn.Module, self_attention: bool = False,
                 need_weights: bool = False) -> None:
        super().__init__()
        self.inner, self.self_attention, self.need_weights = inner, self_attention, need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.self_attention:
            return self.inner(x, x, x, need_weights=self.need_weights)[0]
        return self.inner(x)[0]


@dataclass(frozen=True)
class FlopModel:
    """A drawn model: ``family``, its sizes (``params``, a sorted tuple of (name, value)),
    the input shape and the seed of its weights and inputs."""

    family: str
    params: tuple[tuple[str, Any], ...]
    input_shape: tuple[int, ...]
    seed: int

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def build(self) -> nn.Module:
        """The model, weights drawn from ``seed``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = _BUILDERS[self.family](self)
        return model.eval() if self.inference else model

    @property
    def inference(self) -> bool:
        """Whether the model runs in eval mode under ``torch.inference_mode()``."""
        return bool(dict(self.params).get("inference", False))

    def context(self):
        """The context to run the model in: inference_mode for an inference model."""
        return torch.inference_mode() if self.inference else contextlib.nullcontext()

    def inputs(self) -> tuple[torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed + 1)
        return (torch.randn(self.input_shape, generator=g),)


def _build_linear(m: FlopModel) -> nn.Module:
    sizes, biases = m.param("features"), m.param("bias")
    layer = nn.Linear if m.family == "linear" else FunctionalLinear
    return nn.Sequential(*(layer(a, b, bias=bias) for a, b, bias in zip(sizes, sizes[1:], biases)))


def _build_conv(m: FlopModel) -> nn.Module:
    c: ConvConfig = m.param("conv")
    kind = ("ConvTranspose" if c.transposed else "Conv") + f"{c.spatial_dims}d"
    extra = {"output_padding": c.output_padding} if c.transposed else {}
    return getattr(nn, kind)(c.in_channels, c.out_channels, c.kernel, stride=c.stride,
                             padding=c.padding, dilation=c.dilation, groups=c.groups,
                             bias=c.bias, **extra)


def _build_sdpa(m: FlopModel) -> nn.Module:
    return SdpaBlock(m.param("embed"), m.param("heads"), m.param("kv_heads"), m.param("bias"),
                     m.param("causal"))


def _build_mha(m: FlopModel) -> nn.Module:
    mha = nn.MultiheadAttention(m.param("embed"), m.param("heads"), bias=m.param("bias"),
                                batch_first=True)
    return _FirstOutput(mha, self_attention=True, need_weights=m.param("need_weights"))


def _build_rnn(m: FlopModel) -> nn.Module:
    cls = nn.LSTM if m.family == "lstm" else nn.GRU
    return _FirstOutput(cls(m.param("input"), m.param("hidden"), num_layers=m.param("layers"),
                            bias=m.param("bias"), batch_first=True,
                            bidirectional=m.param("bidirectional")))


_BUILDERS = {"linear": _build_linear, "linear_fn": _build_linear, "conv": _build_conv,
             "conv_transpose": _build_conv, "sdpa": _build_sdpa, "mha": _build_mha,
             "lstm": _build_rnn, "gru": _build_rnn}


def _params(draw: st.DrawFn, family: str) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The family's sizes and the input shape."""
    small = st.integers(1, 8)
    if family in ("linear", "linear_fn"):
        layers = draw(st.integers(1, 3))
        features = tuple(draw(st.lists(small, min_size=layers + 1, max_size=layers + 1)))
        rows = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
        bias = tuple(draw(st.lists(st.booleans(), min_size=layers, max_size=layers)))
        return {"features": features, "bias": bias}, (*rows, features[0])
    if family in ("conv", "conv_transpose"):
        cfg = draw(conv_configs(transposed=st.just(family == "conv_transpose")))
        return {"conv": cfg}, cfg.input_shape
    if family in ("sdpa", "mha"):
        # MultiheadAttention's fused inference path needs an even head count and biases
        # (and need_weights=False, as ViT calls it): an inference model always has them
        inference = family == "mha" and draw(st.booleans())
        heads = draw(st.sampled_from([2, 4]) if inference else st.integers(1, 4))
        embed = heads * draw(st.integers(1, 4))
        params = {"embed": embed, "heads": heads, "bias": inference or draw(st.booleans())}
        if family == "sdpa":
            kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
            params.update(kv_heads=kv, causal=draw(st.booleans()))
        else:
            params["inference"] = inference
            params["need_weights"] = not inference and draw(st.booleans())
        return params, (draw(st.integers(1, 3)), draw(st.integers(1, 6)), embed)
    params = {"input": draw(small), "hidden": draw(small), "layers": draw(st.integers(1, 2)),
              "bias": draw(st.booleans()), "bidirectional": draw(st.booleans())}
    return params, (draw(st.integers(1, 3)), draw(st.integers(1, 5)), params["input"])


@st.composite
def flop_models(draw: st.DrawFn, family: str | st.SearchStrategy[str] | None = None) -> FlopModel:
    """A :class:`FlopModel` of ``family`` (a name, a strategy of names, or None: any)."""
    if isinstance(family, str):
        if family not in FLOP_MODEL_FAMILIES:
            raise ValueError(f"family={family!r}: expected one of {FLOP_MODEL_FAMILIES}")
        chosen = family
    else:
        chosen = draw(family if family is not None else st.sampled_from(FLOP_MODEL_FAMILIES))
    params, shape = _params(draw, chosen)
    return FlopModel(chosen, tuple(sorted(params.items())), shape, draw(st.integers(0, 2**16)))


# ---- the feature table ---------------------------------------------------------------------

_TREES = "test_flops_modules.py::test_module_attribution_is_the_hand_count"
_FUSED = "test_flops.py::test_fused_inference_paths_count_the_same_math"


def _families(tree: ModuleTree) -> set[str]:
    return {leaf.family for leaf in tree.leaves()}


def _has_family(family: str):
    return lambda tree: family in _families(tree)


def _container_depth(node: TreeSpec) -> int:
    """Containers on the longest root-to-leaf path, the root included."""
    return 1 + max((_container_depth(c) for c in node.children if isinstance(c, TreeSpec)),
                   default=0)


def _mixes_leaf_and_container(node: TreeSpec) -> bool:
    """A container holding a leaf of its own beside a nested container (its count is its
    own leaf's plus its child's: neither the child's count nor the leaf's alone)."""
    kinds = {type(c) for c in node.children}
    return {LeafSpec, TreeSpec} <= kinds or any(
        _mixes_leaf_and_container(c) for c in node.children if isinstance(c, TreeSpec))


def _grouped_conv(tree: ModuleTree) -> bool:
    return any(leaf.family in ("conv", "conv_transpose") and leaf.size("groups") > 1
               for leaf in tree.leaves())


def _tree_feature(name: str, meaning: str, detect) -> Feature:
    return Feature("flops", name, meaning, module_trees, detect, _TREES)


def _fused_draws():
    """What test_fused_inference_paths_count_the_same_math draws: a case and a fast mode."""
    return st.tuples(fused_cases(), st.sampled_from(["inference_mode", "no_grad"]))


_ENCODER_FUSED = {k for k, ops in FUSED_MODULES.items()
                  if torch.ops.aten._transformer_encoder_layer_fwd in ops}
_ATTENTION_FUSED = {k for k, ops in FUSED_MODULES.items()
                    if torch.ops.aten._native_multi_head_attention in ops}

_FAMILY_MEANINGS = {
    "linear": "an nn.Linear leaf (addmm with a bias, mm without)",
    "mm": "torch.mm on a leaf's own weight",
    "addmm": "torch.addmm (bias + product)",
    "bmm": "torch.bmm over 2-3 weight groups",
    "baddbmm": "torch.baddbmm over 2-3 weight groups",
    "matmul_broadcast": "torch.matmul of [b, k] by [g, k, n]: the 2-d operand broadcast "
                        "over the groups (reaches bmm)",
    "matmul_1d": "torch.matmul with a 1-d operand (reaches mv; its input gradient is an "
                 "outer product, 0 FLOPs)",
    "conv": "nn.Conv1d (stride 1-2, grouped where the channels allow)",
    "conv_transpose": "nn.ConvTranspose1d (stride 1-2, grouped where the channels allow)",
    "sdpa": "F.scaled_dot_product_attention on CPU (the flash kernel; its backward recomputes "
            "the scores)",
    "rnn": "nn.LSTM, nn.GRU or nn.RNN (fused LSTM kernel, decomposed GRU/RNN cells)",
}

_MM_FAMILY = "test_flops.py::test_mm_family_is_2mnk"


def _mm_family_draws():
    """The strategy ``test_mm_family_is_2mnk`` draws from (its ``CORE_MM`` ops)."""
    return matmul_cases(ops=st.sampled_from(["mm", "addmm", "bmm", "baddbmm"]))


_TABLE = "test_flops_table.py::test_table_shows_the_hand_count"
_COND = "test_flops_cond.py::test_cond_counts_the_larger_branch_and_returns_the_selected_one"
_INPLACE = "test_flops_inplace.py::test_inplace_ops_count_as_their_out_of_place_ops"
_LOOP = "test_flops_while_loop.py::test_while_loop_counts_every_iteration_and_returns_the_last"


def _stage_calls(stage: Stage) -> list[MatCall]:
    """Every product a stage of a table program runs, its children's included."""
    inner = [call for child in stage.children for call in _stage_calls(child)]
    return [*stage.before, *inner, *stage.after]


def _table_calls(program: TableProgram) -> list[MatCall]:
    """Every product a table program runs, outside and inside its modules."""
    return [*program.outside, *(call for root in program.roots for call in _stage_calls(root))]


def _table_feature(name: str, meaning: str, detect) -> Feature:
    return Feature("flops", name, meaning, table_programs, detect, _TABLE)


def _cond_zero_in_one_branch(p: CondProgram) -> bool:
    return ("empty" in p.true_steps) != ("empty" in p.false_steps)


def _cond_feature(name: str, meaning: str, detect) -> Feature:
    return Feature("flops", name, meaning, cond_programs, detect, _COND)


def _any_in_place(p: InplaceProgram) -> bool:
    return any(in_place for _, in_place in p.steps)


def _inplace_feature(name: str, meaning: str, detect) -> Feature:
    return Feature("flops", name, meaning, inplace_programs, detect, _INPLACE)


#: the FLOP component's features (module docstring); docs/features.md lists them.
FEATURES: tuple[Feature, ...] = (
    *(_tree_feature(f"family_{family}", meaning, _has_family(family))
      for family, meaning in _FAMILY_MEANINGS.items()),
    _tree_feature("grouped_conv", "a convolution or transposed convolution with groups > 1",
                  _grouped_conv),
    _tree_feature("conv_backward", "a convolution leaf in a tree that also runs backward",
                  lambda t: "backward" in t.modes
                  and bool(_families(t) & {"conv", "conv_transpose"})),
    _tree_feature("nesting", "a leaf three containers deep (modules inside modules inside "
                  "modules)", lambda t: _container_depth(t.root) >= 3),
    _tree_feature("attribution", "a container with a leaf of its own beside a nested "
                  "container", lambda t: _mixes_leaf_and_container(t.root)),
    *(_tree_feature(f"mode_{mode}", meaning, lambda t, mode=mode: mode in t.modes)
      for mode, meaning in [("backward", "run forward, then backward (autograd on)"),
                            ("forward", "run forward only with autograd on"),
                            ("no_grad", "run under torch.no_grad()"),
                            ("inference", "run under torch.inference_mode()")]),
    _tree_feature("input_without_grad", "the tree's input does not require grad (the first "
                  "leaf's backward forms only its weight's gradient)",
                  lambda t: not t.input_grad),
    _tree_feature("compiled", "a container wrapped by torch.compile (its OptimizedModule "
                  "wrapper and _orig_mod are both credited in full)",
                  lambda t: any(c.compiled for c in t.containers())),
    _tree_feature("compiled_nested", "the compiled wrapper below the root (pytorch/pytorch"
                  "#124196's shape)", lambda t: any(c.compiled for c in t.containers()[1:])),
    Feature("flops", "fused_inference_mode", "a fused inference path (nn.MultiheadAttention, "
            "nn.Transformer*) under torch.inference_mode()", _fused_draws,
            lambda v: v[1] == "inference_mode", _FUSED),
    Feature("flops", "fused_no_grad", "a fused inference path under eval() + torch.no_grad()",
            _fused_draws, lambda v: v[1] == "no_grad", _FUSED),
    Feature("flops", "fused_encoder_layer", "a module whose inference path runs "
            "aten._transformer_encoder_layer_fwd", _fused_draws,
            lambda v: v[0].kind in _ENCODER_FUSED, _FUSED),
    Feature("flops", "fused_attention", "a module whose inference path runs "
            "aten._native_multi_head_attention", _fused_draws,
            lambda v: v[0].kind in _ATTENTION_FUSED, _FUSED),
    Feature("flops", "mm_keyword_scalars", "an addmm or baddbmm call passing beta and/or "
            "alpha by keyword (pytorch/pytorch#98247)", _mm_family_draws,
            lambda case: bool(case.scalars), _MM_FAMILY),
    _table_feature("table_nested_modules", "a root module of the table program with child "
                   "modules (indented rows, cut by the table's depth)",
                   lambda p: any(root.children for root in p.roots)),
    _table_feature("table_global_row", "products run outside every module (counted under "
                   "Global only)", lambda p: bool(p.outside)),
    _table_feature("table_two_roots", "two root modules, of distinct class names",
                   lambda p: len(p.roots) > 1),
    _table_feature("table_zero_product", "a product with an empty inner dimension (a row of "
                   "0 FLOPs)", lambda p: any(call.k == 0 for call in _table_calls(p))),
    _table_feature("table_large_units", "a total of at least 10 million FLOPs (the table's "
                   "numbers in M or a larger unit)",
                   lambda p: sum(2 * c.batch * c.m * c.k * c.n
                                 for c in _table_calls(p)) >= 10**7),
    _cond_feature("cond_branches_differ", "torch.cond branches that run different products "
                  "(the larger branch is a real choice)",
                  lambda p: sorted(p.true_steps) != sorted(p.false_steps)),
    _cond_feature("cond_counted_before", "products counted before the torch.cond (outside "
                  "the module or in it before the cond; FLOPs 7)",
                  lambda p: bool(p.before or p.outside)),
    _cond_feature("cond_zero_in_one_branch", "an mm of 0 FLOPs (empty inner dimension) in "
                  "exactly one torch.cond branch", _cond_zero_in_one_branch),
    Feature("flops", "loop_iterations", "a torch.while_loop whose body runs 2-3 times",
            loop_programs, lambda p: p.iterations >= 2, _LOOP),
    Feature("flops", "loop_never_runs", "a torch.while_loop whose body never runs (nothing "
            "of it counted or listed)", loop_programs, lambda p: p.iterations == 0, _LOOP),
    _inplace_feature("inplace_step", "a step run in place (cumsum_, index_fill_, "
                     "_foreach_add_, ...)", _any_in_place),
    _inplace_feature("inplace_backward", "a backward through a program with in-place "
                     "steps", lambda p: p.backward and _any_in_place(p)),
)
