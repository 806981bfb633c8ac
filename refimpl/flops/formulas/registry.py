"""The FLOP formula table: registration, shape unwrapping and lookup.

A *formula* maps an op's arguments to the number of floating-point operations it performs.
The table is keyed by the op's ``OpOverloadPacket`` (``torch.ops.aten.mm``), so every overload
(``mm.default``, ``mm.out``, ``mm.dtype``) shares one formula, or by a ``HigherOrderOperator``
(``flex_attention``).

Convention (the same as torch.utils.flop_counter): a product term ``a * b`` that is summed
into a result counts 2 FLOPs (one multiply, one add), so a matrix product of ``m x k`` by
``k x n`` is ``2 * m * n * k``. Bias additions, scalings and element-wise epilogues are not
counted: the table measures the contraction work of matrix products, convolutions and
attention.

Registration semantics are torch's ``register_flop_formula``: a formula registered with
``get_raw=False`` receives the *shapes* of its tensor arguments (``torch.Size``) and the
output's shapes as ``out_shape=``; with ``get_raw=True`` it receives the values themselves
and the output as ``out_val=``. The stored entry is always called as
``entry(*args, out_val=out, **kwargs)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch.utils._pytree import tree_map_

#: OpOverloadPacket / HigherOrderOperator -> formula, called as f(*args, out_val=out, **kw).
flop_formulas: dict[Any, Callable[..., int]] = {}

_TARGET_TYPES = (OpOverloadPacket, HigherOrderOperator)


def shape_of(value: Any) -> Any:
    """A tensor's shape (real, fake or meta tensor alike), recursively through lists, tuples
    and dicts (tuples come back as plain tuples); any other value unchanged."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, list | tuple) and not isinstance(value, torch.Size):
        return type(value)(map(shape_of, value)) if type(value) in (list, tuple) \
            else tuple(map(shape_of, value))
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in value.items()}
    return value


def with_shapes(formula: Callable[..., int]) -> Callable[..., int]:
    """Wrap a shape formula so that it can be called with values: every tensor in args,
    kwargs and the output is replaced by its shape, the output is passed as ``out_shape``."""

    @functools.wraps(formula)
    def from_values(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        return formula(*shape_of(args), out_shape=shape_of(out_val), **shape_of(kwargs))

    return from_values


def check_target(target: Any, where: str = "register_flop_formula(targets)") -> None:
    if not isinstance(target, _TARGET_TYPES):
        raise ValueError(
            f"{where}: expected each target to be an OpOverloadPacket "
            f"(e.g. torch.ops.aten.mm) or a HigherOrderOperator, got {target!r} of type "
            f"{type(target).__name__}")


def register_flop_formula(targets: Any, get_raw: bool = False,
                          table: dict[Any, Callable[..., int]] | None = None):
    """Decorator: register ``formula`` for each op in ``targets`` (one op or a pytree of ops).

    ``get_raw=False`` (default): the formula gets shapes and ``out_shape=``; ``get_raw=True``:
    it gets the values and ``out_val=``. Registering an op twice is an error (RuntimeError),
    as in torch. Atomic: when any target is bad or already registered, none is registered.
    ``table`` defaults to refimpl's :data:`flop_formulas`. Returns the stored
    (wrapped) formula.
    """
    table = flop_formulas if table is None else table
    if not isinstance(get_raw, bool):
        raise ValueError(f"register_flop_formula(get_raw=...): expected a bool, got {get_raw!r}")

    def register_fun(formula: Callable[..., int]) -> Callable[..., int]:
        if not callable(formula):
            raise ValueError(f"register_flop_formula: formula must be callable, got {formula!r}")
        entry = formula if get_raw else with_shapes(formula)
        found: list[Any] = []
        tree_map_(found.append, targets)
        for target in found:  # check every target first: a bad one registers none (atomic)
            check_target(target)
            if target in table:
                raise RuntimeError(f"duplicate registrations for {target}")
        if len(set(found)) != len(found):
            raise RuntimeError(f"duplicate registrations: {targets!r} names an op twice")
        for target in found:
            table[target] = entry
        return entry

    return register_fun


class FlopCountError(ValueError):
    """A formula returned no FLOP count. A ValueError, never a TypeError: a TypeError raised
    under an operator call (``a + b``) is turned by ``torch.Tensor``'s operators into Python's
    "unsupported operand type(s)", which names neither the op nor the value."""


def checked_count(op: Any, value: Any) -> int:
    """``value`` as a FLOP count of ``op``: a non-negative integer, else a clear error (a
    fractional or negative count is a broken formula, never rounded or clamped)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise FlopCountError(f"FLOP formula for {op} returned {value!r} "
                             f"({type(value).__name__}): FLOP counts are non-negative integers")
    count = value.__index__()
    if count < 0:
        raise ValueError(f"FLOP formula for {op} returned {count}: FLOP counts are "
                         "non-negative integers")
    return count


def as_table_entry(formula: Callable[..., int]) -> Callable[..., int]:
    """A custom_mapping value as a table entry: raw if it carries ``_get_raw=True``."""
    if not callable(formula):
        raise ValueError(f"custom_mapping: each formula must be callable, got {formula!r}")
    return formula if getattr(formula, "_get_raw", False) else with_shapes(formula)


def packet_of(func: Any) -> Any:
    """The table key of ``func``: an OpOverload's packet; a packet or HOP itself."""
    if isinstance(func, OpOverload):
        return func.overloadpacket
    return func


def count_flops(func: Any, args: tuple = (), kwargs: dict | None = None, out: Any = None,
                table: dict[Any, Callable[..., int]] | None = None) -> int:
    """FLOPs of one call ``func(*args, **kwargs) -> out``; 0 for an op not in the table.

    ``func`` is an aten OpOverload or OpOverloadPacket (or a registered HigherOrderOperator);
    tensors may be real, fake or meta: only their shapes are read (and, for nested/varlen
    attention, the offsets when they are real). Suits FX nodes: ``count_flops(node.target,
    args_with_meta_vals, kwargs, node.meta["val"])``.
    """
    table = flop_formulas if table is None else table
    formula = table.get(packet_of(func))
    if formula is None:
        return 0
    return checked_count(func, formula(*args, out_val=out, **(kwargs or {})))


def present(namespace: Any, *names: str) -> list[Any]:
    """The packets among ``namespace.<name>`` that exist in this torch build (so the table
    can name ops of newer releases without failing on older ones)."""
    found = []
    for name in names:
        try:
            found.append(getattr(namespace, name))
        except (AttributeError, RuntimeError):
            continue
    return found
