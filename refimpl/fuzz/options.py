"""The options of one fuzz campaign, as one frozen value."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.profiles import PROFILES
from refimpl.oracle.backend import COMPONENTS as _COMPONENT_METHODS

#: the components a campaign can run, in the order they run (the oracle's list).
COMPONENTS = tuple(_COMPONENT_METHODS)
ENGINES = ("runner", "hypofuzz", "dask")
DEFAULT_TIMEOUT = 120.0  # seconds one example may run (a cold inductor compile fits)


@dataclass(frozen=True)
class FuzzOptions:
    """What to fuzz, against what, for how long, and where to write what is found.

    Exactly one of ``max_examples`` and ``minutes`` bounds the campaign: ``max_examples`` is
    the number of examples per property; ``minutes`` repeats rounds until that wall time has
    passed, stopping the round in progress when it does. ``timeout`` bounds one example.
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
    timeout: float = DEFAULT_TIMEOUT  # seconds per example; the worker watchdog allows more
    junitxml: Path | None = None  # JUnit XML beside report.json, for CI systems
    compare: Path | None = None  # an earlier campaign's report.json: say what changed
    baseline: str | None = None  # a target, or an earlier report.json: what only this fails
    resume: bool = False  # keep --out's example database (its failures replay first)
    force: bool = False  # replace an earlier campaign's --out entirely
    engine: str = "runner"  # runner (this package's workers), hypofuzz or dask
    scheduler: str | None = None  # dask: a running scheduler's address (else a LocalCluster)

    def __post_init__(self) -> None:
        unknown = [c for c in self.components if c not in COMPONENTS]
        if unknown or not self.components:
            raise ValueError(f"components={list(self.components)}: each must be one of "
                             f"{', '.join(COMPONENTS)}")
        if len(set(self.components)) != len(self.components):
            raise ValueError(f"components={list(self.components)}: each at most once")
        if (self.max_examples is None) == (self.minutes is None):
            raise ValueError("give exactly one of max_examples and minutes")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples={self.max_examples} must be at least 1")
        for name in ("minutes", "timeout"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value} must be a positive finite number")
        if self.profile not in PROFILES:
            raise ValueError(f"profile={self.profile!r} is not one of {', '.join(PROFILES)}")
        if self.jobs < 1:
            raise ValueError(f"jobs={self.jobs} must be at least 1")
        if self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r} is not one of {', '.join(ENGINES)}")
        if self.scheduler is not None and self.engine != "dask":
            raise ValueError(f"scheduler={self.scheduler!r} needs engine='dask'")
        if self.scheduler is not None and "://" not in self.scheduler:
            raise ValueError(f"scheduler={self.scheduler!r}: expected an address such as "
                             "tcp://host:8786")
        if self.resume and self.force:
            raise ValueError("give at most one of resume and force")
