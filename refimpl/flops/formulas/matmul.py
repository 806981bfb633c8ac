"""FLOP formulas for matrix products: the mm family and its vector relatives.

Every entry reduces to one count, :func:`matmul_flops`: a product of an ``m x k`` matrix by a
``k x n`` matrix computes ``m * n`` dot products of length ``k``, each ``k`` multiplies and
``k`` adds, so ``2 * m * n * k`` FLOPs (torch's convention: 2 per multiply-accumulate, the
``-1`` of the exact ``2k - 1`` add count dropped). A batch of ``b`` such products costs ``b``
times that. Vector forms are the same product with a dimension of 1: ``mv`` is ``k = n``
columns of 1, ``dot`` is ``1 x n`` by ``n x 1``, an outer product is ``k = 1``. Scaling by
``alpha``/``beta`` and bias additions are not counted. The in-place forms (``addmm_``,
``baddbmm_``, ``addbmm_``, ``addmv_``, ``addr_``: the bias is overwritten by the result)
compute the same product and share the out-of-place formula.

``matmul``, ``einsum``, ``linear``, ``tensordot``, ``chain_matmul`` and ``linalg.multi_dot``
are not listed: they decompose into mm/bmm/mv/dot before they reach the counter, and are
counted through what they decompose to.
"""

from __future__ import annotations

from math import prod

from torch import ops

from refimpl.flops.formulas.registry import present, register_flop_formula

aten = ops.aten


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """``batch`` products (m x k) @ (k x n): ``2 * batch * m * n * k``."""
    return 2 * batch * m * n * k


def _check_inner(op: str, k: int, k2: int) -> None:
    if k != k2:
        raise ValueError(f"{op}: inner dimensions differ ({k} vs {k2})")


def mm_count(a_shape, b_shape) -> int:
    """(m x k) @ (k x n) -> 2mnk."""
    (m, k), (k2, n) = a_shape, b_shape
    _check_inner("mm", k, k2)
    return matmul_flops(m, n, k)


def bmm_count(a_shape, b_shape) -> int:
    """(b x m x k) @ (b x k x n) -> 2bmnk."""
    (b, m, k), (b2, k2, n) = a_shape, b_shape
    if b != b2:
        raise ValueError(f"bmm: batch sizes differ ({b} vs {b2})")
    _check_inner("bmm", k, k2)
    return matmul_flops(m, n, k, batch=b)


@register_flop_formula(
    [aten.mm, aten._int_mm, aten._scaled_mm, *present(aten, "_scaled_mm_v2")])
def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """mm(a, b), _int_mm, _scaled_mm(a, b, scales...): the scales are per-row/column
    multiplies of the result, not counted; the product is 2mnk."""
    return mm_count(a_shape, b_shape)


@register_flop_formula([aten.addmm, aten.addmm_, aten._addmm_activation])
def addmm_flop(bias_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """addmm(bias, a, b) = beta*bias + alpha*(a @ b): the product, 2mnk; in place
    (``bias.addmm_(a, b)``) the same product."""
    return mm_count(a_shape, b_shape)


@register_flop_formula(aten.bmm)
def bmm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """bmm(a, b): b independent products, 2bmnk. Extra positionals (the out_dtype of
    ``bmm.dtype``) do not change the count."""
    return bmm_count(a_shape, b_shape)


@register_flop_formula([aten.baddbmm, aten.baddbmm_])
def baddbmm_flop(bias_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """baddbmm(bias, a, b) = beta*bias + alpha*bmm(a, b): 2bmnk, in place too."""
    return bmm_count(a_shape, b_shape)


@register_flop_formula([aten.addbmm, aten.addbmm_])
def addbmm_flop(bias_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """addbmm(bias, a, b) = bias + sum_i a[i] @ b[i]: the same b products as bmm, 2bmnk
    (summing the b results is the accumulation of a length-bk dot product)."""
    return bmm_count(a_shape, b_shape)


@register_flop_formula(aten.mv)
def mv_flop(a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    """mv(A, x), A m x k: an mm with n = 1, 2mk."""
    (m, k), (k2,) = a_shape, x_shape
    _check_inner("mv", k, k2)
    return matmul_flops(m, 1, k)


@register_flop_formula([aten.addmv, aten.addmv_])
def addmv_flop(bias_shape, a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    """addmv(bias, A, x) = beta*bias + alpha*(A @ x): 2mk."""
    return mv_flop(a_shape, x_shape)


@register_flop_formula([aten.dot, aten.vdot])
def dot_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """dot(a, b), vdot(a, b) (conjugating a): one dot product of length n, 2n."""
    (n,), (n2,) = a_shape, b_shape
    _check_inner("dot", n, n2)
    return matmul_flops(1, 1, n)


@register_flop_formula([aten.outer, aten.ger])
def outer_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """outer(a, b) = a[:, None] @ b[None, :]: an mm with k = 1, 2mn."""
    (m,), (n,) = a_shape, b_shape
    return matmul_flops(m, n, 1)


@register_flop_formula([aten.addr, aten.addr_])
def addr_flop(bias_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """addr(bias, a, b) = beta*bias + alpha*outer(a, b): 2mn."""
    return outer_flop(a_shape, b_shape)


@register_flop_formula(aten._cdist_forward)
def cdist_flop(x1_shape, x2_shape, *args, out_shape=None, **kwargs) -> int:
    """_cdist_forward(x1 [*, P, M], x2 [*, R, M], p) -> dist [*, P, R]: each of the
    ``numel(dist)`` distances reduces over M coordinates, counted as 2 per coordinate (a
    multiply-accumulate, as in the mm that the p=2 case becomes): ``2 * numel(dist) * M``."""
    return 2 * prod(out_shape) * x1_shape[-1]


@register_flop_formula(aten._cdist_backward)
def cdist_backward_flop(grad_shape, x1_shape, *args, out_shape=None, **kwargs) -> int:
    """_cdist_backward(grad [*, P, R], x1 [*, P, M], x2, p, dist) -> grad_x1: one
    multiply-accumulate per (pair, coordinate), the forward's count ``2 * numel(grad) * M``."""
    return 2 * prod(grad_shape) * x1_shape[-1]


@register_flop_formula(present(aten, "_grouped_mm"))
def grouped_mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """_grouped_mm(a, b, offs, bias, out_dtype): G independent products. With a 2-D ``a``
    ``[m, K]`` and a 2-D ``b`` ``[K, n]`` the groups split K (``offs``): the groups' k sum to
    K, so ``2 m n K`` in all; otherwise every result element is one length-k dot product,
    ``k = a.shape[-1]``: ``2 * numel(out) * k``."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * b_shape[1] * a_shape[1]
    return 2 * prod(out_shape) * a_shape[-1]
