"""The faked CUDA behind ``test_checkpoint_fake_cuda.py`` (issue 31, item 4) fakes what the
checkpoints read: each fake device's generator is its own, ``torch.cuda.device`` switches the
current one, the input reports ``cuda:1``, and the module draws from both devices."""

from __future__ import annotations

import torch

from refimpl.checkpointing import replay
from refimpl.properties.test_checkpoint_fake_cuda import (
    DrawsOnDevices,
    FakeCuda,
    OnFakeCuda1,
    fake_devices,
)


def test_each_fake_device_has_its_own_generator_and_current_device_switches() -> None:
    fake = FakeCuda()
    with fake.installed():
        assert torch.cuda.is_available() and torch.cuda.is_initialized()
        assert torch.cuda.device_count() == 2 and torch.cuda.current_device() == 0
        before = [torch.cuda.get_rng_state(i) for i in range(2)]
        torch.rand(3, generator=fake.generators[1])
        assert torch.equal(torch.cuda.get_rng_state(0), before[0])
        assert not torch.equal(torch.cuda.get_rng_state(1), before[1])
        with torch.cuda.device(1):
            assert torch.cuda.current_device() == 1
            torch.cuda.set_rng_state(before[1])  # no device: the current one
        assert torch.cuda.current_device() == 0
        assert torch.equal(torch.cuda.get_rng_state(1), before[1])
        assert torch.cuda.get_rng_state == fake.get_rng_state
    assert torch.cuda.get_rng_state != fake.get_rng_state  # unpatched after the block


def test_refimpl_captures_both_fake_devices() -> None:
    x = torch.ones(2).as_subclass(OnFakeCuda1)
    assert x.device == torch.device("cuda", 1) and x.get_device() == 1
    with FakeCuda().installed():
        state = replay.capture(((x,), {}), preserve_rng_state=True)
    assert sorted(state.cuda_rng) == [0, 1]  # the input's device and the current one


def test_the_module_draws_on_both_devices() -> None:
    devices = fake_devices()
    model = DrawsOnDevices(torch.nn.Identity(), devices.rand)
    with devices.context():
        devices.seed()
        before = devices.states()
        model(devices.input_on(torch.ones(1, 2)))
        after = devices.states()
    assert not torch.equal(before[0], after[0]) and not torch.equal(before[1], after[1])
    assert torch.equal(before[2], after[2])  # the CPU generator is not drawn from
