"""Independent FLOP derivations: walk a model's modules with forward hooks and count, per
module, the products its math performs, from first principles (not refimpl's table).

Conventions (the same ones any reasonable counter states, written out here):

- a product ``a * b`` summed into a result is 2 FLOPs (one multiply, one add); a matrix
  product ``[m, k] x [k, n]`` is ``2 m k n``;
- biases, scalings, activations, normalizations, softmax, pooling, dropout, residual adds
  and every other elementwise or reduction op are free;
- backward: a product ``y = a b`` gives ``da = dy b^T`` and ``db = a^T dy``, each one product
  of the forward's size; so a layer's backward is its forward times the number of its
  operands that need a gradient (the input when it requires grad, the weight). Attention's
  inner products (``q k^T``, ``p v``) take both gradients: 2x. Where the attention kernel
  recomputes the scores in the backward (flash-style kernels), set
  ``Conventions.attention_backward_recomputes`` (+1 ``q k^T``).

Units: a module of a type below is counted as a whole from its inputs' shapes and its
configuration, and the modules inside it are not visited (torch's fused inference paths run
a unit without calling its children):

| unit                               | forward FLOPs (T tokens, E embedding, N batch)         |
| ---------------------------------- | ------------------------------------------------------ |
| Linear(in, out)                    | 2 T in out                                             |
| ConvNd(C_in, C_out, K, groups)     | 2 N prod(out spatial) C_out (C_in / groups) prod(K)    |
| ConvTransposeNd                    | 2 N prod(in spatial) C_in (C_out / groups) prod(K)     |
| MultiheadAttention                 | projections 2 T_q E E + 2 T_k (kdim + vdim) E +        |
|                                    | 2 T_q E E, attention 2 * 2 B L_q L_k E                 |
| TransformerEncoderLayer(E, F)      | its self-attention + 2 T E F + 2 T F E                 |
| torchvision ShiftedWindowAttention | windows of N = w0 w1 tokens over the padded map:       |
|                                    | qkv 2 T' C 3C, attention 2 * 2 windows N N C, proj     |
|                                    | 2 T' C C (T' = padded tokens)                          |

Invariant: every unit that runs is counted once (a unit inside a unit is not), so
``Derivation.forward`` is the sum over the outermost units that ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Conventions:
    """Options of the derivation (see the module docstring)."""

    attention_backward_recomputes: bool = False


@dataclass(frozen=True)
class UnitCount:
    """One unit's call: its forward FLOPs and the FLOPs of its full backward."""

    name: str
    kind: str
    forward: int
    backward: int


@dataclass(frozen=True)
class Derivation:
    units: tuple[UnitCount, ...]

    @property
    def forward(self) -> int:
        return sum(u.forward for u in self.units)

    @property
    def backward(self) -> int:
        return sum(u.backward for u in self.units)


@dataclass(frozen=True)
class Product:
    """One product: its ``forward`` FLOPs, how many of its operands need a gradient, and the
    FLOPs its backward recomputes (flash-style attention)."""

    forward: int
    grads: int
    recomputed: int = 0

    @property
    def backward(self) -> int:
        return self.forward * self.grads + self.recomputed


def _needs(t: Any) -> int:
    return int(isinstance(t, torch.Tensor) and t.requires_grad)


def _linear(m: nn.Linear, x: torch.Tensor) -> list[Product]:
    tokens = x.numel() // m.in_features
    return [Product(2 * tokens * m.in_features * m.out_features,
                    _needs(x) + _needs(m.weight))]


