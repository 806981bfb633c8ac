"""``refimpl fuzz --compare OLD/report.json``: what changed since an earlier campaign.

Both reports are read as plain data (their ``properties`` rows, keyed by node id). A property
is a **new failure** if it failed now and had not failed before (passed, or absent), **fixed**
if it failed before and passed now on examples drawn as before, and its **reach moved** if
both campaigns measured it and the share differs by at least :data:`REACH_STEP`. Properties
only one campaign ran are listed as added or gone.

The draws must match for "fixed" to mean anything: a property that failed on one example in
a random run and passed in another may only not have drawn that example. So the pre-run check
(:func:`check_comparable`) refuses two campaigns with different fixed seeds or example counts,
and where neither fixed its seed a property that failed before and passes now is listed as
"passed now", never as fixed. A property that did not run in one of the two (skipped, not run,
no examples) is never fixed.

Invariant: the comparison reads the two reports only; it never changes the verdict or the
exit status of the campaign that just ran.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: a reach change smaller than this (10 percentage points) is noise at the ci profile's sizes.
REACH_STEP = 0.10

#: the outcomes a report row may hold (refimpl.fuzz.worker.PropertyResult.outcome).
OUTCOMES = ("passed", "failed", "skipped", "interrupted", "not run")


class CompareError(ValueError):
    """--compare (or --baseline) names a file that is not a refimpl fuzz report, or a
    campaign that cannot be compared with this one."""


@dataclass(frozen=True)
class Comparison:
    """What changed from the old campaign to the new one, by node id."""

    new_failures: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    passed_now: list[str] = field(default_factory=list)  # failed before; draws not the same
    reach_moved: list[tuple[str, float, float]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)


def _row_problem(row: Any, index: int) -> str | None:
    """What is wrong with one ``properties`` row, or None."""
    where = f"properties[{index}]"
    if not isinstance(row, dict):
        return f"{where} is {type(row).__name__}, not an object"
    for name in ("nodeid", "outcome", "examples"):
        if name not in row:
            return f"{where} has no {name!r}"
    if not isinstance(row["nodeid"], str):
        return f"{where}['nodeid'] is {row['nodeid']!r}, not a string"
    if row["outcome"] not in OUTCOMES:
        return f"{where}['outcome'] is {row['outcome']!r}, not one of {', '.join(OUTCOMES)}"
    if not isinstance(row["examples"], int) or isinstance(row["examples"], bool):
        return f"{where}['examples'] is {row['examples']!r}, not a whole number"
    reach = row.get("reach")
    if reach is not None and not (isinstance(reach, (int, float)) and not isinstance(reach, bool)
                                  and math.isfinite(reach) and 0 <= reach <= 1):
        return f"{where}['reach'] is {reach!r}, not a share in [0, 1] or null"
    return None


def load_report(path: Path) -> dict:
    """A report.json, checked field by field; CompareError naming the first thing missing
    or wrong (one line)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path} is not a refimpl fuzz report.json ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("properties"), list):
        raise CompareError(f"{path} is not a refimpl fuzz report.json (no 'properties' list)")
    if not isinstance(report.get("options", {}), dict):
        raise CompareError(f"{path}: 'options' is not an object")
    for index, row in enumerate(report["properties"]):
        problem = _row_problem(row, index)
        if problem:
            raise CompareError(f"{path}: {problem}")
    return report


def load_rows(path: Path) -> dict[str, dict]:
    """The checked ``properties`` rows of a report.json, by node id."""
    return rows_of(load_report(path))


def rows_of(report: dict) -> dict[str, dict]:
    return {row["nodeid"]: row for row in report["properties"]}


def target_name(report: dict) -> str:
    """The name of the target a report ran against (``target_name``; older reports: the
    first word of their ``target`` line)."""
    return report.get("target_name") or str(report.get("target", "")).split(" (")[0]


def _seed_words(seed: int | None) -> str:
    return "no --seed" if seed is None else f"--seed {seed}"


