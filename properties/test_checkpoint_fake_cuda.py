"""Property: the backend's checkpoint restores the generator of every CUDA device a forward
drew from, on a machine without a GPU (a faked CUDA) and on one with a GPU (for real).

A checkpoint must recompute with the random numbers the forward drew, on every device, and
leave each device's generator as the unwrapped run leaves it. What that takes (stash the
states of the input's device and the current device, install the captured ones for the
recomputation, put the stashed ones back on the device each came from) runs only where
CUDA is initialised, so without a GPU nothing exercised it. Here it is exercised with:

* **fake**: ``torch.cuda``'s ``is_available``, ``is_initialized``, ``_initialized``,
  ``device_count``, ``current_device``, ``device``, ``get_rng_state``, ``set_rng_state`` and
  ``is_bf16_supported`` patched onto one CPU generator per fake device (two: ``cuda:0``
  current, ``cuda:1``), and an input whose class reports ``device`` ``cuda:1`` (and, by
  keyword, a tensor on ``meta``, which the forward never reads and whose device has no
  generator). The module draws a mask from ``cuda:1``'s generator (its input's device) and
  noise from ``cuda:0``'s (the current device), then runs the drawn stack.
* **real** (``cuda`` marker, skipped visibly without a GPU): the same module on the last GPU,
  drawing with ``torch.rand(device=...)`` from that GPU's and the current GPU's generators.

Expectation: the unwrapped module under the same seeds (every CUDA generator and the CPU one),
each CUDA generator drawn from once more between forward and backward: gradients of the
parameters and the input bit for bit, and every generator's state after the step.

Two more properties, on the fake only:

* The forward under ``torch.autocast("cuda", dtype)`` (float16 or bfloat16; the module rounds
  as a CUDA op would when it sees CUDA autocast on): gradients and generators as above, so
  the recomputation replayed CUDA autocast.
* CUDA not yet initialised, and the module's first draw initialises it: torch's rule is a
  RuntimeError from the forward with ``preserve_rng_state=True`` (the state could not be
  stashed), no saved-tensor hooks left, and a correct next step; no error with
  ``preserve_rng_state=False`` (drawn where the backend takes options).

On the torch targets all three fail through one finding (docs/findings.md, "Checkpoint":
random numbers drawn on the current CUDA device are not replayed when the input lives on
another), the module drawing on both devices.

Reach (each example): the checkpointed module saves a tensor in its forward (so the backward
recomputes it, drawing again), counted in the unwrapped run; for the initialisation
property, the forward initialised CUDA.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from refimpl.expect.checkpoint import loss, wrapped
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies.modules import ModuleStack, module_stacks

FAKE_DEVICES = 2  # cuda:0 is current; the input lives on cuda:1


class OnFakeCuda1(torch.Tensor):
    """A CPU tensor that reports ``device`` cuda:1 (and ``get_device()`` 1); ops on it return
    plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 1)

    def get_device(self) -> int:
        return 1


class FakeCuda:
    """One CPU generator per fake CUDA device, behind patched ``torch.cuda`` functions; the
    current device is 0 unless a ``torch.cuda.device(i)`` block says otherwise. Built with
    ``initialized=False``, CUDA is initialised lazily, as a real one: by the first draw."""

    def __init__(self, initialized: bool = True) -> None:
        self.generators = [torch.Generator() for _ in range(FAKE_DEVICES)]
        self.current = 0
        self.initialized = initialized

    def rand(self, shape: tuple[int, ...], device: int) -> torch.Tensor:
        """Uniform numbers from ``device``'s generator, initialising CUDA first if it is not."""
        if not self.initialized:
            self.initialized = True
            torch.cuda._initialized = True  # what torch's checkpoint reads; restored on exit
        return torch.rand(shape, generator=self.generators[device])

    def index(self, device: int | str | torch.device | None) -> int:
        device = torch.device("cuda", device) if isinstance(device, int) else device
        index = None if device is None else torch.device(device).index
        return self.current if index is None else index

    def get_rng_state(self, device: int | str | torch.device = "cuda") -> torch.Tensor:
        return self.generators[self.index(device)].get_state()

    def set_rng_state(self, state: torch.Tensor, device: int | str | torch.device = "cuda"
                      ) -> None:
        self.generators[self.index(device)].set_state(state)

    @contextlib.contextmanager
    def device(self, device: int | str | torch.device | None) -> Iterator[None]:
        previous, self.current = self.current, self.index(device)
        try:
            yield
        finally:
            self.current = previous

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        patches = {"is_available": lambda: True, "is_initialized": lambda: self.initialized,
                   "_initialized": self.initialized, "device_count": lambda: FAKE_DEVICES,
                   "current_device": lambda: self.current, "device": self.device,
                   "get_rng_state": self.get_rng_state, "set_rng_state": self.set_rng_state,
                   "is_bf16_supported": lambda including_emulation=True: True}
        with contextlib.ExitStack() as stack:
            for name, fake in patches.items():
                stack.enter_context(mock.patch.object(torch.cuda, name, fake))
            yield


