"""Self-checks behind the checkpoint properties: the module-stack strategy and refimpl's state.

The properties of the target live in properties/test_checkpoint_properties.py; these are
meta-tests of ``refimpl.strategies.modules`` and refimpl's own ``checkpoint.state`` invariant
(cleared after every forward, also after injected exceptions).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from torch import nn

import refimpl
from refimpl.expect.checkpoint import run_step, wrapped
from refimpl.strategies.modules import KINDS, ModuleStack, candidate_paths, module_stacks
from tests.finding import find_example


@given(stack=module_stacks())
def test_module_stacks_are_valid(stack: ModuleStack) -> None:
    model, x = stack.build(), stack.example_input()
    assert model(x).shape == x.shape
    modules = [id(model.get_submodule(p)) for p in stack.checkpointed]
    assert len(set(modules)) == len(modules), "two checkpointed paths name one module"
    assert set(stack.checkpointed) <= {"", *candidate_paths(stack.layers)}
    assert 1 <= len(stack.checkpointed) <= 4
    assert stack.build().state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(stack.build().parameters(),
                                                  model.parameters()))


def _kinds(stack: ModuleStack) -> set[str]:
    seen, todo = set(), list(stack.layers)
    while todo:
        layer = todo.pop()
        seen.add(layer.kind)
        todo.extend(layer.children)
    return seen


def _nested(stack: ModuleStack) -> bool:
    return any(a != b and b.startswith(a) and (a == "" or b[len(a)] == ".")
               for a in stack.checkpointed for b in stack.checkpointed)


@pytest.mark.parametrize("feature", [*KINDS, "nested checkpoint", "root checkpointed",
                                     "several checkpointed", "dropout p > 0", "conv k > 1",
                                     "a leaf checkpointed"])
def test_module_stacks_cover(feature: str) -> None:
    predicates = {
        "nested checkpoint": _nested,
        "root checkpointed": lambda s: "" in s.checkpointed,
        "several checkpointed": lambda s: len(s.checkpointed) >= 3,
        "dropout p > 0": lambda s: any(ly.kind == "dropout" and ly.arg > 0 for ly in s.layers),
        "conv k > 1": lambda s: any(ly.kind == "conv" and ly.arg > 1 for ly in s.layers),
        "a leaf checkpointed": lambda s: any(
            p and "." not in p and s.layers[int(p)].kind not in ("group", "fork")
            for p in s.checkpointed),
    }
    predicate = predicates.get(feature, lambda s: feature in _kinds(s))
    found = find_example(module_stacks(), predicate, shrink=False)
    assert predicate(found)


def test_module_stacks_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError, match="max_layers=0"):
        find_example(module_stacks(max_layers=0), lambda s: True)


def _states_clean(model: nn.Module) -> None:
    for name, module in model.named_modules():
        state = refimpl.checkpoint.state(module)
        if state is not None:
            assert state._ac_generator is None, f"{name or 'root'}: generator left behind"
            assert state.enable_hook, f"{name or 'root'}: hooks left switched off"


class Injected(RuntimeError):
    pass


@given(stack=module_stacks(), data=st.data())
def test_refimpl_state_is_clean_after_injected_exceptions(stack: ModuleStack, data) -> None:
    ckpt = wrapped(stack, refimpl.checkpoint)
    paths = [*stack.checkpointed, "", *candidate_paths(stack.layers)]
    target = ckpt.originals[data.draw(st.sampled_from(paths), label="fault at")]
    fail_on_call = data.draw(st.integers(1, 2), label="fail on call")
    calls = [0]

    def fault(module, args):
        calls[0] += 1
        if calls[0] == fail_on_call:
            event("fault fired")
            raise Injected(f"call {calls[0]}")

    handle = target.register_forward_pre_hook(fault)
    with contextlib.suppress(Injected):
        run_step(ckpt.model, stack.example_input())
    _states_clean(ckpt.model)
    handle.remove()
    run_step(ckpt.model, stack.example_input())
    _states_clean(ckpt.model)


def test_prediction_pins_the_address_reuse_example() -> None:
    """Issue 10 item 6, shrunk (the property with the address-keyed prediction restored): the
    group (a p=0 dropout) saves nothing, so its input, the linear's output, is freed with the
    forward; relu's output may take that address. Expected: relu's output only (square saves
    the same storage); the group's input is not kept (nothing to recompute)."""
    from refimpl.expect.checkpoint import COMPOSABLE, loss, predict_saved
    from refimpl.strategies.modules import Layer

    stack = ModuleStack(batch=1, channels=1, length=2,
                        layers=(Layer("linear"), Layer("group", 0, (Layer("dropout"),)),
                                Layer("relu")),
                        checkpointed=("1",), seed=0)
    x = stack.example_input()
    model = stack.build()
    prediction = predict_saved(model, [model.get_submodule("1")], loss, x)
    assert [c.recomputes for c in prediction.calls] == [False]
    assert prediction.expected_bytes(COMPOSABLE) == 8 == prediction.unwrapped_bytes()
    assert run_step(wrapped(stack, refimpl.checkpoint).model, x).saved == 8
