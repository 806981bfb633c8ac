"""Properties of the backend under test's ``checkpoint(module)``, on random module stacks.

Every expectation is independent of the checkpoint under test: the unwrapped model run eagerly
(gradients, RNG stream, autocast), and the hand prediction of
:func:`refimpl.expect.checkpoint.predict_saved` read with the meter (saved bytes).

* Gradients of parameters and input equal the unwrapped model's bit for bit (CPU), and the
  caller's RNG stream after the step is the unwrapped run's; the forward runs under drawn
  contexts (any of CPU autocast, an observing torch-function mode, outer saved-tensor hooks
  that pack copies) and the checkpoint under a drawn selective policy (keep the matmuls'
  outputs, where the backend's checkpoint takes a ``context_fn``).
* The same under CPU autocast (bfloat16): the recomputation must replay autocast.
* Saved bytes are exactly what the backend promises (its ``checkpoint_promise``, default the
  composable checkpoint's: the storages saved outside every checkpointed call plus the tensor
  inputs of the outermost checkpointed calls, plus kept op outputs for a selective policy).
* After an exception injected into a forward or a recomputation, no saved-tensor hooks are
  left behind and the next step is correct again.
* Buffers (a batchnorm's running statistics) after a training step are torch's composable
  checkpoint's: a batchnorm's forward updates them once per run, and a checkpointed call runs
  its forward again when recomputed, up to its last saved tensor (torch's early stop)
  (:func:`refimpl.expect.checkpoint.expected_buffers`; docs/design.md, "Buffers"). Stacks
  come from ``stacks_with_buffers()``.
* A recomputation that saves tensors of other shapes than the forward (its input doubled in
  the backward) raises ``torch.utils.checkpoint.CheckpointError`` (or a subclass), where the
  backend promises a determinism check.
* Where the backend's ``checkpoint`` takes options (as torch's composable one): the contexts
  of a ``context_fn`` are entered and left in pairs, the forward's once per checkpointed
  forward and left without an exception; and under ``determinism_check="none"`` the drifting
  recomputation above raises no ``CheckpointError`` (whatever else it breaks).
* A checkpointed module whose input needs no gradient (a data batch; where the backend
  promises gradients then) and whose forward saves more than 256 tensors (past CPython's cache
  of small ints, so a count compared by identity shows) gets the unwrapped module's parameter
  gradients, and its recomputation stops at the last save (torch's early stop, where the
  backend promises it).

Reach (each example): the prediction says the checkpoint strictly drops bytes; for the
buffer property, a batchnorm's forward is re-run by a recomputation.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from torch import nn
from torch.utils import checkpoint as tuc
from torch.utils._pytree import tree_map

from refimpl.expect.checkpoint import (
    COMPOSABLE,
    CheckpointPromise,
    Prediction,
    assert_same_step,
    assert_saved_as_predicted,
    expected_buffers,
    in_backward,
    loss,
    predict_saved,
    run_step,
    wrap_forward,
    wrapped,
)
from refimpl.oracle import component
from refimpl.oracle.targets.checkpoints import save_matmuls
from refimpl.properties.reach import note, reach
from refimpl.strategies.modules import (
    ModuleStack,
    MultiInput,
    candidate_paths,
    module_stacks,
    stacks_with_buffers,
)


def promise_of(backend) -> CheckpointPromise:
    return getattr(backend, "checkpoint_promise", None) or COMPOSABLE


def predict(stack: ModuleStack, x: torch.Tensor) -> Prediction:
    model = stack.build()
    return predict_saved(model, [model.get_submodule(p) for p in stack.checkpointed], loss, x)


def takes_nested_input(stack: ModuleStack) -> bool:
    """Whether a checkpointed module takes its tensors nested in a tuple (the fork's input)."""
    model = stack.build()
    return any(isinstance(model.get_submodule(p), MultiInput) for p in stack.checkpointed)


def _setup(backend, stack: ModuleStack, *, recomputes: bool = False
           ) -> tuple[Callable, CheckpointPromise, Prediction]:
    """The backend's checkpoint and promise, the prediction, and the reach event (after the
    examples the promise excludes; ``recomputes``: only stacks that drop some save)."""
    apply = component(backend, "checkpoint")
    promise = promise_of(backend)
    if not promise.nested_inputs:
        assume(not takes_nested_input(stack))
    prediction = predict(stack, stack.example_input())
    if recomputes:
        assume(prediction.inside.keys() - prediction.kept(promise).keys())
    reach(prediction.strictly_drops(promise))
    return apply, promise, prediction


def checkpoint_for(backend, stack: ModuleStack) -> Callable[[nn.Module], nn.Module]:
    """The backend's checkpoint, with the stack's selective policy as its ``context_fn`` where
    it has one (a backend whose checkpoint takes no options gets none, and a note says so)."""
    apply = component(backend, "checkpoint")
    if stack.policy == "none":
        return apply
    if not takes_options(backend):
        note(f"selective policy not applied: {backend.name}'s checkpoint takes no options")
        return apply
    context_fn = functools.partial(tuc.create_selective_checkpoint_contexts, save_matmuls)
    return lambda module: apply(module, context_fn=context_fn)


def calls_a_checkpointed_module_twice(stack: ModuleStack) -> bool:
    """Whether a checkpointed linear is used again by a shared layer (two checkpointed calls
    of one module, each its own recomputation)."""
    return any(layer.kind == "shared" and str(layer.arg) in stack.checkpointed
               for layer in stack.layers)


@given(stack=module_stacks(contexts=True, featured=True))
def test_gradients_and_rng_match_unwrapped(refimpl_backend, stack: ModuleStack) -> None:
    """Under the drawn ambient (any of CPU autocast, a torch-function mode, outer saved-tensor
    hooks) and selective policy, gradients and the RNG stream after the step
    equal the unwrapped model's."""
    # torch's selective contexts reject this case under autocast, for every backend that
    # uses them (docs/findings.md, "Checkpoint": a module checkpointed and called twice)
    assume(not (stack.policy != "none" and "autocast" in stack.ambient
                and calls_a_checkpointed_module_twice(stack)))
    _setup(refimpl_backend, stack)
    apply = checkpoint_for(refimpl_backend, stack)
    x = stack.example_input()
    plain = run_step(stack.build(), x, ambient=stack.ambient)
    got = run_step(wrapped(stack, apply).model, x, ambient=stack.ambient)
    what = (f"{refimpl_backend.name} checkpoint on {stack.checkpointed} under "
            f"{list(stack.ambient) or 'no context'}, policy {stack.policy}")
    assert_same_step(plain, got, what, stack)
    assert torch.equal(plain.rng_after, got.rng_after), \
        f"{what}: the caller's RNG stream after the step differs from the unwrapped run's"


@given(stack=module_stacks())
def test_autocast_gradients_match_unwrapped(refimpl_backend, stack: ModuleStack) -> None:
    apply, _, _ = _setup(refimpl_backend, stack)
    x = stack.example_input()
    plain = run_step(stack.build(), x, autocast=True)
    got = run_step(wrapped(stack, apply).model, x, autocast=True)
    assert_same_step(plain, got, f"{refimpl_backend.name} checkpoint under CPU autocast "
                     f"(bfloat16) on {stack.checkpointed}", stack)


@given(stack=module_stacks())
def test_saved_bytes_as_promised(refimpl_backend, stack: ModuleStack) -> None:
    apply, promise, prediction = _setup(refimpl_backend, stack)
    x = stack.example_input()
    plain = run_step(stack.build(), x)
    assert plain.saved == prediction.unwrapped_bytes(), \
        f"meter: unwrapped run keeps {plain.saved}, prediction {prediction.unwrapped_bytes()}"
    if not promise.saves_bytes:
        note("no saving promised")
        return
    got = run_step(wrapped(stack, apply).model, x)
    assert_saved_as_predicted(got.saved, prediction, promise,
                              f"{refimpl_backend.name} checkpoint on {stack.checkpointed}")


@given(stack=stacks_with_buffers())
def test_buffers_as_the_composable_checkpoint(refimpl_backend, stack: ModuleStack) -> None:
    """After one training step, every batchnorm's running statistics and batch count are
    what torch's composable checkpoint leaves: updated once per forward run, recomputations
    included; gradients still equal the unwrapped model's."""
    apply, _, _ = _setup(refimpl_backend, stack)
    x = stack.example_input()
    expected, runs = expected_buffers(stack, x)
    reach(any(n > 1 for n in runs.values()))
    target = wrapped(stack, apply)
    got = run_step(target.model, x)
    what = f"{refimpl_backend.name} checkpoint on {stack.checkpointed}"
    assert_same_step(run_step(stack.build(), x), got, what, stack)
    for name, want in expected.items():
        path, buffer = name.rsplit(".", 1)
        have = getattr(target.originals[path], buffer)
        assert torch.allclose(have.float(), want.float(), rtol=1e-5, atol=1e-6), (
            f"{what}: {name} after the step is {have}, expected {want} (the batchnorm's "
            f"forward runs {runs[path]} times: the step's and each recomputation's that "
            "reaches it)")


class Injected(RuntimeError):
    pass


def _hooks_left() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


@given(stack=module_stacks(), data=st.data())
def test_next_step_is_correct_after_injected_exceptions(refimpl_backend, stack: ModuleStack,
                                                        data) -> None:
    apply, _, _ = _setup(refimpl_backend, stack)
    # Checkpointed modules are drawn more often: their second call is the recomputation.
    paths = [*stack.checkpointed, "", *candidate_paths(stack.layers)]
    path = data.draw(st.sampled_from(paths), label="fault at")
    fail_on_call = data.draw(st.integers(1, 2), label="fail on call")
    calls, armed = [0], [True]

    def fault(forward, args):
        calls[0] += 1
        if armed[0] and calls[0] == fail_on_call:
            note(f"fault fired in the {'recomputation' if in_backward() else 'forward'}")
            raise Injected(f"call {calls[0]}")
        return forward(*args)

    ckpt = wrapped(stack, apply, before={path: lambda m: wrap_forward(m, fault)})
    x = stack.example_input()
    with contextlib.suppress(Injected):
        run_step(ckpt.model, x)
    assert not _hooks_left(), "saved-tensor hooks left on the stack after an exception"
    armed[0] = False
    ckpt.model.zero_grad(set_to_none=True)
    assert_same_step(run_step(stack.build(), x), run_step(ckpt.model, x),
                     f"{refimpl_backend.name}: the step after a fault", stack)
    assert not _hooks_left(), "saved-tensor hooks left on the stack after a step"


def takes_options(backend) -> bool:
    """Whether the backend's ``checkpoint`` takes keyword options (as torch's composable)."""
    kinds = {p.kind for p in inspect.signature(backend.checkpoint).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds


def with_options(backend, **options) -> Callable[[nn.Module], nn.Module]:
    """The backend's checkpoint with ``options`` bound; a skip if it takes no options."""
    apply = component(backend, "checkpoint")
    if not takes_options(backend):
        pytest.skip(f"backend {backend.name!r}: checkpoint(module) takes no options")
    return lambda module: apply(module, **options)


class Recorded:
    """A context manager that appends ``(name, "enter")`` and ``(name, "exit", exc_type)``."""

    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def __enter__(self) -> None:
        self.log.append((self.name, "enter"))

    def __exit__(self, exc_type, exc, tb) -> None:
        self.log.append((self.name, "exit", exc_type))


@given(stack=module_stacks())
def test_context_fn_contexts_entered_and_left(refimpl_backend, stack: ModuleStack) -> None:
    """Each checkpointed forward (a nested one again in its parent's recomputation) enters
    a fresh forward context and leaves it with no exception; recomputation contexts are
    entered and left in pairs; gradients unchanged."""
    _setup(refimpl_backend, stack)
    log: list = []
    apply = with_options(refimpl_backend,
                         context_fn=lambda: (Recorded(log, "forward"), Recorded(log, "recompute")))
    x = stack.example_input()
    got = run_step(wrapped(stack, apply).model, x)
    what = f"{refimpl_backend.name} checkpoint with a context_fn on {stack.checkpointed}"
    assert_same_step(run_step(stack.build(), x), got, what, stack)
    calls = len({id(stack.build().get_submodule(p)) for p in stack.checkpointed})
    forward_exits = [e[2] for e in log if e[:2] == ("forward", "exit")]
    # >= : a nested checkpointed forward runs again inside its parent's recomputation.
    assert len(forward_exits) >= calls and forward_exits == [None] * len(forward_exits), \
        f"{what}: expected >= {calls} forward contexts, each left without an exception: {log}"
    for name in ("forward", "recompute"):
        assert _balanced([e[1] for e in log if e[0] == name]), \
            f"{what}: {name} contexts not entered and left in nested pairs: {log}"


def _balanced(events: list[str]) -> bool:
    """Whether enter/exit events nest like brackets (never an exit without an enter)."""
    depth = 0
    for event in events:
        depth += 1 if event == "enter" else -1
        if depth < 0:
            return False
    return depth == 0


def _doubled(args):
    return tree_map(lambda t: torch.cat([t, t]) if isinstance(t, torch.Tensor) else t, args)


def _drift(forward, args):  # the recomputation (in a backward) sees a doubled batch
    return forward(*(_doubled(args) if in_backward() else args))


@given(stack=module_stacks())
def test_nondeterministic_recomputation_raises_checkpoint_error(refimpl_backend,
                                                                stack: ModuleStack) -> None:
    # Something is dropped inside the checkpoint (so recomputed); else nothing is checked.
    apply, promise, _ = _setup(refimpl_backend, stack, recomputes=True)
    outermost = [p for p in stack.checkpointed
                 if not any(q != p and (q == "" or p.startswith(q + ".")) for q in
                            stack.checkpointed)]
    ckpt = wrapped(stack, apply, before={p: lambda m: wrap_forward(m, _drift) for p in outermost})
    out = loss(ckpt.model, stack.example_input())
    if not promise.checks_determinism:
        note("no determinism check promised")
        return
    with pytest.raises(torch.utils.checkpoint.CheckpointError):
        out.backward()


class SineChain(nn.Module):
    """``x * w`` then ``depth`` sines: the forward saves ``depth + 1`` tensors (the product's
    input for ``w``'s gradient, each sine's input). ``tail_runs`` counts the runs that get
    past the last sine (a sine saves its input before it runs, so an early-stopping
    recomputation ends there)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, width))
        self.depth = depth
        self.tail_runs = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.w
        for _ in range(self.depth):
            h = torch.sin(h)
        self.tail_runs += 1
        return h


def _weight_grad(run: nn.Module, model: SineChain, x: torch.Tensor) -> torch.Tensor:
    """``model.w``'s gradient of a loss over ``run(x)`` (``run``: the model or its wrapper)."""
    run(x).square().sum().backward()
    return model.w.grad


@given(width=st.integers(1, 4), depth=st.integers(257, 300))
def test_long_forward_on_input_without_grad(refimpl_backend, width: int, depth: int) -> None:
    """The checkpointed module is the whole model and its input needs no gradient (where the
    backend promises gradients then), so only the parameter reaches autograd; the forward
    saves ``depth + 1`` > 256 tensors. Where the backend promises torch's early stop, the
    recomputation ends at the last sine's save: the code after the sines runs once (the
    forward's), else twice."""
    apply = component(refimpl_backend, "checkpoint")
    promise = promise_of(refimpl_backend)
    input_grad = not promise.grads_without_input_grad
    if input_grad:
        note("the input needs a gradient: none promised without")
    reach(not input_grad)  # the case the property is for: only the parameter needs a gradient
    x = torch.linspace(-1.0, 1.0, 2 * width).reshape(2, width).requires_grad_(input_grad)
    plain = SineChain(width, depth)
    want = _weight_grad(plain, plain, x)
    model = SineChain(width, depth)
    got = _weight_grad(apply(model) or model, model, x)
    what = f"{refimpl_backend.name} checkpoint on a {depth}-sine chain"
    assert torch.equal(want, got), (
        f"{what} with an input needing no gradient: weight gradient {got}, expected the "
        f"unwrapped module's {want}")
    runs, why = (1, "the recomputation stops at the last save") if promise.stops_early \
        else (2, "the whole call is recomputed")
    assert model.tail_runs == runs, \
        f"{what}: the code after the last sine ran {model.tail_runs} times, expected {runs} ({why})"


@given(stack=module_stacks())
def test_determinism_check_none_is_off(refimpl_backend, stack: ModuleStack) -> None:
    """The drift of ``test_nondeterministic_recomputation_raises_checkpoint_error`` under
    ``determinism_check="none"``: whatever the backward does, it raises no CheckpointError.
    The value is built at run time, as a program reads it from a config file: an equal
    string, not the interned literal (an option compared by identity shows)."""
    _setup(refimpl_backend, stack, recomputes=True)
    as_read = "".join(["no", "ne"])
    apply = with_options(refimpl_backend, determinism_check=as_read)
    outermost = [p for p in stack.checkpointed
                 if not any(q != p and (q == "" or p.startswith(q + ".")) for q in
                            stack.checkpointed)]
    ckpt = wrapped(stack, apply, before={p: lambda m: wrap_forward(m, _drift) for p in outermost})
    out = loss(ckpt.model, stack.example_input())
    try:
        out.backward()
    except torch.utils.checkpoint.CheckpointError as error:
        raise AssertionError(f"{refimpl_backend.name}: determinism_check='none' still "
                             f"checks: {error}") from error
    except RuntimeError as error:  # the drifted tensors' shapes break the backward: allowed
        note(f"backward failed otherwise: {type(error).__name__}")
