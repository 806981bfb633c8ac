"""Property: the backend's ``checkpoint(module)`` is as strict as eager when a tensor the
model reads is changed in place between the forward and the backward.

Eager autograd keeps what the backward needs and raises a RuntimeError ("modified by an
inplace operation") when one of those tensors changed in place after the forward. A
checkpoint keeps nothing inside its region and recomputes it in the backward from the
parameters and inputs *as they are then*: unless it checks, it silently returns other
gradients than eager. The expectation is eager itself, the unwrapped model run through the same
steps: forward, ``with torch.no_grad(): tensor.add_(1)`` for each drawn tensor, backward.

* Eager raises a RuntimeError: the backend raises a RuntimeError (or a subclass).
* Eager does not raise and no changed tensor is read by a checkpointed call: the backend's
  gradients (parameters and input) equal eager's bit for bit.
* Eager does not raise, a changed tensor is read by a checkpointed call (eager did not keep it,
  e.g. a bias): the backend raises a RuntimeError, or its gradients equal eager's bit for bit
  (a checkpoint cannot always know the change did not matter; refusing is safe, a different
  gradient is not).

The tensors drawn (``module_stacks(changes=True)``): parameters of the model (by name) and
the model's input, mostly one a checkpointed call reads; none in one example of five. In
half the examples every parameter and the input are *aged* first: their version counters are
bumped past 256 by in-place no-ops, so a checkpoint comparing versions by identity (equal
only for CPython's cached small ints) shows. What a
checkpointed call reads is :func:`~refimpl.strategies.modules.checkpointed_reads`.

Reach (each example): a tensor a checkpointed call reads was changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from torch import nn

from refimpl.expect.checkpoint import COMPOSABLE, loss, wrapped
from refimpl.oracle import component
from refimpl.properties.reach import note, reach
from refimpl.strategies.modules import (
    INPUT,
    ModuleStack,
    MultiInput,
    checkpointed_reads,
    module_stacks,
)

#: how much each drawn tensor is changed by (any change bumps its version)
DELTA = 1.0
#: an aged tensor's version before the step: past CPython's cache of small ints (256), so a
#: version compared by identity instead of equality shows
AGE = 257


@dataclass
class Outcome:
    """A step with tensors changed between forward and backward: the error it raised, or the
    gradients of the parameters (by name) and of the input."""

    error: RuntimeError | None
    grads: dict[str, torch.Tensor | None]
    input_grad: torch.Tensor | None


def _age(tensors: list[torch.Tensor]) -> None:
    """Bump each tensor's version counter past :data:`AGE` with in-place no-ops."""
    with torch.no_grad():
        for tensor in tensors:
            for _ in range(AGE):
                tensor.add_(0)


def step_with_changes(model: nn.Module, params: dict[str, nn.Parameter], x: torch.Tensor,
                      changed: tuple[str, ...], aged: bool = False) -> Outcome:
    """Forward, change each of ``changed`` (parameter names, or :data:`INPUT`) in place under
    no_grad, backward; ``params``: the model's parameters by their unwrapped names; ``aged``:
    first bump the versions of the input and every parameter past :data:`AGE`."""
    x = x.detach().clone().requires_grad_()
    if aged:
        _age([x, *params.values()])
    torch.manual_seed(7)  # the same dropout masks in every run
    out = loss(model, x)
    with torch.no_grad():
        for name in changed:
            (x if name == INPUT else params[name]).add_(DELTA)
    try:
        out.backward()
    except RuntimeError as error:
        return Outcome(error, {}, None)
    grads = {n: None if p.grad is None else p.grad.clone() for n, p in params.items()}
    return Outcome(None, grads, x.grad)


def _same_gradients(want: Outcome, got: Outcome, what: str) -> None:
    for name, a in want.grads.items():
        b = got.grads[name]
        assert (a is None) == (b is None), f"{what}: gradient of {name}: expected {a}, got {b}"
        assert a is None or torch.equal(a, b), \
            f"{what}: gradient of {name} differs from eager's: expected {a}, got {b}"
    assert torch.equal(want.input_grad, got.input_grad), \
        f"{what}: input gradient differs from eager's: expected {want.input_grad}, " \
        f"got {got.input_grad}"


