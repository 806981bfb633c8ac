"""Which inputs a compiled graph mutates, and what that forbids the backward to read.

AOTAutograd functionalises a training graph: an in-place write to an input ``w`` becomes a
pure op whose result (``w``'s new value) is a forward output, and AOTAutograd's runtime
copies that value into ``w`` after the forward graph has run. So the joint graph's primal
``w`` holds the value from BEFORE the write, but by the time the backward runs the tensor
``w`` holds the value from AFTER it (and autograd's version counter says so). Hence the rule
the partitioner keeps (:func:`refimpl.partition.candidates.hard_bans`): no forward node that
reads a mutated primal (directly or through views of it) is recomputed in the backward;
it is saved, as eager autograd saves the tensors an op read when it ran.

Detection (:func:`mutated_inputs`): run dynamo's graph once on fake copies of its inputs
(no real work, no real memory) and report the inputs whose version counter moved. The
indices are the joint graph's primal positions, since AOTAutograd's primals are dynamo's
inputs in order.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from refimpl.partition.cost import is_sym, optimization_hint

__all__ = ["AliasedMutatedInputs", "SubclassInputs", "mutated_inputs"]


def _concrete(value: Any) -> Any:
    """``value`` with dynamo's symbols at their hints: a symbolic size becomes an int, a
    tensor with symbolic sizes an empty one of the hinted sizes. Symbols belong to dynamo's
    shape env, which the fresh fake mode here does not know."""
    if is_sym(value):
        return optimization_hint(value)
    if isinstance(value, torch.Tensor) and any(
            is_sym(d) for d in (*value.shape, *value.stride(), value.storage_offset())):
        shape = [optimization_hint(d) for d in value.shape]
        stride = [optimization_hint(d) for d in value.stride()]
        return torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device)
    return value


def _fake_copy(value: Any, mode: FakeTensorMode) -> Any:
    """A fake, detached copy of a tensor input (its own storage); other inputs as they are
    (symbols at their hints: :func:`_concrete`)."""
    value = _concrete(value)
    if not isinstance(value, torch.Tensor):
        return value
    with mode:
        return mode.from_tensor(value.detach()).clone()


class AliasedMutatedInputs(NotImplementedError):
    """A graph writes to an input that shares its storage with another input: AOTAutograd
    then merges them into one synthetic base, and its primals no longer follow dynamo's
    inputs one to one. refimpl does not map that case (it raises rather than guess)."""


class SubclassInputs(NotImplementedError):
    """An input is a tensor subclass (a jagged nested tensor, a DTensor): AOTAutograd
    flattens it into several primals, so its primals no longer follow dynamo's inputs one
    to one, and its sizes may hold symbols no fresh fake mode can hint. refimpl does not map
    that case (it raises rather than guess which primal an input's write lands on)."""


def _check_plain_tensors(example_inputs: list[Any]) -> None:
    for i, v in enumerate(example_inputs):
        if isinstance(v, torch.Tensor) and is_traceable_wrapper_subclass(v):
            raise SubclassInputs(
                f"example_inputs: input {i} is a {type(v).__name__}, a tensor subclass that "
                "AOTAutograd flattens into several inputs; refimpl's partitioner takes plain "
                "tensors only")


def _check_no_aliasing(example_inputs: list[Any], mutated: tuple[int, ...]) -> None:
    """Raises :class:`AliasedMutatedInputs` when two tensor inputs share a storage.

    Sharing is told by the storage itself, as AOTAutograd tells it (``StorageWeakRef``),
    never by address: two unrelated empty tensors both report address 0 and are not merged,
    while an empty tensor and its transpose share one storage and are."""
    tensors = [(i, v) for i, v in enumerate(example_inputs) if isinstance(v, torch.Tensor)]
    seen: dict[StorageWeakRef, int] = {}
    for i, v in tensors:
        key = StorageWeakRef(v.untyped_storage())
        if key in seen:
            raise AliasedMutatedInputs(
                f"example_inputs: inputs {seen[key]} and {i} share a storage and the graph "
                f"writes to input(s) {list(mutated)} in place; refimpl's partitioner does "
                "not support mutating aliased inputs")
        seen[key] = i


def mutated_inputs(gm: fx.GraphModule, example_inputs: list[Any]) -> tuple[int, ...]:
    """Positions of the ``example_inputs`` that ``gm`` writes to in place (data writes:
    their version counter moves when ``gm`` runs on fake copies of them). Raises
    :class:`SubclassInputs` for a tensor-subclass input, :class:`AliasedMutatedInputs` when
    some are written and two inputs share a storage."""
    _check_plain_tensors(example_inputs)
    # real constants may sit in the graph; a shape env lets data-dependent ops (.item())
    # return unbacked symbols instead of raising
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
    copies = [_fake_copy(v, mode) for v in example_inputs]
    before = [v._version if isinstance(v, torch.Tensor) else None for v in copies]
    with mode, torch.no_grad():
        gm(*copies)
    mutated = tuple(i for i, (v, b) in enumerate(zip(copies, before, strict=True))
                    if b is not None and v._version != b)
    if mutated:
        _check_no_aliasing(example_inputs, mutated)
    return mutated
