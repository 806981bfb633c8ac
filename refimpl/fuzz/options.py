"""The options of one fuzz campaign, as one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from refimpl.testing.profiles import PROFILES

COMPONENTS = ("flops", "cse", "partition", "checkpoint", "layout")


@dataclass(frozen=True)
class FuzzOptions:
    """What to fuzz, against what, for how long, and where to write what is found.

    Exactly one of ``max_examples`` and ``minutes`` bounds the campaign: ``max_examples`` is
    the number of examples per property; ``minutes`` repeats rounds
    until that wall time has passed.
    """

    target: str = "refimpl"
    components: tuple[str, ...] = COMPONENTS
    max_examples: int | None = 10
    minutes: float | None = None
    seed: int | None = None  # fixed: repeatable rounds, but Hypothesis skips the database
    out: Path = Path("fuzz-out")
    jobs: int = 1
    database: str | None = None  # a directory, or redis://host:port/db
    properties: Path | None = None  # the property suite's folder (default: the source tree's)
    profile: str = "fuzz"  # the Hypothesis profile the bounds apply to (dev, ci, fuzz)
    fail_fast: bool = False  # stop a component at its first failing property
    shrink: bool = True  # shrink failures to a minimal example (off: faster, larger examples)

    def __post_init__(self) -> None:
        unknown = [c for c in self.components if c not in COMPONENTS]
        if unknown or not self.components:
            raise ValueError(f"components={list(self.components)}: each must be one of "
                             f"{', '.join(COMPONENTS)}")
        if (self.max_examples is None) == (self.minutes is None):
            raise ValueError("give exactly one of max_examples and minutes")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples={self.max_examples} must be at least 1")
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"minutes={self.minutes} must be positive")
        if self.profile not in PROFILES:
            raise ValueError(f"profile={self.profile!r} is not one of {', '.join(PROFILES)}")
        if self.jobs < 1:
            raise ValueError(f"jobs={self.jobs} must be at least 1")
