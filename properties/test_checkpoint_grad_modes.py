"""Property: a checkpointed model run without gradients (evaluation, inference) is the
unwrapped model, and the next training step is unharmed.

torch's non-reentrant checkpoint keeps nothing and recomputes nothing when grad mode is off:
no backward can follow, so the forward just runs. A user evaluates a checkpointed model
under ``torch.no_grad()`` or ``torch.inference_mode()`` between training steps.

On a drawn module stack (``module_stacks(featured=True)``: dropouts, in-place layers,
batchnorms, nested and shared checkpointed modules), checkpointed by the backend under test,
a forward under the drawn mode (``no_grad``, ``inference_mode``, ``set_grad_enabled(False)``)
from a fixed seed gives the unwrapped model's output bit for bit (NaN where it has NaN),
an output that needs no gradient, the unwrapped run's buffers (running statistics updated
once) and RNG state after, and leaves no saved-tensor hooks behind. The training step that
follows on the same model gives the unwrapped model's gradients and RNG state (nothing of
the gradient-free forward is left in the modules' checkpoint state).

Reach (each example): with gradients on, the checkpoint would drop some saved bytes of this
stack (:func:`refimpl.expect.checkpoint.predict_saved`), so its hooks have work to skip.
"""

from __future__ import annotations

import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from torch import nn

from refimpl.expect.checkpoint import (
    COMPOSABLE,
    assert_same_step,
    loss,
    predict_saved,
    run_step,
    wrapped,
)
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.modules import ModuleStack, MultiInput, module_stacks

#: grad mode off, as a user turns it off
MODES = {
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "set_grad_enabled(False)": lambda: torch.set_grad_enabled(False),
}
SEED = 5


def _evaluate(model: nn.Module, x: torch.Tensor, mode: str) -> tuple:
    """A forward from ``SEED`` with grad mode off: output, its ``requires_grad``, buffers,
    the RNG state after."""
    torch.manual_seed(SEED)
    with MODES[mode]():
        out = model(x)
    buffers = [b.clone() for b in model.buffers()]  # in order: a wrapper renames them
    return out.clone(), out.requires_grad, buffers, torch.get_rng_state()


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal dtype, shape and bits, NaN equal to NaN."""
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))


def _hooks_left() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


def _drops_bytes(backend, stack: ModuleStack) -> bool:
    model = stack.build()
    prediction = predict_saved(model, [model.get_submodule(p) for p in stack.checkpointed],
                               loss, stack.example_input())
    promise = getattr(backend, "checkpoint_promise", None) or COMPOSABLE
    return prediction.strictly_drops(promise)


@given(stack=module_stacks(max_layers=3, featured=True), mode=st.sampled_from(sorted(MODES)))
def test_forward_without_grad_as_unwrapped(refimpl_backend, stack: ModuleStack,
                                           mode: str) -> None:
    promise = getattr(refimpl_backend, "checkpoint_promise", None) or COMPOSABLE
    if not promise.nested_inputs:  # a tuple input, which such a backend does not support
        model = stack.build()
        assume(not any(isinstance(model.get_submodule(p), MultiInput)
                       for p in stack.checkpointed))
    reach(_drops_bytes(refimpl_backend, stack))
    apply = component(refimpl_backend, "checkpoint")
    x = stack.example_input()
    plain, target = stack.build(), wrapped(stack, apply).model
    want, got = _evaluate(plain, x, mode), _evaluate(target, x, mode)
    what = f"{refimpl_backend.name} checkpoint on {stack.checkpointed} under {mode}"
    assert _same(want[0], got[0]), f"{what}: output {got[0]}, unwrapped {want[0]}"
    assert not got[1], f"{what}: the output requires grad with grad mode off"
    assert not _hooks_left(), f"{what}: saved-tensor hooks left behind"
    names = [name for name, _ in plain.named_buffers()]
    assert len(got[2]) == len(names), f"{what}: {len(got[2])} buffers, unwrapped {len(names)}"
    for name, buffer, have in zip(names, want[2], got[2]):
        assert torch.equal(buffer, have), f"{what}: buffer {name} is {have}, unwrapped {buffer}"
    assert torch.equal(want[3], got[3]), f"{what}: the RNG state after differs"
    after = f"{what}, then a training step"
    plain_step, step = run_step(plain, x), run_step(target, x)
    assert_same_step(plain_step, step, after, stack)
    assert torch.equal(plain_step.rng_after, step.rng_after), \
        f"{after}: the caller's RNG stream after the step differs from the unwrapped run's"
