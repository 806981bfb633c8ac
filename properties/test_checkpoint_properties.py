"""Properties of the checkpoint wrapper on random module stacks (refimpl.strategies.modules).

* Gradients of parameters and input equal the unwrapped model's bit for bit (CPU).
* Saved activation bytes are exactly what the unwrapped run predicts: the storages saved
  outside every checkpointed call plus the tensor inputs of the outermost checkpointed calls.
  Hence they never exceed the unwrapped model's when those inputs are saved there anyway, and
  strictly drop when some storage is saved only inside checkpointed calls.
* The checkpoint state is clean after every step, also after exceptions injected into the
  forward or the recomputation, and the next step is correct again.
* Differential: the backend under test's checkpoint, torch's composable checkpoint and
  ``torch.utils.checkpoint`` give the same gradients and save no more bytes than refimpl.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import HealthCheck, Phase, event, find, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils._pytree import tree_leaves

import refimpl
from refimpl.memory import measure_saved
from refimpl.oracle import component, load_backend
from refimpl.strategies.modules import KINDS, ModuleStack, candidate_paths, module_stacks

Key = tuple[str, int]


def _key(t: torch.Tensor) -> Key:
    return (str(t.device), t.untyped_storage().data_ptr())


def loss(out: torch.Tensor) -> torch.Tensor:
    return out.square().sum()  # saves the model's output: a save outside every checkpoint


@dataclass
class Step:
    """One forward+backward: saved bytes, gradients by parameter name, input gradient."""

    saved: int
    grads: dict[str, torch.Tensor]
    input_grad: torch.Tensor


def run_step(model: nn.Module, x: torch.Tensor) -> Step:
    x = x.detach().clone().requires_grad_()
    torch.manual_seed(7)  # the same dropout masks in every run
    report = measure_saved(lambda m, i: loss(m(i)), model, x)
    report.outputs.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return Step(report.bytes, grads, x.grad.clone())


def wrapped(stack: ModuleStack, apply: Callable[[nn.Module], object]) -> nn.Module:
    model = stack.build()
    for path in stack.checkpointed:
        apply(model.get_submodule(path))
    return model


def assert_same_step(ref: Step, got: Step, what: str) -> None:
    assert ref.grads.keys() == got.grads.keys(), f"{what}: different parameters got gradients"
    for name, g in ref.grads.items():
        assert torch.equal(g, got.grads[name]), f"{what}: gradient of {name} differs"
    assert torch.equal(ref.input_grad, got.input_grad), f"{what}: input gradient differs"


@dataclass
class Attribution:
    """Storages the unwrapped run saved, split by whether a to-be-checkpointed call was active."""

    inside: dict[Key, int] = field(default_factory=dict)
    outside: dict[Key, int] = field(default_factory=dict)
    checkpoint_inputs: dict[Key, int] = field(default_factory=dict)


def attribute(stack: ModuleStack, x: torch.Tensor) -> Attribution:
    """Run the unwrapped stack with hooks that tell which saves a checkpoint would drop."""
    model, att, depth = stack.build(), Attribution(), [0]
    x = x.detach().clone().requires_grad_()
    inputs = {_key(t) for t in [x, *model.parameters()]}

    def pre(module, args, kwargs):
        if depth[0] == 0:
            att.checkpoint_inputs.update({_key(t): t.untyped_storage().nbytes()
                                          for t in tree_leaves((args, kwargs))
                                          if isinstance(t, torch.Tensor)})
        depth[0] += 1

    def post(module, args, output):
        depth[0] -= 1

    for module in {id(m): m for m in map(model.get_submodule, stack.checkpointed)}.values():
        module.register_forward_pre_hook(pre, with_kwargs=True)
        module.register_forward_hook(post)

    def pack(t: torch.Tensor) -> torch.Tensor:
        (att.inside if depth[0] else att.outside)[_key(t)] = t.untyped_storage().nbytes()
        return t

    torch.manual_seed(7)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss(model(x))
    for table in (att.inside, att.outside, att.checkpoint_inputs):
        for k in inputs & table.keys():
            del table[k]
    return att


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(stack=module_stacks())
def test_refimpl_checkpoint_is_exact_and_saves_what_it_should(stack: ModuleStack) -> None:
    x = stack.example_input()
    plain = run_step(stack.build(), x)
    ckpt = run_step(wrapped(stack, refimpl.checkpoint), x)
    assert_same_step(plain, ckpt, f"refimpl.checkpoint on {stack.checkpointed}")
    att = attribute(stack, x)
    kept = {**att.outside, **att.checkpoint_inputs}
    assert plain.saved == sum({**att.outside, **att.inside}.values())
    assert ckpt.saved == sum(kept.values()), "saved bytes differ from the prediction"
    if att.checkpoint_inputs.keys() <= (att.outside.keys() | att.inside.keys()):
        assert ckpt.saved <= plain.saved
        if att.inside.keys() - kept.keys():
            event("strict drop")
            assert ckpt.saved < plain.saved
    else:
        event("checkpointed inputs larger than what the module saves")


def _states_clean(model: nn.Module) -> None:
    for name, module in model.named_modules():
        state = refimpl.checkpoint.state(module)
        if state is not None:
            assert state._ac_generator is None, f"{name or 'root'}: generator left behind"
            assert state.enable_hook, f"{name or 'root'}: hooks left switched off"
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None, \
        "saved-tensor hooks left on the stack"


class Injected(RuntimeError):
    pass


@given(stack=module_stacks(), data=st.data())
def test_state_is_clean_after_injected_exceptions(stack: ModuleStack, data) -> None:
    model = wrapped(stack, refimpl.checkpoint)
    # Checkpointed modules are drawn more often: their second call is the recomputation.
    paths = [*stack.checkpointed, "", *candidate_paths(stack.layers)]
    target = model.get_submodule(data.draw(st.sampled_from(paths), label="fault at"))
    fail_on_call = data.draw(st.integers(1, 2), label="fail on call")
    calls = [0]

    def fault(module, args):
        calls[0] += 1
        if calls[0] == fail_on_call:
            in_backward = torch._C._current_graph_task_id() != -1
            event(f"fault fired in the {'recomputation' if in_backward else 'forward'}")
            raise Injected(f"call {calls[0]}")

    handle = target.register_forward_pre_hook(fault)
    x = stack.example_input()
    try:
        run_step(model, x)
        event("no fault fired")
    except Injected:
        pass
    _states_clean(model)
    handle.remove()
    model.zero_grad(set_to_none=True)
    assert_same_step(run_step(stack.build(), x), run_step(model, x), "the step after a fault")
    _states_clean(model)


def _torch_utils_checkpoint(module: nn.Module) -> nn.Module:
    """torch.utils.checkpoint (non-reentrant) around the module's forward, hooks outside."""
    module.forward = functools.partial(torch.utils.checkpoint.checkpoint, module.forward,
                                       use_reentrant=False)
    return module


