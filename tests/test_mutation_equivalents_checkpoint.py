"""Checkpoint mutants that survived the mutation run and compute what the original computes.

benchmarks/mutation_score.py counts a survivor as equivalent only where its ``EQUIVALENT``
entry names a test that demonstrates the equivalence; these are those tests, for survivors of
the first run of seed 731252159 (keys ``path:line operator occurrence`` on the tree that run
measured). Each test shows both versions agree on every input the code can receive, and
shows, by running the checkpoint, that it receives no other.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from refimpl.checkpointing import CheckpointError, checkpoint
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


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
