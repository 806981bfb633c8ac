"""``refimpl fuzz --compare OLD/report.json``: what changed since an earlier campaign.

Both reports are read as plain data (their ``properties`` rows, keyed by node id). A property
is a **new failure** if it failed now and had not failed before (passed, or absent), **fixed**
if it failed before and passed now, and its **reach moved** if both campaigns measured it and
the share differs by at least :data:`REACH_STEP`. Properties only one campaign ran are listed
as added or gone. Invariant: the comparison reads the two reports only; it never changes the
verdict or the exit status of the campaign that just ran.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

#: a reach change smaller than this (10 percentage points) is noise at the ci profile's sizes.
REACH_STEP = 0.10


class CompareError(ValueError):
    """--compare names a file that is not a refimpl fuzz report."""


@dataclass(frozen=True)
class Comparison:
    """What changed from the old campaign to the new one, by node id."""

    new_failures: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    reach_moved: list[tuple[str, float, float]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)


def load_rows(path: Path) -> dict[str, dict]:
    """The ``properties`` rows of a report.json, by node id; CompareError if it is none."""
    try:
        report = json.loads(path.read_text())
        return {row["nodeid"]: row for row in report["properties"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CompareError(f"{path} is not a refimpl fuzz report.json ({exc})") from None


def compare(old: dict[str, dict], new: dict[str, dict]) -> Comparison:
    """:class:`Comparison` of two campaigns' rows (see the module docstring)."""
    both = sorted(set(old) & set(new))
    moved = [(n, old[n]["reach"], new[n]["reach"]) for n in both
             if old[n].get("reach") is not None and new[n].get("reach") is not None
             and abs(new[n]["reach"] - old[n]["reach"]) >= REACH_STEP]
    return Comparison(
        new_failures=sorted(n for n, row in new.items() if row["outcome"] == "failed"
                            and old.get(n, {}).get("outcome") != "failed"),
        fixed=[n for n in both if old[n]["outcome"] == "failed"
               and new[n]["outcome"] == "passed"],
        reach_moved=moved, added=sorted(set(new) - set(old)), gone=sorted(set(old) - set(new)))


def describe(comparison: Comparison, old_path: Path) -> str:
    """The comparison as lines for the end of the output."""
    lines = [f"compared with {old_path}:"]
    for title, names in (("new failures", comparison.new_failures),
                         ("fixed", comparison.fixed), ("added", comparison.added),
                         ("gone", comparison.gone)):
        lines.append(f"  {title}: {len(names)}")
        lines += [f"    {name}" for name in names]
    lines.append(f"  reach moved by {REACH_STEP:.0%} or more: {len(comparison.reach_moved)}")
    lines += [f"    {name}: {old:.0%} -> {new:.0%}" for name, old, new in comparison.reach_moved]
    return "\n".join(lines)