def _conv(m: nn.modules.conv._ConvNd, x: torch.Tensor, out: torch.Tensor) -> list[Product]:
    dims = len(m.kernel_size)
    batch = x.shape[0] if x.dim() == dims + 2 else 1
    per_position = (m.in_channels // m.groups) * m.out_channels * prod(m.kernel_size)
    positions = prod(x.shape[-dims:]) if m.transposed else prod(out.shape[-dims:])
    return [Product(2 * batch * positions * per_position, _needs(x) + _needs(m.weight))]


def _attention(batch: int, lq: int, lk: int, embed: int, recomputes: bool) -> list[Product]:
    """q k^T and p v over all heads: 2 B Lq Lk E each; both operands need gradients."""
    scores = 2 * batch * lq * lk * embed
    return [Product(scores, 2, scores if recomputes else 0), Product(scores, 2)]


def _mha(m: nn.MultiheadAttention, q, k, v, need_weights: bool,
         rules: Conventions) -> list[Product]:
    if m.bias_k is not None or m.add_zero_attn:
        raise NotImplementedError("flop_derivations: bias_k / add_zero_attn not derived")
    unbatched = q.dim() == 2
    seq_dim = 0 if (unbatched or not m.batch_first) else 1
    batch = 1 if unbatched else q.shape[1 - seq_dim]
    lq, lk, e = q.shape[seq_dim], k.shape[seq_dim], m.embed_dim
    w = _needs(m.in_proj_weight if m._qkv_same_embed_dim else m.q_proj_weight)
    recomputes = rules.attention_backward_recomputes and not need_weights
    return [Product(2 * batch * lq * e * e, _needs(q) + w),
            Product(2 * batch * lk * m.kdim * e, _needs(k) + w),
            Product(2 * batch * lk * m.vdim * e, _needs(v) + w),
            *_attention(batch, lq, lk, e, recomputes),
            Product(2 * batch * lq * e * e, 1 + _needs(m.out_proj.weight))]


def _encoder_layer(m: nn.TransformerEncoderLayer, x, rules: Conventions) -> list[Product]:
    attention = _mha(m.self_attn, x, x, x, need_weights=False, rules=rules)
    tokens = x.numel() // m.linear1.in_features
    ffn = 2 * tokens * m.linear1.in_features * m.linear1.out_features
    return [*attention, Product(ffn, 1 + _needs(m.linear1.weight)),
            Product(ffn, 1 + _needs(m.linear2.weight))]


def _window_attention(m: nn.Module, x: torch.Tensor) -> list[Product]:
    """torchvision's ShiftedWindowAttention on ``[B, H, W, C]`` (padded to whole windows)."""
    b, h, w, c = x.shape
    w0, w1 = m.window_size
    ph, pw = h + (w0 - h % w0) % w0, w + (w1 - w % w1) % w1
    tokens, windows, n = b * ph * pw, b * (ph // w0) * (pw // w1), w0 * w1
    scores = 2 * windows * n * n * c
    return [Product(2 * tokens * c * 3 * c, _needs(x) + _needs(m.qkv.weight)),
            Product(scores, 2), Product(scores, 2),
            Product(2 * tokens * c * c, 1 + _needs(m.proj.weight))]


_UNIT_TYPES = (nn.Linear, nn.modules.conv._ConvNd, nn.MultiheadAttention,
               nn.TransformerEncoderLayer)


def is_unit(m: nn.Module) -> bool:
    """Whether ``m`` is counted as a whole (module docstring's table)."""
    return isinstance(m, _UNIT_TYPES) or type(m).__name__ == "ShiftedWindowAttention"


def unit_products(m: nn.Module, args: tuple, kwargs: dict, out: Any,
                  rules: Conventions) -> list[Product]:
    """The products of one call of unit ``m``."""
    if isinstance(m, nn.Linear):
        return _linear(m, args[0])
    if isinstance(m, nn.modules.conv._ConvNd):
        return _conv(m, args[0], out)
    if isinstance(m, nn.MultiheadAttention):
        names = ("query", "key", "value", "key_padding_mask", "need_weights")
        bound = dict(zip(names, args)) | kwargs
        return _mha(m, bound["query"], bound["key"], bound["value"],
                    bool(bound.get("need_weights", True)), rules)
    if isinstance(m, nn.TransformerEncoderLayer):
        return _encoder_layer(m, args[0] if args else kwargs["src"], rules)
    if type(m).__name__ == "ShiftedWindowAttention":
        return _window_attention(m, args[0])
    raise ValueError(f"unit_products: {type(m).__name__} is not a unit")


@dataclass
class FlopDerivation:
    """Context manager: ``with FlopDerivation(model) as d: model(x)``, then ``d.result()``.

    Hooks every submodule of ``model``; a unit that runs while no unit is running is counted
    (its backward too when the output requires grad: what a full backward will cost)."""

    model: nn.Module
    rules: Conventions = field(default_factory=Conventions)
    _units: list[UnitCount] = field(default_factory=list)
    _active: list[nn.Module] = field(default_factory=list)
    _handles: list[Any] = field(default_factory=list)

    def __enter__(self) -> FlopDerivation:
        self._units.clear()
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
            if not self._active or self._active[-1] is not module:
                return
            self._active.pop()
            products = unit_products(module, args, kwargs, out, self.rules)
            first = out[0] if isinstance(out, tuple) else out
            grad = isinstance(first, torch.Tensor) and first.requires_grad
            self._units.append(UnitCount(
                name, type(module).__name__, sum(p.forward for p in products),
                sum(p.backward for p in products) if grad else 0))
        return hook

    def result(self) -> Derivation:
        return Derivation(tuple(self._units))


def assert_flops_match(what: str, counter: Any, expected: int) -> None:
    """Assert that ``counter`` (a FlopCounterMode after its ``with``) counted ``expected``
    FLOPs and, where it reports them, left no op uncounted; the message carries both."""
    uncounted = counter.uncounted_ops() if hasattr(counter, "uncounted_ops") else {}
    observed = counter.get_total_flops()
    assert not uncounted, f"{what}: ops with no formula ran: {uncounted}"
    assert observed == expected, (f"{what}: counted {observed} FLOPs, derived {expected} "
                                  f"(difference {observed - expected:+d})")