@dataclass
class Devices:
    """How the module draws and the step reads generators, fake or real."""

    rand: Callable[[tuple[int, ...], int], torch.Tensor]  # (shape, device index) -> CPU
    input_on: Callable[[torch.Tensor], torch.Tensor]      # CPU leaf -> input on the device
    seed: Callable[[], None]                              # every generator, the CPU's too
    states: Callable[[], list[torch.Tensor]]              # every generator's state, CPU's last
    context: Callable[[], contextlib.AbstractContextManager]
    count: int                                            # how many CUDA devices


def fake_devices(fake: FakeCuda | None = None) -> Devices:
    fake = fake or FakeCuda()

    def seed() -> None:
        torch.manual_seed(7)
        for i, g in enumerate(fake.generators):
            g.manual_seed(11 + i)

    return Devices(rand=fake.rand,
                   input_on=lambda x: x.as_subclass(OnFakeCuda1),
                   seed=seed, states=lambda: [*(g.get_state() for g in fake.generators),
                                              torch.get_rng_state()],
                   context=fake.installed, count=FAKE_DEVICES)


def real_devices() -> Devices:
    last = torch.cuda.device_count() - 1

    def seed() -> None:
        torch.manual_seed(7)
        for i in range(torch.cuda.device_count()):
            torch.cuda.manual_seed(11 + i) if i == torch.cuda.current_device() else \
                torch.cuda.default_generators[i].manual_seed(11 + i)

    return Devices(rand=lambda shape, i: torch.rand(shape, device=f"cuda:{i}").cpu(),
                   input_on=lambda x: x.to(f"cuda:{last}"), seed=seed,
                   states=lambda: [*(torch.cuda.get_rng_state(i)
                                     for i in range(torch.cuda.device_count())),
                                   torch.get_rng_state()],
                   context=contextlib.nullcontext, count=torch.cuda.device_count())


class DrawsOnDevices(nn.Module):
    """x -> inner(cpu(x) * mask(x's device) + noise(current device)): draws from two CUDA
    generators, then runs the drawn stack on the CPU; under CUDA autocast the sum is rounded
    to the autocast dtype first (what a CUDA op there would compute in)."""

    def __init__(self, inner: nn.Module, rand: Callable[[tuple[int, ...], int], torch.Tensor]):
        super().__init__()
        self.inner, self.rand = inner, rand

    def forward(self, x: torch.Tensor, aside: torch.Tensor | None = None) -> torch.Tensor:
        """``aside``: a tensor the forward never reads, on a device type with no generator
        (the step passes one on ``meta`` by keyword: no CUDA device to stash)."""
        shape = tuple(x.shape)
        mask = (self.rand(shape, x.device.index) > 0.3).float()
        h = x.cpu() * mask if x.device.type == "cuda" and not isinstance(x, OnFakeCuda1) \
            else x * mask
        h = h + self.rand(shape, torch.cuda.current_device())
        if torch.is_autocast_enabled("cuda"):  # rounds as a CUDA op under autocast would
            h = h.to(torch.get_autocast_dtype("cuda")).to(x.dtype)
        return self.inner(h)


@dataclass
class DeviceStep:
    grads: list[torch.Tensor | None]
    input_grad: torch.Tensor
    states: list[torch.Tensor]


def device_step(model: nn.Module, x: torch.Tensor, devices: Devices,
                autocast: torch.dtype | None = None) -> DeviceStep:
    """Seed every generator, run forward (under CUDA autocast of ``autocast``, if given),
    draw once more on every device (as later layers would: so a generator left as the
    recomputation ends differs from the caller's), run backward; gradients and generator
    states."""
    with devices.context():
        leaf = devices.input_on(x.detach().clone()).requires_grad_()
        devices.seed()
        ambient = torch.autocast("cuda", dtype=autocast) if autocast \
            else contextlib.nullcontext()
        with ambient:
            out = model(leaf, aside=torch.empty(1, device="meta")).square().sum()
        for i in range(devices.count):
            devices.rand((1,), i)
        out.backward()
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        return DeviceStep(grads, leaf.grad.cpu(), devices.states())


def saves_inside(model: DrawsOnDevices, x: torch.Tensor, devices: Devices) -> bool:
    """Whether the module's forward saves a tensor for backward (unwrapped run)."""
    saved = []
    with devices.context(), torch.autograd.graph.saved_tensors_hooks(
            lambda t: saved.append(1) or t, lambda t: t):
        devices.seed()
        model(devices.input_on(x.detach().clone()).requires_grad_())
    return bool(saved)


