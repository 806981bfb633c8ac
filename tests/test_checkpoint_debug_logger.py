"""The debug properties leave torch's op-logging logger as they found it.

torch's checkpoint debug mode leaves the ``LoggingTensor`` logger non-propagating, at INFO,
with one more filter per run (docs/findings.md, "Checkpoint"). pytest's log capture then
hooks that logger at the next test's start and fails formatting torch's records, so the next
debug property failed on torch's own checkpoint when it ran second. The properties' debug
switch restores the logger; these tests fail where it does not.
"""

from __future__ import annotations

import logging

import torch
from torch.utils import checkpoint as tuc

from refimpl.oracle import load_backend
from refimpl.properties import test_checkpoint_debug as debug_properties
from refimpl.strategies.drifts import Drift


def _logger_state() -> tuple:
    logger = logging.getLogger("LoggingTensor")
    return logger.propagate, logger.level, list(logger.filters)


def test_torch_s_debug_mode_leaves_the_logger_changed():
    """The premise, on torch itself: without the restoring switch the logger stays changed."""
    before = _logger_state()
    layer = torch.nn.Linear(2, 2)
    with tuc.set_checkpoint_debug_enabled(True):
        out = tuc.checkpoint(layer, torch.ones(1, 2, requires_grad=True), use_reentrant=False)
        out.sum().backward()
    after = _logger_state()
    logger = logging.getLogger("LoggingTensor")
    logger.propagate, logger.filters = before[0], before[2]
    logger.setLevel(before[1])
    assert after != before


def test_a_debug_step_on_torch_s_checkpoint_leaves_the_logger_as_it_was():
    before = _logger_state()
    drift = Drift(("sin", "mul"), ("sin", "exp"), False, "replace", 2)
    error = debug_properties._debug_step(load_backend("torch-checkpoint"), drift)
    assert isinstance(error, tuc.CheckpointError)
    assert _logger_state() == before
