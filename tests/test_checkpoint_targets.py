"""The built-in checkpoint targets (issue 12), each exercised on a few fixed stacks.

``torch-checkpoint``, ``torch-checkpoint-reentrant``, ``torch-sac`` and ``checkpoint-wrapper``
are torch's own checkpoints behind ``checkpoint(module)``. Each must load by name, give the
unwrapped gradients, keep exactly the bytes its promise states on stacks where torch keeps its
promises, and reject nothing it promises. What torch gets wrong is pinned below (findings).
"""

from __future__ import annotations

import pytest
import torch

from refimpl.checkpointing import checkpoint as refimpl_checkpoint
from refimpl.expect.checkpoint import (
    COMPOSABLE,
    assert_same_step,
    assert_saved_as_predicted,
    loss,
    predict_saved,
    run_step,
    wrapped,
)
from refimpl.oracle import load_backend
from refimpl.oracle.registry import BUILTIN_TARGETS
from refimpl.strategies.modules import Layer, ModuleStack

TARGETS = ["torch-checkpoint", "torch-checkpoint-reentrant", "torch-sac", "checkpoint-wrapper"]

STACKS = {
    "root": ModuleStack(2, 2, 4, (Layer("linear"), Layer("gelu"), Layer("linear")), ("",), 1),
    "nested groups": ModuleStack(
        2, 3, 5, (Layer("linear"), Layer("group", 0, (Layer("linear"), Layer("relu"))),
                  Layer("dropout", 3), Layer("conv", 3)), ("1", "1.0", "3"), 2),
    "shared linear": ModuleStack(1, 2, 3, (Layer("linear"), Layer("layernorm"),
                                           Layer("shared", 0)), ("0", "1"), 3),
}

# The fork's MultiInput takes a tuple, nested in the fork: torch's non-reentrant checkpoints
# keep the nested call's tuple inputs alive (docs/findings.md, "Checkpoint").
NESTED_TUPLE = ModuleStack(1, 1, 2, (Layer("linear"), Layer("fork")), ("1", "1.1"), 0)


def _promise(backend):
    return getattr(backend, "checkpoint_promise", None) or COMPOSABLE


def _bytes(backend, stack: ModuleStack) -> tuple[int, int]:
    """(measured, expected) bytes of ``backend``'s checkpoint on ``stack``."""
    x = stack.example_input()
    model = stack.build()
    prediction = predict_saved(model, [model.get_submodule(p) for p in stack.checkpointed],
                               loss, x)
    got = run_step(wrapped(stack, backend.checkpoint).model, x)
    return got.saved, prediction.expected_bytes(_promise(backend))


@pytest.mark.parametrize("name", TARGETS)
def test_target_is_registered_and_loads(name: str) -> None:
    assert BUILTIN_TARGETS[name].extra is None  # torch itself: nothing extra to install
    backend = load_backend(name)
    assert backend.name == name and backend.checkpoint is not None
    assert getattr(backend, "compile", None) is None  # checkpoint only: the rest skips
    assert "checkpoint implementation only" in backend.skip_reasons["compile"]


@pytest.mark.parametrize("stack", STACKS.values(), ids=STACKS.keys())
@pytest.mark.parametrize("name", TARGETS)
def test_target_gradients_and_bytes(name: str, stack: ModuleStack) -> None:
    backend = load_backend(name)
    x = stack.example_input()
    plain = run_step(stack.build(), x)
    got = run_step(wrapped(stack, backend.checkpoint).model, x)
    assert_same_step(plain, got, name, stack)
    assert torch.equal(plain.rng_after, got.rng_after)
    x = stack.example_input()
    model = stack.build()
    prediction = predict_saved(model, [model.get_submodule(p) for p in stack.checkpointed],
                               loss, x)
    assert_saved_as_predicted(got.saved, prediction, _promise(backend), name)


def test_sac_keeps_the_matmul_outputs() -> None:
    """torch-sac's promise differs from the composable one exactly by the matmuls kept."""
    sac = load_backend("torch-sac")
    measured, expected = _bytes(sac, STACKS["root"])
    assert measured == expected > _bytes(load_backend("torch-checkpoint"), STACKS["root"])[0]


@pytest.mark.torch_releases("2.13", "2.14")
@pytest.mark.parametrize("name", ["torch", "torch-checkpoint", "torch-sac",
                                  "checkpoint-wrapper"])
def test_finding_nested_checkpoint_keeps_tuple_inputs(name: str) -> None:
    """Finding: a checkpointed call nested in another, taking its tensors in a tuple, keeps
    them alive for backward (16 bytes here that the outer checkpoint should have dropped)."""
    measured, expected = _bytes(load_backend(name), NESTED_TUPLE)
    assert measured - expected == 16, (measured, expected)


def test_refimpl_drops_nested_tuple_inputs() -> None:
    measured, expected = _bytes(load_backend("refimpl"), NESTED_TUPLE)
    assert measured == expected


@pytest.mark.torch_releases("2.13", "2.14")
def test_finding_composable_debug_always_raises() -> None:
    """Finding: torch's composable checkpoint always passes its own context functions, so
    ``debug=True`` raises "incompatible with non-default context_fn" with no context_fn."""
    from torch import nn
    from torch.distributed._composable import checkpoint

    m = checkpoint(nn.Linear(2, 2), debug=True)
    with pytest.raises(ValueError, match="debug=True is incompatible with non-default"):
        m(torch.randn(1, 2, requires_grad=True)).sum().backward()


@pytest.mark.torch_releases("2.10", "2.13", "2.14")
@pytest.mark.parametrize("second", ["backward", "read"])
def test_finding_composable_recomputes_a_call_once(second: str) -> None:
    """Finding: torch's composable checkpoint builds its recomputation context (``_no_hook``, a
    one-shot generator context manager) once per forward, so a second recomputation of the
    same call (a second backward of a retained graph, or a backward after reading a saved
    tensor outside one) fails with an AttributeError; refimpl recomputes every time."""
    from torch import nn
    from torch.distributed._composable import checkpoint

    for apply, fails in ((checkpoint, True), (refimpl_checkpoint, False)):
        out = apply(nn.Linear(2, 2))(torch.ones(1, 2, requires_grad=True)).sin().sum()
        if second == "backward":
            out.backward(retain_graph=True)
        else:
            out.grad_fn.next_functions[0][0].next_functions[0][0]._saved_mat1  # noqa: B018
        if fails:
            with pytest.raises(AttributeError, match="_GeneratorContextManager"):
                out.backward()
        else:
            out.backward()


@pytest.mark.torch_releases("2.13", "2.14")
def test_finding_sac_reports_nondeterminism_as_plain_runtime_error() -> None:
    """Finding: selective checkpointing reports a recomputation that runs an op the forward
    did not as a RuntimeError that is not torch's CheckpointError (plain non-reentrant
    checkpointing raises CheckpointError for the same drift)."""
    from refimpl.oracle.targets.checkpoints import save_matmuls

    ln = torch.nn.LayerNorm(2)

    def drifting(x):
        return ln(torch.cat([x, x]) if torch._C._current_graph_task_id() != -1 else x)

    import functools

    context_fn = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts,
                                   save_matmuls)
    out = torch.utils.checkpoint.checkpoint(drifting, torch.randn(1, 1, 2, requires_grad=True),
                                            use_reentrant=False, context_fn=context_fn)
    with pytest.raises(RuntimeError, match="encountered during backward but not found") as info:
        out.square().sum().backward()
    assert not isinstance(info.value, torch.utils.checkpoint.CheckpointError)