def _differential(stack: ModuleStack, apply: Callable, name: str) -> None:
    x = stack.example_input()
    ref = run_step(wrapped(stack, refimpl.checkpoint), x)
    got = run_step(wrapped(stack, apply), x)
    assert_same_step(ref, got, name)
    assert got.saved <= ref.saved, \
        f"{name} keeps {got.saved} bytes for backward, refimpl {ref.saved} ({stack})"


@given(stack=module_stacks())
def test_backend_under_test_matches_refimpl(stack: ModuleStack, refimpl_backend) -> None:
    apply = component(refimpl_backend, "checkpoint")
    _differential(stack, apply, f"backend {refimpl_backend.name!r} checkpoint")


@given(stack=module_stacks())
def test_torch_composable_checkpoint_matches_refimpl(stack: ModuleStack) -> None:
    _differential(stack, component(load_backend("torch"), "checkpoint"),
                  "torch.distributed._composable.checkpoint")


@given(stack=module_stacks())
def test_torch_utils_checkpoint_matches_refimpl(stack: ModuleStack) -> None:
    _differential(stack, _torch_utils_checkpoint, "torch.utils.checkpoint")


# -- meta-tests of the strategy -----------------------------------------------------------

@given(stack=module_stacks())
def test_module_stacks_are_valid(stack: ModuleStack) -> None:
    model, x = stack.build(), stack.example_input()
    assert model(x).shape == x.shape
    modules = [id(model.get_submodule(p)) for p in stack.checkpointed]
    assert len(set(modules)) == len(modules), "two checkpointed paths name one module"
    assert set(stack.checkpointed) <= {"", *candidate_paths(stack.layers)}
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
                                     "several checkpointed", "dropout p > 0", "conv k > 1"])
def test_module_stacks_cover(feature: str) -> None:
    predicates = {
        "nested checkpoint": _nested,
        "root checkpointed": lambda s: "" in s.checkpointed,
        "several checkpointed": lambda s: len(s.checkpointed) >= 3,
        "dropout p > 0": lambda s: any(ly.kind == "dropout" and ly.arg > 0 for ly in s.layers),
        "conv k > 1": lambda s: any(ly.kind == "conv" and ly.arg > 1 for ly in s.layers),
    }
    predicate = predicates.get(feature, lambda s: feature in _kinds(s))
    quick = settings(max_examples=2000, database=None, phases=[Phase.generate])  # no shrinking
    found = find(module_stacks(), predicate, settings=quick)
    assert predicate(found)


def test_module_stacks_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError, match="max_layers=0"):
        find(module_stacks(max_layers=0), lambda s: True)
