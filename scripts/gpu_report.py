"""The GPU check's report, as Markdown, from its step results (plain dicts, one per step).

:func:`report` is the run folder's ``gpu-report.md``; :func:`docs_page` is docs/gpu.md, the
same report under a page header for users. Both are pure functions of the results (and of
the optional notes, {"<step>/<test>": "finding N" or "fixed in ..."}): every figure on the
page is one a step wrote. Invariant: a step without a result shows as "not run", a count
that was not written as "no result written", a failure without a note as "not triaged yet".
"""

from __future__ import annotations

import re

from gpu_counts import line

#: the step names, in the order the report lists them.
ORDER = ("install", "seeds-torch", "seeds-refimpl", "pytest-cuda", "fuzz-inductor",
         "fuzz-refimpl")
SEED_COLUMNS = ("seeds-torch", "seeds-refimpl")


def _cell(text: object) -> str:
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def machines(results: dict[str, dict]) -> list[str]:
    """One line per machine the steps ran on: device, torch, CUDA, and when its last step
    ended (the latest ``ended``: the stamps sort as text, "YYYY-MM-DD HH:MM:SS UTC")."""
    latest: dict[tuple[str, str, str], str] = {}
    for r in results.values():
        machine = (r.get("device", "?"), r.get("torch", "?"), r.get("cuda", "?"))
        latest[machine] = max(latest.get(machine, ""), r.get("ended") or "")
    return [f"{device}, torch {torch} (CUDA {cuda}), last step ended {ended or '?'}"
            for (device, torch, cuda), ended in sorted(latest.items())]


def step_table(results: dict[str, dict]) -> list[str]:
    lines = ["| step | exit | seconds (budget) | result |", "| --- | --- | --- | --- |"]
    for name in [*ORDER, *sorted(set(results) - set(ORDER))]:
        result = results.get(name)
        if result is None:
            lines.append(f"| {name} | not run | | |")
            continue
        cut = ", cut at its budget" if result["timed_out"] else ""
        summary = result.get("summary") or line(result.get("counts"))
        lines.append(f"| {_cell(result['title'])} | {result['status']} | "
                     f"{result['seconds']:.0f} ({result['budget_s']:.0f}{cut}) | "
                     f"{_cell(summary)} |")
    return lines


def _reached(swaps: dict[str, int] | None) -> str:
    if swaps is None:
        return "not written"
    return ", ".join(f"{name} {times}" for name, times in swaps.items() if times) or "none"


def seed_table(results: dict[str, dict]) -> list[str]:
    """Each upstream module: its counts on torch's implementation and with refimpl's, and
    which of refimpl's swaps its tests reached (none: the refimpl column proves nothing)."""
    columns = [results.get(name, {}).get("per_file", {}) for name in SEED_COLUMNS]
    modules = sorted(set(columns[0]) | set(columns[1]))
    if not modules:
        return ["The seed files were not run."]
    swaps = results.get("seeds-refimpl", {}).get("reached", {})
    lines = ["| upstream module | torch's implementation | refimpl swapped in | swaps reached |",
             "| --- | --- | --- | --- |"]
    for module in modules:
        cells = [_cell(line((column.get(module) or {}).get("counts"))) for column in columns]
        lines.append(f"| {module} | {cells[0]} | {cells[1]} | {_reached(swaps.get(module))} |")
    totals = [_cell(line(results[name].get("counts"))) if name in results else "not run"
              for name in SEED_COLUMNS]
    lines.append(f"| all | {totals[0]} | {totals[1]} | |")
    return lines


def failure_table(results: dict[str, dict], notes: dict[str, str]) -> list[str]:
    rows = [(name, f) for name in ORDER if name in results
            for f in results[name].get("failures", [])]
    if not rows:
        return ["Nothing failed."]
    lines = ["| step | test | outcome | message | finding or fix |",
             "| --- | --- | --- | --- | --- |"]
    for name, failure in rows:
        note = notes.get(f"{name}/{failure['test']}", "not triaged yet")
        lines.append(f"| {name} | {_cell(failure['test'])} | {failure['outcome']} | "
                     f"{_cell(failure['message'])} | {_cell(note)} |")
    return lines


def reach_lines(results: dict[str, dict]) -> list[str]:
    lines = []
    for name in ("fuzz-inductor", "fuzz-refimpl"):
        reach = results.get(name, {}).get("reach") or {}
        if reach:
            shown = ", ".join(f"{prop} {value:.0%}" for prop, value in sorted(reach.items()))
            lines.append(f"- {name}: {shown}")
    return lines or ["- no reach recorded"]


def report(results: dict[str, dict], notes: dict[str, str] | None = None,
           heading: str = "# refimpl GPU check") -> str:
    notes = notes or {}
    lines = [heading, "", *(f"- {m}" for m in machines(results)), "", "## Steps", "",
             *step_table(results), "", "## The seed files: torch's implementation and refimpl's",
             "", *seed_table(results), "", "## What failed", "",
             *failure_table(results, notes), "", "## Reach of the fuzz steps' properties", "",
             *reach_lines(results)]
    return "\n".join(lines) + "\n"


DOCS_HEADER = """# The last GPU check

refimpl's CUDA checks run on a machine with a GPU by one command,
`python scripts/gpu_check.py --upstream` (its docstring has the exact command and the
timeline): PyTorch's own test files for the five systems, once on torch's implementation and
once with refimpl swapped in; the suite's CUDA tests (`pytest -m cuda`); a fuzz of inductor's
layout and partition decisions; and refimpl's own fuzz, whose properties draw CUDA examples
on such a machine. This page is written by `python scripts/gpu_check.py --write-docs DIR`
from the results of the last run; nothing on it is typed by hand but the notes on failures.
"""


def docs_page(results: dict[str, dict], notes: dict[str, str] | None = None) -> str:
    return DOCS_HEADER + "\n" + report(results, notes, heading="## The report").replace(
        "\n## ", "\n### ")
