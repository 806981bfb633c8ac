"""An independent hand derivation of a model's matrix-product FLOPs, layer by layer.

This is the expectation every FLOP property checks a counter against (refimpl's formula table,
torch's FlopCounterMode, the peer counters), so it never reads refimpl's formula table: each
layer's count is derived here from first principles, from the layer's hyper-parameters and
the shapes it saw, recorded by forward hooks while the model runs once.

Conventions: one multiply-accumulate is 2 FLOPs; only matrix products are counted (a product
of an ``[m, k]`` and a ``[k, n]`` matrix is ``2 m k n``); bias additions, activations,
normalisation, softmax, pooling, dropout and residual adds are free. Bias additions are tallied
apart (``bias_adds``: one per output element of a layer with a bias), so a peer that counts
them can be compared. Every product carries a family (a peer states which families it counts).

The table (B batch, T rows or tokens, E embedding, H heads; the family in brackets):

| layer [family] | forward FLOPs |
| --- | --- |
| Linear(in, out) [linear] | ``2 T in out`` |
| own linear [linear_fn] | the same: transformers' Conv1D, ``FunctionalLinear`` |
| ConvNd, out ``[B, Co, *O]`` [conv] | ``2 B prod(O) Co (Ci/g) prod(k)`` |
| ConvTransposeNd, in ``[B, Ci, *I]`` [conv_transpose] | ``2 B prod(I) Ci (Co/g) prod(k)`` |
| MultiheadAttention [mha] | projections ``2 Tq E E + 2 Tk (kdim + vdim) E + 2 Tq E E``; |
|   attention [mha; sdpa when need_weights=False] | ``2 * 2 B Lq Lk E`` (q k^T, p v) |
| TransformerEncoderLayer(E, F) | its self-attention + ``2 T E F + 2 T F E`` [linear] |
| LSTM / GRU, G = 4 / 3 gates [lstm, gru] | per layer, direction ``2 T B G H (I + H)`` |
| Swin ShiftedWindowAttention | qkv ``2 T' C 3C`` + proj ``2 T' C C`` [linear_fn], T' |
|   (windows of N = w0 w1 tokens) | tokens padded to whole windows; ``2 * 2 W N N C`` [matmul] |
| attention by name [sdpa] | ``2 B H Sq Sk (D + Dv)``: scores only (GPT-2, BERT, Llama, |
|   | SdpaBlock); its projection modules count themselves |

Units: a layer of the table is counted as a whole from its inputs' shapes and configuration,
and the modules inside it are not visited (torch's fused inference paths run an
encoder layer without calling its children); an attention module named in
``ATTENTION_MODULES`` counts its scores alone, and its projection modules, which it calls,
count themselves.

Backward: a product ``y = a b`` gives ``da = dy b^T`` and ``db = a^T dy``, each one product of
the forward's size; so a product's backward is its forward times the number of its operands
that need a gradient (an input when it requires grad, a weight). Attention's inner products
take both gradients: 2x. Where the kernel recomputes the scores in the backward (the flash
kernels; CPU flash is the only SDPA path for float32 without dropout here), set
``Conventions.attention_backward_recomputes`` (+1 ``q k^T``). The fused CPU LSTM kernel forms
every gradient of both products (2x); a GRU runs as separate products, and its step-0 hidden
product reads the zero initial state, which needs no gradient. A layer's backward counts only
when its output requires grad (what a full backward will cost).

Invariant: every layer that runs is counted once (a layer inside a whole unit is not), so the
derivation's totals are the sums over the outermost units that ran.

Per-module attribution (:func:`tree_module_flops`): over a drawn module tree
(:class:`refimpl.strategies.flop_trees.ModuleTree`), each leaf's FLOPs belong to "Global",
the leaf, its ``inner`` layer and every container on its path.

``torch.cond`` (:func:`cond_counts`, :func:`cond_result`): what a FLOP counter must report
for a program that calls ``torch.cond``, and what the call must return, by hand from the
program's plain data (:class:`refimpl.strategies.flop_programs.CondProgram`). torch
documents its counter's rule for ``torch.cond``: both branches are counted apart and, per
module and per op, the larger of the two counts is added (an upper bound on what any call
costs, whichever branch a later call takes). The call itself returns the branch the
predicate selects, under a counter as without one. Counts: a square product of ``[n, n]``
matrices (``mm``, ``addmm``, ``bmm``) is ``2 n^3`` FLOPs; the ``empty`` step is an ``mm`` of
0 FLOPs (an empty inner dimension), still listed under ``mm``. Products outside the module
count under "Global" only; those of the module (before, the cond's bound, after) under
"Global" and ``CondBlock``. An op that appears in either branch is listed, with its bound (0
when it counted 0).

torch.while_loop (``loop_counts``, ``loop_result``): the loop means ``while
cond_fn(*carried): carried = body_fn(*carried)`` (its documentation), so a counter counts
what ran: the body's products once per iteration, under "Global" and ``LoopBlock``, and
nothing of a body that never ran; the result is the body applied that many times.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import prod
from typing import Any

import torch
from torch import nn

#: the layer families a derivation reports (a peer states which of them it counts).
FAMILIES = ("linear", "linear_fn", "conv", "conv_transpose", "sdpa", "mha", "matmul", "lstm",
            "gru")


@dataclass(frozen=True)
class Conventions:
    """Options of the derivation (see the module docstring)."""

    attention_backward_recomputes: bool = False


@dataclass(frozen=True)
class Product:
    """One product of a layer: its family, forward FLOPs, backward FLOPs (were a full
    backward to run) and the bias additions that go with it."""

    family: str
    forward: int
    backward: int
    bias_adds: int = 0


def _needs(t: Any) -> int:
    return int(isinstance(t, torch.Tensor) and t.requires_grad)


def _product(family: str, forward: int, grads: int, bias_adds: int = 0) -> Product:
    return Product(family, forward, forward * grads, bias_adds)


# ---- the table: one function per layer kind, each returning that layer's products ----------

def _linear(family: str, x: torch.Tensor, weight: torch.Tensor, n_in: int, n_out: int,
            bias: bool) -> list[Product]:
    rows = x.numel() // n_in
    forward = 2 * rows * n_in * n_out
    return [_product(family, forward, _needs(x) + _needs(weight), rows * n_out if bias else 0)]


def _conv(m: nn.modules.conv._ConvNd, x: torch.Tensor, y: torch.Tensor) -> list[Product]:
    dims = len(m.kernel_size)
    batch = x.shape[0] if x.dim() == dims + 2 else 1
    per_position = (m.in_channels // m.groups) * m.out_channels * prod(m.kernel_size)
    positions = prod(x.shape[-dims:]) if m.transposed else prod(y.shape[-dims:])
    family = "conv_transpose" if m.transposed else "conv"
    bias_adds = y.numel() if m.bias is not None else 0
    return [_product(family, 2 * batch * positions * per_position,
                     _needs(x) + _needs(m.weight), bias_adds)]


def _attention(family: str, batch: int, heads: int, seq_q: int, seq_k: int, dim: int,
               dim_v: int, recomputes: bool) -> list[Product]:
    """``q k^T`` and ``p v`` over all heads; both operands of each need gradients."""
    scores = 2 * batch * heads * seq_q * seq_k * dim
    values = 2 * batch * heads * seq_q * seq_k * dim_v
    return [Product(family, scores, 2 * scores + (scores if recomputes else 0)),
            Product(family, values, 2 * values)]


def _mha(m: nn.MultiheadAttention, q, k, v, need_weights: bool,
         rules: Conventions) -> list[Product]:
    if m.bias_k is not None or m.add_zero_attn:
        raise NotImplementedError("refimpl.expect.flops: bias_k / add_zero_attn not derived")
    unbatched = q.dim() == 2
    seq_dim = 0 if (unbatched or not m.batch_first) else 1
    batch = 1 if unbatched else q.shape[1 - seq_dim]
    lq, lk, e = q.shape[seq_dim], k.shape[seq_dim], m.embed_dim
    w = _needs(m.in_proj_weight if m._qkv_same_embed_dim else m.q_proj_weight)
    in_bias = e if m.in_proj_bias is not None else 0
    out_bias = e if m.out_proj.bias is not None else 0
    recomputes = rules.attention_backward_recomputes and not need_weights
    attention_family = "mha" if need_weights else "sdpa"
    return [_product("mha", 2 * batch * lq * e * e, _needs(q) + w, batch * lq * in_bias),
            _product("mha", 2 * batch * lk * m.kdim * e, _needs(k) + w, batch * lk * in_bias),
            _product("mha", 2 * batch * lk * m.vdim * e, _needs(v) + w, batch * lk * in_bias),
            *_attention(attention_family, batch, m.num_heads, lq, lk, e // m.num_heads,
                        e // m.num_heads, recomputes),
            _product("mha", 2 * batch * lq * e * e, 1 + _needs(m.out_proj.weight),
                     batch * lq * out_bias)]


def _mha_call(m: nn.MultiheadAttention, args: tuple, kwargs: dict,
              rules: Conventions) -> list[Product]:
    names = ("query", "key", "value", "key_padding_mask", "need_weights")
    bound = dict(zip(names, args)) | kwargs
    return _mha(m, bound["query"], bound["key"], bound["value"],
                bool(bound.get("need_weights", True)), rules)


def _encoder_layer(m: nn.TransformerEncoderLayer, x, rules: Conventions) -> list[Product]:
    attention = _mha(m.self_attn, x, x, x, need_weights=False, rules=rules)
    inner = x.numel() // m.linear1.in_features
    first, second = m.linear1, m.linear2
    ffn = 2 * inner * first.in_features * first.out_features
    return [*attention,
            _product("linear", ffn, 1 + _needs(first.weight),
                     inner * first.out_features if first.bias is not None else 0),
            _product("linear", ffn, 1 + _needs(second.weight),
                     inner * second.out_features if second.bias is not None else 0)]


def _rnn(m: nn.RNNBase, x: torch.Tensor) -> list[Product]:
    gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}[m.mode]
    steps_rows = x.numel() // x.shape[-1]
    batch = 1 if x.dim() == 2 else x.shape[0 if m.batch_first else 1]
    dirs, hid = 1 + int(m.bidirectional), m.hidden_size
    family = "lstm" if m.mode == "LSTM" else "gru"
    products = []
    for layer in range(m.num_layers):
        n_in = m.input_size if layer == 0 else hid * dirs
        ih, hh = 2 * steps_rows * gates * hid * n_in, 2 * steps_rows * gates * hid * hid
        bias = steps_rows * 2 * gates * hid if m.bias else 0
        if m.mode == "LSTM":  # fused kernel: every gradient of both products
            backward = 2 * (ih + hh)
        else:  # separate products: the zero initial state needs no gradient
            x_grad = layer > 0 or x.requires_grad
            backward = ih * (1 + x_grad) + 2 * hh - 2 * batch * gates * hid * hid
        products.append(Product(family, dirs * (ih + hh), dirs * backward, dirs * bias))
    return products


def _window_attention(m: nn.Module, x: torch.Tensor) -> list[Product]:
    """torchvision's ShiftedWindowAttention on ``[B, H, W, C]`` (padded to whole windows)."""
    b, h, w, c = x.shape
    w0, w1 = m.window_size
    ph, pw = -(-h // w0) * w0, -(-w // w1) * w1
    tokens, windows, n = b * ph * pw, b * (ph // w0) * (pw // w1), w0 * w1
    qkv_bias = tokens * 3 * c if m.qkv.bias is not None else 0
    proj_bias = tokens * c if m.proj.bias is not None else 0
    return [_product("linear_fn", 2 * tokens * c * 3 * c, _needs(x) + _needs(m.qkv.weight),
                     qkv_bias),
            *_attention("matmul", windows, 1, n, n, c, c, recomputes=False),
            _product("linear_fn", 2 * tokens * c * c, 1 + _needs(m.proj.weight), proj_bias)]


#: class name -> (attribute with the query head count, attribute with the head dim).
ATTENTION_MODULES = {
    "GPT2Attention": ("num_heads", "head_dim"),
    "BertSelfAttention": ("num_attention_heads", "attention_head_size"),
    "LlamaAttention": (None, "head_dim"),
    "SdpaBlock": ("heads", "head_dim"),
}


def _named_attention(m: nn.Module, y: torch.Tensor, rules: Conventions) -> list[Product]:
    heads_attr, dim_attr = ATTENTION_MODULES[type(m).__name__]
    heads = getattr(m, heads_attr) if heads_attr else m.config.num_attention_heads
    dim = getattr(m, dim_attr)
    return _attention("sdpa", y.shape[0], heads, y.shape[1], y.shape[1], dim, dim,
                      rules.attention_backward_recomputes)


def layer_products(m: nn.Module, args: tuple, kwargs: dict, out: Any,
                   rules: Conventions) -> list[Product] | None:
    """The products of one call of ``m`` by the module docstring's table; None when ``m``
    is not a layer of the table (its children, if any, count themselves)."""
    name = type(m).__name__
    x = _first_tensor((args, kwargs))
    if isinstance(m, nn.Linear):
        return _linear("linear", x, m.weight, m.in_features, m.out_features, m.bias is not None)
    if name == "Conv1D":  # transformers' GPT-2 projection: x @ W + b, W [in, out]
        return _linear("linear_fn", x, m.weight, m.weight.shape[0], m.nf, True)
    if name == "FunctionalLinear":  # F.linear(x, W, b) in a custom module
        n_out, n_in = m.weight.shape
        return _linear("linear_fn", x, m.weight, n_in, n_out, m.bias is not None)
    if isinstance(m, nn.modules.conv._ConvNd):
        return _conv(m, x, _first_tensor(out))
    if isinstance(m, nn.MultiheadAttention):
        return _mha_call(m, args, kwargs, rules)
    if isinstance(m, nn.TransformerEncoderLayer):
        return _encoder_layer(m, args[0] if args else kwargs["src"], rules)
    if isinstance(m, nn.RNNBase):
        return _rnn(m, x)
    if name == "ShiftedWindowAttention":
        return _window_attention(m, x)
    if name in ATTENTION_MODULES:
        return _named_attention(m, _first_tensor(out), rules)
    return None


def _first_tensor(values: Any) -> torch.Tensor | None:
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (tuple, list)):
        for value in values:
            found = _first_tensor(value)
            if found is not None:
                return found
    if hasattr(values, "to_tuple"):  # transformers' ModelOutput
        return _first_tensor(values.to_tuple())
    return None


# ---- the derivation: the table applied to the outermost layers that ran ---------------------

@dataclass(frozen=True)
class UnitCount:
    """One counted layer call: its module's name and type, and its products."""

    name: str
    kind: str
    products: tuple[Product, ...]


@dataclass
class Derivation:
    """The counted calls, and their products summed per family (forward, backward, bias)."""

    units: list[UnitCount] = field(default_factory=list)
    forward: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    backward: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bias_adds: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, unit: UnitCount) -> None:
        self.units.append(unit)
        for p in unit.products:
            self.forward[p.family] += p.forward
            self.backward[p.family] += p.backward
            self.bias_adds[p.family] += p.bias_adds

    def total_forward(self, families: Any = None) -> int:
        return sum(v for f, v in self.forward.items() if families is None or f in families)

    def total_backward(self) -> int:
        return sum(self.backward.values())

    def ran(self) -> set[str]:
        """The families with a non-zero forward count."""
        return {f for f, v in self.forward.items() if v}