@given(stack=module_stacks(changes=True), aged=st.booleans())
def test_changed_between_forward_and_backward_as_eager(refimpl_backend, stack: ModuleStack,
                                                       aged: bool) -> None:
    apply = component(refimpl_backend, "checkpoint")
    promise = getattr(refimpl_backend, "checkpoint_promise", None) or COMPOSABLE
    model = stack.build()
    if not promise.nested_inputs:
        assume(not any(isinstance(model.get_submodule(p), MultiInput)
                       for p in stack.checkpointed))
    touches_region = bool(checkpointed_reads(stack).intersection(stack.changed))
    reach(touches_region)
    x = stack.example_input()
    want = step_with_changes(model, dict(model.named_parameters()), x, stack.changed, aged)
    target = wrapped(stack, apply)
    got = step_with_changes(target.model, dict(target.originals[""].named_parameters()), x,
                            stack.changed, aged)
    what = (f"{refimpl_backend.name} checkpoint on {stack.checkpointed}, changed in place "
            f"between forward and backward: {list(stack.changed)}"
            f"{f' (every version past {AGE} before the step)' if aged else ''}")
    if want.error is not None:
        assert got.error is not None, (
            f"{what}: eager raises ({str(want.error)[:120]}...), the checkpoint does not: it "
            "recomputed from the changed tensors")
        return
    if got.error is not None and touches_region:
        note("refused a change eager tolerates")
        return
    assert got.error is None, f"{what}: eager gives gradients, the checkpoint raises {got.error}"
    _same_gradients(want, got, what)


class Recorder(nn.Module):
    """A linear layer that rebinds its buffer ``last_mean`` to its input's mean on every call,
    a statistic it never reads: the buffer it held dies inside the forward."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.register_buffer("last_mean", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last_mean = x.detach().mean()
        return self.lin(x).tanh()


def _recorder_step(model: nn.Module, width: int, rebind_between: bool) -> tuple:
    """Forward, (rebind every buffer to a new zero tensor), backward: the output, the
    parameters' gradients and every buffer; or the error."""
    x = torch.linspace(-1.0, 1.0, 2 * width).reshape(2, width).requires_grad_()
    out = model(x)
    if rebind_between:
        for module in model.modules():
            if isinstance(module, Recorder):
                module.last_mean = torch.zeros(())
    try:
        out.square().sum().backward()
    except RuntimeError as error:
        return error
    # rebound between, a buffer is what the recomputation rebinds it to (the forward's side
    # effect runs again, as a batchnorm's running statistics do): compared only otherwise
    buffers = [] if rebind_between else [b.clone() for b in model.buffers()]
    return [out.detach(), *(p.grad for p in model.parameters()), x.grad, *buffers]


@given(width=st.integers(1, 3), depth=st.integers(1, 3), data=st.data(),
       rebind_between=st.booleans())
def test_a_buffer_rebound_in_the_forward_is_no_change(refimpl_backend, width: int, depth: int,
                                                      data, rebind_between: bool) -> None:
    """A module that rebinds a buffer (``self.last_mean = x.detach().mean()``) changes no
    tensor in place: the tensor the checkpoint saw dies, eager raises nothing, and the
    checkpointed model's step (output, gradients, buffers after the backward's recomputation)
    is eager's bit for bit; also when every buffer is rebound again between the forward and
    the backward (a dead tensor was not changed; the buffers are then not compared: the
    recomputation rebinds them again, as it updates a batchnorm's running statistics).
    Reach: a checkpointed call's buffer died inside its forward (always, for the drawn
    checkpointed blocks)."""
    apply = component(refimpl_backend, "checkpoint")
    chosen = data.draw(st.sets(st.sampled_from(range(depth)), min_size=1), label="checkpointed")
    reach(bool(chosen))
    torch.manual_seed(0)
    plain = nn.Sequential(*(Recorder(width) for _ in range(depth)))
    torch.manual_seed(0)
    model = nn.Sequential(*(Recorder(width) for _ in range(depth)))
    for i in sorted(chosen):
        model[i] = apply(model[i]) or model[i]
    want = _recorder_step(plain, width, rebind_between)
    got = _recorder_step(model, width, rebind_between)
    what = (f"{refimpl_backend.name} checkpoint on recorders {sorted(chosen)} of {depth}, "
            f"buffers rebound between forward and backward: {rebind_between}")
    assert not isinstance(got, BaseException), f"{what}: eager's step, the backend raised {got!r}"
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert torch.equal(a, b), \
            f"{what}: result {i} (output, gradients, buffers) {b}, eager's {a}"
