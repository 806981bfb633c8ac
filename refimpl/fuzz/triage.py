"""Triage: a campaign's failures grouped by cause, so that twenty failures of one defect read
as one line.

Input is plain data: report rows (dicts with ``nodeid``, ``outcome``, ``message``,
``example`` and, where written, ``reproducer``), as report.json holds them. Output is a list
of :class:`Group`, largest first.

The rule. Two failures have the same cause when they agree on

- the **error's kind**: the exception class that ended the example, without its module
  (``refimpl.oracle.blame.TargetError`` is ``TargetError``); none for a message that does not
  start with one ("timed out: ...");
- the error's **first words**: the first :data:`FIRST_WORDS` words of the message's first
  line after the kind, with every digit read as ``#`` (node names such as ``add_1`` and
  ``add_2``, counts such as ``removed 0 nodes``, differ between shrunk examples of one
  defect);
- the shrunk **example's shape**: the names of the property's arguments (the backend's
  opaque ``<...>`` repr left out) and, counted, the names of the calls that build them
  (``GraphSpec``, ``4 NodeSpec``, ``data``), every literal ignored. Examples of one defect
  shrink to the same skeleton with different ops and constants in it.

Invariant: every failed row is in exactly one group, and every member of a group has the
group's key; rows that did not fail are in none. Groups keep the rows' order, and the first
member is the group's example (its reproducer is the group's).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

#: how many words of the message (after the error's kind) name the cause.
FIRST_WORDS = 8

_KIND = re.compile(r"^([A-Za-z_][\w.]*): ")
_ARGUMENT = re.compile(r"^ {4}(\w+)=(.*)$")  # a top-level argument: 4 spaces in
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")


@dataclass(frozen=True)
class Group:
    """Failures with one cause: the key's parts, and the rows' node ids in report order."""

    kind: str
    words: str
    shape: str
    nodeids: list[str] = field(default_factory=list)
    reproducer: str | None = None  # the first member's that has one
    message: str = ""  # the first member's first line after its kind: the cause, as read

    @property
    def count(self) -> int:
        return len(self.nodeids)


def first_line(message: str) -> str:
    """The first non-empty line of ``message``, stripped."""
    return next((line.strip() for line in message.splitlines() if line.strip()), "")


def error_kind(message: str) -> tuple[str, str]:
    """(the exception class without its module, the rest of the first line); the kind is
    empty where the line does not start with ``Name: ``."""
    line = first_line(message)
    match = _KIND.match(line)
    if match is None:
        return "", line
    return match.group(1).rsplit(".", 1)[-1], line[match.end():]


def first_words(text: str, count: int = FIRST_WORDS) -> str:
    """The first ``count`` words of ``text``, every digit read as ``#``."""
    return re.sub(r"\d", "#", " ".join(text.split()[:count]))


def example_shape(example: str | None) -> str:
    """The shape of a printed example (module docstring): its argument names, then its calls
    counted, e.g. ``spec: GraphSpec, 4 NodeSpec``; ``no example`` where there is none."""
    if not example:
        return "no example"
    lines = example.splitlines()
    arguments = [m.group(1) for m in map(_ARGUMENT.match, lines[1:])
                 if m and not m.group(2).startswith("<")]
    body = "\n".join(line.split("#", 1)[0] for line in lines[1:])  # comments left out
    calls = Counter(_CALL.findall(re.sub(r"<[^<>]*>", "", body)))
    counted = [name if n == 1 else f"{n} {name}" for name, n in sorted(calls.items())]
    return f"{', '.join(arguments) or '(no arguments)'}: {', '.join(counted) or 'literals'}"


def cause_key(row: dict) -> tuple[str, str, str]:
    """(kind, first words, shape) of a failed row."""
    kind, rest = error_kind(row.get("message") or "")
    return kind, first_words(rest), example_shape(row.get("example"))


def group_failures(rows: Iterable[dict]) -> list[Group]:
    """The failed rows grouped by :func:`cause_key`, the largest group first (ties: in the
    order their first member came)."""
    groups: dict[tuple[str, str, str], Group] = {}
    for row in rows:
        if row.get("outcome") != "failed":
            continue
        key = cause_key(row)
        group = groups.setdefault(key, Group(*key, message=error_kind(row.get("message")
                                                                        or "")[1]))
        group.nodeids.append(row["nodeid"])
        if group.reproducer is None and row.get("reproducer"):
            groups[key] = Group(*key, nodeids=group.nodeids, reproducer=row["reproducer"],
                                message=group.message)
    ordered = list(groups.values())
    return sorted(ordered, key=lambda g: -g.count)  # sorted is stable: ties keep their order