def check_comparable(old: dict, seed: int | None, max_examples: int | None,
                     minutes: float | None, path: Path) -> list[str]:
    """Refuse (CompareError) a campaign whose draws differ from ``old``'s: another fixed seed,
    one seed fixed and the other not, another example count or time bound. Returns the
    warnings that remain (neither fixed a seed)."""
    options = old.get("options", {})
    old_seed = options.get("seed")
    if old_seed != seed:
        raise CompareError(f"{path} ran with {_seed_words(old_seed)}, this run with "
                           f"{_seed_words(seed)}: give the same --seed, or properties not "
                           "drawn read as fixed")
    for name, now in (("max_examples", max_examples), ("minutes", minutes)):
        if name in options and options[name] != now:
            flag = "--" + name.replace("_", "-")
            raise CompareError(f"{path} ran with {flag} {options[name]}, this run with "
                               f"{flag} {now}: give the same, or the draws differ")
    if seed is None:
        return [f"neither {path} nor this run fixed --seed: a property that failed there and "
                "passes here is listed as 'passed now', not fixed"]
    return []


def same_draws(old: dict, new: dict) -> bool:
    """Whether both campaigns drew their examples alike: the same fixed seed and bound."""
    o, n = old.get("options", {}), new.get("options", {})
    return (o.get("seed") is not None and o.get("seed") == n.get("seed")
            and o.get("max_examples") == n.get("max_examples")
            and o.get("minutes") == n.get("minutes"))


def _ran(row: dict | None) -> bool:
    return row is not None and row["outcome"] in ("passed", "failed") and row["examples"] > 0


def compare(old: dict[str, dict], new: dict[str, dict], draws_alike: bool = True
            ) -> Comparison:
    """:class:`Comparison` of two campaigns' rows (see the module docstring)."""
    both = sorted(set(old) & set(new))
    moved = [(n, old[n]["reach"], new[n]["reach"]) for n in both
             if old[n].get("reach") is not None and new[n].get("reach") is not None
             and abs(new[n]["reach"] - old[n]["reach"]) >= REACH_STEP]
    passed = [n for n in both if old[n]["outcome"] == "failed" and new[n]["outcome"] == "passed"
              and _ran(old[n]) and _ran(new[n])]
    return Comparison(
        new_failures=sorted(n for n, row in new.items() if row["outcome"] == "failed"
                            and old.get(n, {}).get("outcome") != "failed"),
        fixed=passed if draws_alike else [], passed_now=[] if draws_alike else passed,
        reach_moved=moved, added=sorted(set(new) - set(old)), gone=sorted(set(old) - set(new)))


def describe(comparison: Comparison, old_path: Path, notes: list[str] = ()) -> str:
    """The comparison as lines for the end of the output; ``notes`` (another target, seeds
    not fixed) first."""
    lines = [f"compared with {old_path}:"] + [f"  note: {note}" for note in notes]
    titled = [("new failures", comparison.new_failures), ("fixed", comparison.fixed)]
    if comparison.passed_now:
        titled.append(("passed now (failed there; not called fixed: the draws differ)",
                       comparison.passed_now))
    for title, names in (*titled, ("added", comparison.added), ("gone", comparison.gone)):
        lines.append(f"  {title}: {len(names)}")
        lines += [f"    {name}" for name in names]
    lines.append(f"  reach moved by {REACH_STEP:.0%} or more: {len(comparison.reach_moved)}")
    lines += [f"    {name}: {old:.0%} -> {new:.0%}" for name, old, new in comparison.reach_moved]
    return "\n".join(lines)


def describe_against(old: dict, new: dict, old_path: Path) -> str:
    """Compare two whole reports and say so, noting another target and unfixed seeds."""
    notes = []
    if target_name(old) != target_name(new):
        notes.append(f"{old_path} is a report of target {target_name(old)!r}, this run of "
                     f"{target_name(new)!r}: differences may be the targets', not changes")
    draws_alike = same_draws(old, new)
    if not draws_alike:
        notes.append("the two campaigns did not draw alike (no fixed --seed, or another "
                     "bound): nothing is called fixed")
    return describe(compare(rows_of(old), rows_of(new), draws_alike), old_path, notes)