_WHOLE_TYPES = (nn.Linear, nn.modules.conv._ConvNd, nn.MultiheadAttention,
                nn.TransformerEncoderLayer, nn.RNNBase)
_WHOLE_NAMES = ("Conv1D", "FunctionalLinear", "ShiftedWindowAttention")


def is_unit(m: nn.Module) -> bool:
    """Whether ``m`` is a layer of the table counted as a whole (its children not visited);
    the attention modules of ``ATTENTION_MODULES`` are layers that are not units."""
    return isinstance(m, _WHOLE_TYPES) or type(m).__name__ in _WHOLE_NAMES


@dataclass
class FlopDerivation:
    """Context manager: ``with FlopDerivation(model) as d: model(x)``, then ``d.result()``.

    Hooks every submodule of ``model``; a layer of the table that runs while no whole unit is
    running is counted (its backward too when its output requires grad)."""

    model: nn.Module
    rules: Conventions = field(default_factory=Conventions)
    _derivation: Derivation = field(default_factory=Derivation)
    _active: list[nn.Module] = field(default_factory=list)
    _handles: list[Any] = field(default_factory=list)

    def __enter__(self) -> FlopDerivation:
        self._derivation = Derivation()
        names = {m: n or type(self.model).__name__ for n, m in self.model.named_modules()}
        for module, name in names.items():
            self._handles += [
                module.register_forward_pre_hook(self._enter, with_kwargs=True),
                module.register_forward_hook(self._leave(name), with_kwargs=True)]
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _enter(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if not self._active and is_unit(module):
            self._active.append(module)

    def _leave(self, name: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
            if self._active and self._active[-1] is module:
                self._active.pop()
            elif self._active:
                return  # inside a whole unit
            products = layer_products(module, args, kwargs, out, self.rules)
            if products is None:
                return
            first = _first_tensor(out)
            if not (isinstance(first, torch.Tensor) and first.requires_grad):
                products = [Product(p.family, p.forward, 0, p.bias_adds) for p in products]
            self._derivation.add(UnitCount(name, type(module).__name__, tuple(products)))
        return hook

    def result(self) -> Derivation:
        return self._derivation


#: the conventions of :func:`derive`: the fused attention kernels recompute the scores.
FUSED_KERNELS = Conventions(attention_backward_recomputes=True)


def derive(model: nn.Module, inputs: tuple, backward: bool = False,
           rules: Conventions = FUSED_KERNELS) -> Derivation:
    """Run ``model(*inputs)`` once and derive its matrix-product FLOPs layer by layer (the
    backward's too when ``backward``; by default the fused attention kernels recompute)."""
    with FlopDerivation(model, rules) as walk:
        model(*inputs)
    derivation = walk.result()
    if not backward:
        derivation.backward.clear()
    return derivation


def assert_flops_match(what: str, counter: Any, expected: int) -> None:
    """Assert that ``counter`` (a FlopCounterMode after its ``with``) counted ``expected``
    FLOPs and, where it reports them, left no op uncounted; the message carries both."""
    uncounted = counter.uncounted_ops() if hasattr(counter, "uncounted_ops") else {}
    observed = counter.get_total_flops()
    assert not uncounted, f"{what}: ops with no formula ran: {uncounted}"
    assert observed == expected, (f"{what}: counted {observed} FLOPs, derived {expected} "
                                  f"(difference {observed - expected:+d})")


def assert_model_flops(observed: int, expected: int, reproducer: str) -> None:
    """``observed == expected``, else an AssertionError carrying both and the reproducer."""
    if observed != expected:
        raise AssertionError(
            f"model FLOPs: expected {expected} (hand derivation, by the counter's stated "
            f"conventions), observed {observed} ({observed - expected:+d})\n"
            f"reproducer: {reproducer}")


# ---- per-module attribution: a hand count over a drawn module tree ---------------------------

#: leaf families whose leaf holds a torch layer named ``inner`` (one more module name).
_WITH_INNER = ("linear", "conv", "conv_transpose", "rnn")
_PRODUCT_FAMILIES = ("linear", "mm", "addmm", "bmm", "baddbmm", "matmul_broadcast",
                     "matmul_1d")


def _tree_leaf_forward(leaf: Any, batch: int) -> int:
    """One leaf's forward FLOPs (refimpl.strategies.flop_trees, read as plain data)."""
    n_in, n_out, size = leaf.width_in, leaf.width_out, leaf.size
    if leaf.family in _PRODUCT_FAMILIES:  # [b, in] x [in, out], once per group
        groups = size("groups")
        return 2 * groups * batch * n_in * n_out
    if leaf.family in ("conv", "conv_transpose"):
        per_group_in = size("channels") // size("groups")
        per_group_out = size("out_channels") // size("groups")
        if leaf.family == "conv":  # every output position of every output channel
            positions = n_out // size("out_channels")
            return 2 * batch * positions * size("out_channels") * per_group_in * size("kernel")
        # transposed: every input position of every input channel meets its group's filters
        return 2 * batch * size("length") * size("channels") * per_group_out * size("kernel")
    if leaf.family == "sdpa":  # q k^T and p v
        return 2 * 2 * batch * size("heads") * size("tokens") ** 2 * size("dim")
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[size("kind")]
    features, hidden = n_in // size("steps"), size("hidden")
    return 2 * size("steps") * batch * gates * hidden * (features + hidden)


def _tree_leaf_backward(leaf: Any, batch: int, input_grad: bool) -> int:
    """One leaf's backward FLOPs: per product, one product of the forward's size for each
    operand that needs a gradient (module docstring, Backward). The parameters always do;
    the leaf's input when ``input_grad``. Exceptions by the op's backward kernel: a
    matrix-vector product's input gradient is an outer product, which eager runs as an
    element-wise multiply (0 by convention); CPU attention (flash) recomputes the scores
    (``2 B H S S (3 D + 2 D)``); the fused LSTM kernel forms both gradients of both products;
    a GRU or RNN cell's hidden product at step 0 reads the zero initial state, which needs
    no gradient."""
    forward, size = _tree_leaf_forward(leaf, batch), leaf.size
    if leaf.family == "matmul_1d":
        return forward
    if leaf.family == "sdpa":
        scores = 2 * batch * size("heads") * size("tokens") ** 2 * size("dim")
        return 5 * scores if input_grad else 0
    if leaf.family != "rnn":
        return forward * (1 + int(input_grad))
    if size("kind") == "LSTM":
        return 2 * forward
    gates = {"GRU": 3, "RNN": 1}[size("kind")]
    features, hidden, steps = leaf.width_in // size("steps"), size("hidden"), size("steps")
    input_part = 2 * steps * batch * gates * hidden * features
    hidden_part = 2 * steps * batch * gates * hidden * hidden
    return (input_part * (1 + int(input_grad)) + 2 * hidden_part
            - 2 * batch * gates * hidden * hidden)


def _tree_names(node: Any, name: str) -> tuple[list[str], str]:
    """The names a container at ``name`` adds, and the prefix of its children's names."""
    if node.compiled:
        return [name, f"{name}._orig_mod"], f"{name}._orig_mod"
    return [name], name


def tree_module_flops(tree: Any, mode: str) -> dict[str, int]:
    """{module name: FLOPs} a counter must report for running ``tree`` (a drawn
    :class:`refimpl.strategies.flop_trees.ModuleTree`) in ``mode``, by hand from its plain
    data.

    A leaf's FLOPs (forward; plus backward when ``mode`` is "backward") belong to "Global",
    to the leaf, to its ``inner`` layer if it has one, and to every container on its path
    (a compiled container: its ``OptimizedModule`` wrapper and the ``_orig_mod`` inside,
    each in full). A leaf's input needs a gradient when the tree's input does or an earlier
    leaf has parameters. Names with 0 FLOPs are left out."""
    counts: dict[str, int] = defaultdict(int)
    backward = mode == "backward"
    needs_grad = tree.input_grad
    root_name = "OptimizedModule" if tree.root.compiled else "Block"
    stack = [(tree.root, root_name, ["Global"])]
    ordered_leaves: list[tuple[Any, list[str]]] = []
    while stack:
        node, name, above = stack.pop()
        if hasattr(node, "children"):
            names, prefix = _tree_names(node, name)
            for i in reversed(range(len(node.children))):
                stack.append((node.children[i], f"{prefix}.{i}", above + names))
            continue
        own = [name] + ([f"{name}.inner"] if node.family in _WITH_INNER else [])
        ordered_leaves.append((node, above + own))
    runs_backward = backward and (needs_grad or any(leaf.has_parameters
                                                    for leaf, _ in ordered_leaves))
    for leaf, names in ordered_leaves:
        flops = _tree_leaf_forward(leaf, tree.batch)
        if runs_backward:
            flops += _tree_leaf_backward(leaf, tree.batch, needs_grad)
        for name in names:
            counts[name] += flops
        needs_grad = needs_grad or leaf.has_parameters
    return {name: n for name, n in counts.items() if n}


# ---- torch.cond: the larger branch's count, the selected branch's result ---------------------

#: the class name of a cond program's module (its counts' key).
MODULE = "CondBlock"
#: the counts' key of every FLOP counted.
GLOBAL = "Global"


def step_counts(steps: tuple[str, ...], n: int) -> dict[Any, int]:
    """{op packet: FLOPs} of running ``steps`` on ``[n, n]`` matrices."""
    counts: dict[Any, int] = {}
    for step in steps:
        packet = getattr(torch.ops.aten, "mm" if step == "empty" else step)
        counts[packet] = counts.get(packet, 0) + (0 if step == "empty" else 2 * n ** 3)
    return counts


def _added(into: dict[Any, int], more: dict[Any, int]) -> dict[Any, int]:
    return {op: into.get(op, 0) + more.get(op, 0) for op in {*into, *more}}


def _block_counts(program: Any, middle: dict[Any, int], module: str
                  ) -> dict[str, dict[Any, int]]:
    """The counts of a program whose module runs ``before``, then ``middle`` (the
    higher-order op's share), then ``after``: all of it, and ``outside``, under "Global";
    the module's own entry only where it counted something."""
    n = program.size
    inside = _added(_added(step_counts(program.before, n), middle),
                    step_counts(program.after, n))
    counts = {GLOBAL: _added(step_counts(program.outside, n), inside)}
    if inside:
        counts[module] = inside
    return counts


def _by_definition(names: tuple[str, ...], y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``y`` through the steps ``names``, each by its definition (``y w``, ``y + y w``, or
    unchanged for ``empty``), in plain torch."""
    for name in names:
        y = y + y @ w if name == "addmm" else y if name == "empty" else y @ w
    return y


def cond_counts(program: Any) -> dict[str, dict[Any, int]]:
    """{name: {op packet: FLOPs}} a counter must report for ``program`` (module docstring)."""
    n = program.size
    true, false = step_counts(program.true_steps, n), step_counts(program.false_steps, n)
    bound = {op: max(true.get(op, 0), false.get(op, 0)) for op in {*true, *false}}
    return _block_counts(program, bound, MODULE)


def cond_result(program: Any, x: torch.Tensor) -> torch.Tensor:
    """What the module returns: ``before``, the branch ``pred`` selects, ``after``, each
    step by its definition (``y x``, ``y + y x``, ...), in plain torch without torch.cond."""
    y = _by_definition(program.before, x, x)
    y = _by_definition(program.true_steps if program.pred else program.false_steps, y, y)
    return _by_definition(program.after, y, x)


# ---- torch.while_loop: every iteration's count, the loop's result ----------------------------

#: the class name of a loop program's module (its counts' key).
LOOP_MODULE = "LoopBlock"


def loop_counts(program: Any) -> dict[str, dict[Any, int]]:
    """{name: {op packet: FLOPs}} a counter must report for a loop ``program``: what ran,
    the body once per iteration (torch's documented meaning of while_loop: ``while
    cond_fn(*carried): carried = body_fn(*carried)``)."""
    n = program.size
    ran = step_counts(program.body, n) if program.iterations else {}  # never ran: not listed
    body = {op: program.iterations * flops for op, flops in ran.items()}
    return _block_counts(program, body, LOOP_MODULE)


def loop_result(program: Any, x: torch.Tensor) -> torch.Tensor:
    """What the loop module returns: ``before``, the body ``iterations`` times, ``after``,
    each step by its definition (``y x``, ``y + y x``, ...), in plain torch."""
    y = _by_definition(program.before, x, x)
    for _ in range(program.iterations):
        y = _by_definition(program.body, y, x)
    return _by_definition(program.after, y, x)