def _check(backend, stack: ModuleStack, devices: Devices,
           autocast: torch.dtype | None = None) -> None:
    apply = component(backend, "checkpoint")
    x = stack.example_input()
    plain = DrawsOnDevices(stack.build(), devices.rand)
    reach(saves_inside(plain, x, devices))
    want = device_step(plain, x, devices, autocast)
    target = DrawsOnDevices(wrapped(stack, apply).model, devices.rand)
    got = device_step(apply(target) or target, x, devices, autocast)
    what = f"{backend.name} checkpoint of a module drawing on two CUDA devices, " \
        f"inner {stack.checkpointed}{f', under CUDA autocast ({autocast})' if autocast else ''}"
    for i, (a, b) in enumerate(zip(want.grads, got.grads)):
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), \
            f"{what}: gradient of parameter {i} differs: expected {a}, got {b}"
    assert torch.equal(want.input_grad, got.input_grad), \
        f"{what}: input gradient differs: expected {want.input_grad}, got {got.input_grad}"
    names = [f"cuda:{i}" for i in range(len(want.states) - 1)] + ["cpu"]
    for name, a, b in zip(names, want.states, got.states):
        assert torch.equal(a, b), \
            f"{what}: the {name} generator after the step differs from the unwrapped run's"


@given(stack=module_stacks(featured=True))
def test_cuda_generator_restored_fake_device(refimpl_backend, stack: ModuleStack) -> None:
    """Faked CUDA (two devices, input on cuda:1): gradients and every generator after the step
    equal the unwrapped module's."""
    _check(refimpl_backend, stack, fake_devices())


@pytest.mark.cuda
@given(stack=module_stacks(featured=True))
def test_cuda_generator_restored_real_device(refimpl_backend, stack: ModuleStack) -> None:
    """The same on the GPUs present: the input on the last one, noise from the current one."""
    _check(refimpl_backend, stack, real_devices())


@given(stack=module_stacks(), dtype=st.sampled_from([torch.float16, torch.bfloat16]))
def test_cuda_autocast_replayed_fake_device(refimpl_backend, stack: ModuleStack,
                                            dtype: torch.dtype) -> None:
    """Faked CUDA, the forward under ``torch.autocast("cuda", dtype)``: the recomputation
    (in the backward, outside autocast) must see CUDA autocast as the forward did, so the
    gradients and every generator after the step equal the unwrapped module's."""
    _check(refimpl_backend, stack, fake_devices(), dtype)


def _hooks_left() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


@given(stack=module_stacks(), preserve=st.booleans())
def test_cuda_initialised_in_forward_fake_device(refimpl_backend, stack: ModuleStack,
                                                 preserve: bool) -> None:
    """Faked CUDA not yet initialised; the checkpointed module's first draw initialises it.
    torch's rule: with ``preserve_rng_state=True`` (the default) the forward raises a
    RuntimeError (the CUDA RNG state could not be stashed before it), leaving no saved-tensor
    hooks behind, and the next step (CUDA now initialised) equals the unwrapped module's;
    with ``preserve_rng_state=False`` (where the backend takes options) the step runs."""
    apply = component(refimpl_backend, "checkpoint")
    if not _takes_options(refimpl_backend):
        preserve = True
    fake = FakeCuda(initialized=False)
    devices = fake_devices(fake)
    x = stack.example_input()
    target = DrawsOnDevices(wrapped(stack, apply).model, devices.rand)
    target = (apply(target, preserve_rng_state=preserve) if _takes_options(refimpl_backend)
              else apply(target)) or target
    what = f"{refimpl_backend.name} checkpoint (preserve_rng_state={preserve}) of a module " \
        f"whose first CUDA draw initialises CUDA, inner {stack.checkpointed}"
    with devices.context():
        leaf = devices.input_on(x.detach().clone()).requires_grad_()
        try:
            error = None
            loss(target, leaf).backward()
        except RuntimeError as raised:
            error = raised
    reach(fake.initialized)
    assert not _hooks_left(), f"{what}: saved-tensor hooks left on the stack"
    if not preserve:
        assert error is None, f"{what}: raised {error!r}; nothing needs the CUDA RNG state"
        return
    assert error is not None, \
        f"{what}: no error, yet the CUDA RNG state the recomputation needs was never saved"
    plain = DrawsOnDevices(stack.build(), devices.rand)
    want, got = device_step(plain, x, devices), device_step(target, x, devices)
    for i, (a, b) in enumerate(zip(want.grads, got.grads)):
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), \
            f"{what}: the step after the error: gradient of parameter {i} differs"
    assert torch.equal(want.input_grad, got.input_grad), \
        f"{what}: the step after the error: input gradient differs"


def _takes_options(backend) -> bool:
    kinds = {p.kind for p in inspect.signature(backend.checkpoint).parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds
