"""Checkpoint mutants that survived the mutation run and compute what the original computes.

benchmarks/mutation_score.py counts a survivor as equivalent only where its ``EQUIVALENT``
entry names a test that demonstrates the equivalence; these are those tests, for survivors of
the first run of seed 731252159 (keys ``path:line operator occurrence`` on the tree that run
measured). Each test shows both versions agree on every input the code can receive, and
shows, by running the checkpoint, that it receives no other (or that the code never uses
what the mutant changes).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from refimpl.checkpointing import CheckpointError, checkpoint, replay
from refimpl.checkpointing.frame import Frame

#: frame.py:177 ``len(recomputed) != len(self.metadata)`` -> ``<``
SAVE_COUNTS = range(0, 300)


class SavesMoreWhenRecomputed(nn.Module):
    """Saves ``extra`` more tensors (sines) when called inside a backward; with ``extra`` < 0,
    fewer (the product alone)."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 3))
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        again = torch._C._current_graph_task_id() != -1
        h = x * self.w
        if again and self.extra < 0:  # fewer: the product alone
            return h
        h = h.sin().sin()
        for _ in range(self.extra if again else 0):
            h = h.sin()
        return h


def test_count_check_sees_at_most_the_forwards_count(monkeypatch) -> None:
    """frame.py:177 (``!=`` to ``<``): ``Frame._check`` compares the number of tensors the
    recomputation saved with the forward's. ``recompute_pack`` raises as soon as a
    recomputation saves one more than the forward (while checks are on, the only time
    ``_check`` runs), so ``_check`` never sees more; on every count it can see (recomputed
    <= forward), ``!=`` and ``<`` agree."""
    for recomputed, forward in itertools.product(SAVE_COUNTS, SAVE_COUNTS):
        if recomputed <= forward:
            assert (recomputed != forward) == (recomputed < forward)
    seen: list[tuple[int, int]] = []
    original = Frame._check

    def recording(self, recomputed):
        seen.append((len(recomputed), len(self.metadata)))
        return original(self, recomputed)

    monkeypatch.setattr(Frame, "_check", recording)
    outcomes = []
    for extra, early_stop, debug in itertools.product((-1, 0, 1, 3), (True, False),
                                                      (True, False)):
        m = checkpoint(SavesMoreWhenRecomputed(extra), early_stop=early_stop, debug=debug)
        out = m(torch.ones(2, 3, requires_grad=True)).sum()
        try:
            out.backward()
            outcomes.append("ok")
        except CheckpointError as error:
            outcomes.append("more" if "more tensors" in str(error) else "other")
    assert seen and all(r <= f for r, f in seen), seen
    assert "more" in outcomes and "other" in outcomes and "ok" in outcomes, outcomes


def _recording(cls, calls: list[str]):
    """A subclass of the dataclass ``cls`` that records every use ``frozen`` changes: an
    assignment after ``__init__``, a deletion, a hash."""

    class Recording(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "_built", True)  # assignments before this are __init__'s

        def __setattr__(self, name, value):
            if getattr(self, "_built", False):
                calls.append(f"set {name}")
            super().__setattr__(name, value)

        def __delattr__(self, name):
            calls.append(f"del {name}")
            super().__delattr__(name)

        def __hash__(self):
            calls.append("hash")
            return super().__hash__()

    return Recording


@pytest.mark.parametrize("preserve", [True, False])
def test_replay_state_is_never_changed_nor_hashed(monkeypatch, preserve: bool) -> None:
    """replay.py:29 and replay.py:39 (``frozen=True`` to ``frozen=False`` on ``Autocast`` and
    ``GlobalState``): ``frozen`` changes only attribute assignment and deletion after
    ``__init__`` (they raise) and ``__hash__`` (generated; without it the class is
    unhashable). The checkpoint never does any of the three to these objects: with recording
    subclasses in their place, a forward and a backward under CPU autocast, nested
    checkpoints, dropout, with and without ``preserve_rng_state``, record nothing; the
    objects are the frame's private data and never leave it."""
    calls: list[str] = []
    monkeypatch.setattr(replay, "Autocast", _recording(replay.Autocast, calls))
    monkeypatch.setattr(replay, "GlobalState", _recording(replay.GlobalState, calls))
    inner = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.GELU())
    model = nn.Sequential(inner, nn.Linear(3, 3))
    checkpoint(inner, preserve_rng_state=preserve)
    checkpoint(model, preserve_rng_state=preserve)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.ones(2, 3, requires_grad=True)).float().sum()
    out.backward()
    assert model[1].weight.grad is not None
    assert calls == []
    captured = replay.capture((torch.ones(1),), preserve)
    assert type(captured).__name__ == "Recording" and calls == []


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
