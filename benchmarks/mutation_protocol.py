"""The measurement protocol of the mutation score: a held-out sample, judged once.

The mutants a property suite was tuned against say little about the bugs it was never shown,
as a model's training error says little about its test error. So a score counts only as a
held-out measurement (docs/oracle-strength.md, "Protocol"):

- **a fresh seed** per run (:func:`draw_seed`), printed first and stored in the run's JSON,
  so no property can have been written against the sample it is judged on;
- **the first run counts** (:func:`first_run`): the JSON records the commit and the property
  files that differ from it (:func:`properties_changed`); a run of a seed given on the
  command line (a replay), or over property files that differ from the recorded commit, is
  not a first run, and the report says so;
- **an interval**: a sample of n mutants estimates the score, so each component's score is
  reported with its 95% Wilson score interval (:func:`wilson_interval`);
- **equivalents only with a demonstration** (:func:`equivalents_without_a_test`): a survivor
  counts as equivalent only when its table entry names a test that shows both versions agree,
  and that test passes in the run.

Nothing here needs cosmic-ray: the script and the unit tests import this module alone.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from pathlib import Path

#: the two-sided 95% normal quantile, Phi^-1(0.975)
Z95 = 1.959963984540054

#: What a killing suite is made of besides refimpl's component code: the properties, their
#: strategies and expectations, the oracle's backend plumbing and the shared conftest. A run
#: measures the suite at the recorded commit only when none of these differs from it.
PROPERTY_PATHS = ("properties", "refimpl/strategies", "refimpl/expect",
                  "refimpl/oracle", "conftest.py")


def draw_seed(given: int | None) -> tuple[int, bool]:
    """The run's seed and whether it was drawn fresh: ``given`` (a replay) when not None,
    else 32 bits from ``os.urandom`` (from the clock where the OS has no random source)."""
    if given is not None:
        return given, False
    try:
        raw = os.urandom(4)
    except NotImplementedError:
        raw = time.time_ns().to_bytes(8, "little")[:4]
    return int.from_bytes(raw, "little"), True


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion, ``k`` successes in ``n`` trials.

    With p = k/n: centre = (p + z^2/2n) / (1 + z^2/n), half-width =
    z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2); the interval is centre -+ half-width,
    which always lies in [0, 1] (unlike the normal approximation p -+ z sqrt(p(1-p)/n)),
    and keeps a non-zero width at k = 0 and k = n."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    shrink = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def head_commit(root: Path) -> str:
    """The commit checked out at ``root``."""
    return _git(root, "rev-parse", "HEAD").strip()


def properties_changed(root: Path, commit: str) -> list[str]:
    """The files of :data:`PROPERTY_PATHS` in ``root``'s working tree that differ from
    ``commit``: changed or deleted (``git diff``), or new and not ignored."""
    changed = _git(root, "diff", "--name-only", commit, "--", *PROPERTY_PATHS).split()
    new = _git(root, "ls-files", "--others", "--exclude-standard", "--",
               *PROPERTY_PATHS).split()
    return sorted(set(changed) | set(new))


def first_run(seed_drawn: bool, changed: list[str]) -> bool:
    """Whether a run is a held-out measurement: its seed was drawn for it (not a replay) and
    its property files are those of the recorded commit."""
    return seed_drawn and not changed


def equivalents_without_a_test(table: dict[str, tuple[str, str]], root: Path) -> list[str]:
    """The entries of an equivalence table (mutant key -> (test node id, why)) that do not
    name an existing test function in ``tests/`` with a reason: each is refused."""
    refused = []
    for key, (test, why) in table.items():
        path, _, name = test.partition("::")
        file = root / path
        exists = (path.startswith("tests/") and name and file.is_file()
                  and f"def {name.split('[')[0]}(" in file.read_text())
        if not exists or not why.strip():
            refused.append(f"{key}: names no test in tests/ that exists ({test!r}) "
                           "or gives no reason")
    return refused


def estimated_seconds(per_mutant: float, mutants: int, jobs: int) -> float:
    """A component's expected wall: ``mutants`` at ``per_mutant`` core-seconds each (the
    baseline's share included), dealt to ``jobs`` shards that run side by side."""
    return per_mutant * mutants / jobs
