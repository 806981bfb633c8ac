"""Structural keys: when two argument values are "the same" for CSE.

A key is a hashable, fully structural description of an argument. Two arguments get equal
keys exactly when substituting one for the other cannot change what an op computes:

* a graph value (``fx.Node``) is described by the caller (its representative and the version
  of the storage it reads, see :mod:`refimpl.cse.eliminate`);
* a Python number is keyed by its type *and* its bits: ``1``, ``1.0`` and ``True`` differ
  (``hash`` makes them collide), ``0.0`` and ``-0.0`` differ (``==`` says they are equal),
  NaN equals a NaN with the same bits (``==`` says it does not) and ``nan`` is not ``-nan``;
* lists, tuples and slices are keyed element by element, with their type;
* a dict (the kwargs) is keyed as a mapping: the order of its items does not matter;
* dtypes, devices, layouts, memory formats, strings and other hashable immutable leaves are
  keyed by type and value;
* a SymInt/SymFloat/SymBool, a tensor constant, or any unhashable object is keyed by identity:
  the same object is the same value, and nothing else is assumed.

Invariant: ``freeze(a) == freeze(b)`` implies ``a`` and ``b`` are interchangeable as op
arguments (given that the caller's node keys have the same property).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import fx

_BY_IDENTITY = (torch.SymInt, torch.SymFloat, torch.SymBool, torch.Tensor)
_VALUE_LEAVES = (str, bytes, type(None), type(Ellipsis), torch.dtype, torch.device,
                 torch.layout, torch.memory_format)


def float_key(value: float) -> tuple[str, bytes]:
    """A float by its IEEE-754 bits: -0.0 is not 0.0, NaN equals a NaN of the same bits,
    and NaN is not -NaN (the sign bit survives into a tensor: ``signbit`` sees it)."""
    return ("float", struct.pack(">d", value))


def freeze(value: Any, node_key: Callable[[fx.Node], tuple]) -> Hashable:
    """The structural key of one argument value (see the module docstring).

    ``node_key`` must return a tuple whose first item is a Node, so graph values can never
    collide with the ``(type name, ...)`` keys of constants.
    """
    kind = type(value)
    if kind is fx.Node:
        return node_key(value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple([freeze(v, node_key) for v in value]))
    if kind is int:
        return ("int", value)
    if kind is float:
        return float_key(value)
    if kind is bool:
        return ("bool", value)
    if kind is dict:
        return _freeze_mapping(value, node_key)
    return _freeze_other(value, node_key)


def _freeze_mapping(value: dict, node_key: Callable[[fx.Node], tuple]) -> Hashable:
    """A mapping: the set of its (key, value) keys, so the order of the items is ignored."""
    return ("dict", frozenset((freeze(k, node_key), freeze(v, node_key))
                              for k, v in value.items()))


def _freeze_other(value: Any, node_key: Callable[[fx.Node], tuple]) -> Hashable:
    """The rarer cases of :func:`freeze`, and subclasses of the common ones (``bool`` has
    none, and :func:`freeze` takes every ``fx.Node`` and ``bool`` itself)."""
    if isinstance(value, _BY_IDENTITY):
        return ("identity", id(value))
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return float_key(value)
    if isinstance(value, complex):
        return ("complex", float_key(value.real), float_key(value.imag))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple([freeze(v, node_key) for v in value]))
    if isinstance(value, slice):
        return ("slice", freeze(value.start, node_key), freeze(value.stop, node_key),
                freeze(value.step, node_key))
    if isinstance(value, dict):
        return _freeze_mapping(value, node_key)
    if isinstance(value, _VALUE_LEAVES):
        return (type(value).__qualname__, value)
    return ("identity", id(value))
