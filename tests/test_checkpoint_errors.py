"""refimpl's checkpoint raises torch's exception class (or a subclass) wherever torch raises.

Each bad input is run through ``torch.distributed._composable.checkpoint`` (forward and
backward included: torch rejects some options only there) on a fresh module, and through
``refimpl.checkpoint``; refimpl's exception must be an instance of the class torch raised, on
whichever torch release runs the test. Also: issue 14's ``use_reentrant="no"``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributed._composable import checkpoint as torch_checkpoint

import refimpl
from refimpl.checkpointing import CheckpointError

BAD_OPTIONS = [
    {"use_reentrant": True},
    {"use_reentrant": "no"},
    {"use_reentrant": 1},
    {"foo": 1},
    {"determinism_check": "strict"},
    {"debug": "yes"},
    {"context_fn": 3},
    {"context_fn": lambda: None},
]


def block() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4))


def _run(apply) -> BaseException | None:
    """The exception ``apply()`` raises (its module then run forward and backward), or None."""
    try:
        m = apply()
        m(torch.randn(2, 4, requires_grad=True)).sum().backward()
    except Exception as exc:  # which class it is, is the point
        return exc
    return None


def option_id(options: dict) -> str:
    """A test id that is the same in every process (pytest-xdist workers compare them): a
    callable is named by what it is, not by its address."""
    return ",".join(f"{k}={'<lambda>' if callable(v) else repr(v)}" for k, v in options.items())


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=option_id)
def test_bad_options_raise_torchs_class(options) -> None:
    theirs = _run(lambda: torch_checkpoint(block(), **options))
    ours = _run(lambda: refimpl.checkpoint(block(), **options))
    assert ours is not None, f"refimpl accepted {options}"
    if theirs is not None:
        assert isinstance(ours, type(theirs)), \
            f"{options}: torch raises {type(theirs).__name__}, refimpl {type(ours).__mro__}"


def test_applying_twice_raises_torchs_class() -> None:
    m = torch_checkpoint(block())
    theirs = _run(lambda: torch_checkpoint(m))
    r = refimpl.checkpoint(block())
    ours = _run(lambda: refimpl.checkpoint(r))
    assert theirs is not None and isinstance(ours, type(theirs)), (theirs, ours)


@pytest.mark.parametrize("call", ["checkpoint", "state"])
def test_non_module_raises_torchs_class(call) -> None:
    theirs = _run(lambda: getattr(torch_checkpoint, call)(3) if call == "state"
                  else torch_checkpoint(3))
    ours = _run(lambda: getattr(refimpl.checkpoint, call)(3) if call == "state"
                else refimpl.checkpoint(3))
    assert theirs is not None and isinstance(ours, type(theirs)), (theirs, ours)


def test_checkpoint_error_is_torchs() -> None:
    """Issue 10, item 6: code catching torch's CheckpointError catches refimpl's."""
    assert issubclass(CheckpointError, torch.utils.checkpoint.CheckpointError)


def test_use_reentrant_must_be_a_bool() -> None:
    """Issue 14: a non-bool use_reentrant is named as such, not as 'True is not supported'."""
    with pytest.raises(TypeError, match=r"use_reentrant must be a bool \(True or False\), "
                                        r"got 'no'") as info:
        refimpl.checkpoint(block(), use_reentrant="no")
    assert "use_reentrant=True is not supported" not in str(info.value)
    assert isinstance(info.value, NotImplementedError)  # torch's class for a truthy value


def test_recomputation_error_is_caught_as_torchs_checkpoint_error() -> None:
    class Drifting(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin, self.calls = nn.Linear(4, 4), 0

        def forward(self, x):
            self.calls += 1
            return self.lin(x if self.calls == 1 else torch.cat([x, x])[: len(x) + 1]).exp()

    out = refimpl.checkpoint(Drifting())(torch.randn(2, 4, requires_grad=True)).sum()
    with pytest.raises(torch.utils.checkpoint.CheckpointError, match="not deterministic"):
        out.backward()
