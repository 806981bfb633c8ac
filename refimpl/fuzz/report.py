"""What a campaign leaves behind: the summary table, report.json and one reproducer per failure.

The summary reads in :data:`TABLE_WIDTH` columns: first the failures grouped by cause
(:mod:`refimpl.fuzz.triage`), each with one reproducer relative to ``--out``; then one row per
property, its name shortened from the left where it is too long (:func:`fit_names`: the end
tells a property from its neighbours; two names never shorten to one), and its note on up to
:data:`NOTE_LINES` lines, cut only between words (:func:`wrap_words`).

Reach: the share of a property's examples whose ``reach`` event (:mod:`refimpl.properties.reach`)
said "reached". A target property that ran examples and recorded no reach event at all is a
harness defect (it cannot say whether it tested anything) and is flagged as one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch

import refimpl
from refimpl.fuzz.examples import KeptExample, examples_file, kept_example
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.suite import PACKAGE, component_files, default_properties_dir
from refimpl.fuzz.triage import error_kind, group_failures
from refimpl.fuzz.worker import PropertyResult
from refimpl.oracle.registry import BUILTIN_TARGETS

HARNESS_DEFECT = "harness defect: records no reach event"

REPRODUCER = '''"""Reproducer written by `refimpl fuzz`.

property: {nodeid}
target:   {target}
failure (expected vs observed):
{message}

Run `python path/to/{filename}` from any folder: it exits 1 while the failure
reproduces, 0 once it is fixed, 2 if the property suite or the target cannot be loaded, or
the example cannot be rebuilt.
Needs: {needs}.
{rebuilt}
"""

import sys
from pathlib import Path

from refimpl.fuzz.replay import replay

HERE = Path(__file__).resolve().parent

# The shrunk failing example: the property called with these inputs.
CALL = {call}

# What the campaign saw (printed beside this run's own failure).
RECORDED = {recorded}

# Hypothesis's record of the example's draws (release, blob), as @reproduce_failure takes it.
CHOICES = {choices!r}

sys.exit(replay(
    properties={properties!r},
    nodeid={nodeid!r},
    target={target!r},
    call=CALL, recorded=RECORDED, timeout={timeout!r},
    route={route!r},  # how the example is rebuilt: from CALL, arguments or CHOICES
    arguments={arguments}, choices=CHOICES,
    cwd={cwd!r},
))
'''

#: what the reproducer says about how it rebuilds its example
REBUILT_FROM_CODE = ("The example is rebuilt from CALL below (code only: this file can be "
                     "pasted into a bug report).")
REBUILT_FROM_PICKLE = ("The example does not print as code that rebuilds it exactly (a tensor "
                       "whose repr is cut,\na module's weights): it is read from {path}, "
                       "beside this file; keep the two together.")
REBUILT_FROM_CHOICES = ("CALL does not rebuild the example (it holds st.data() draws or values "
                        "that are not code):\nit is replayed from CHOICES, Hypothesis's record "
                        "of its draws, through the property's own\nstrategies; that needs "
                        "hypothesis=={release} and the same property suite.")
REBUILT_BY_NOTHING = ("This example CANNOT be rebuilt: CALL is not code, its arguments do not "
                      "pickle, and Hypothesis\nrecorded no choices. This file exits 2; it "
                      "can neither reproduce the failure nor show it fixed.")
REBUILT_UNCHECKED = ("The campaign kept no record of how to rebuild this example (its worker "
                     "was killed while\nrunning it, or its engine keeps none): CALL is "
                     "replayed as printed, unchecked; where it\nis not code, this file exits 2.")


def _rebuilt(kept: KeptExample | None, saved: Path, folder: Path) -> str:
    """What the reproducer's docstring says about how it rebuilds its example."""
    if kept is None:
        return REBUILT_UNCHECKED
    if kept.route == "call":
        return REBUILT_FROM_CODE
    if kept.route == "arguments":
        return REBUILT_FROM_PICKLE.format(path=os.path.relpath(saved, folder))
    if kept.route == "choices":
        return REBUILT_FROM_CHOICES.format(release=kept.hypothesis)
    return REBUILT_BY_NOTHING


def reach_share(r: PropertyResult) -> float | None:
    """reached / examples, or None where the property recorded no reach event."""
    return r.reached / r.examples if r.reach_recorded and r.examples else None


def harness_defect(r: PropertyResult) -> bool:
    """A property that passed its examples and recorded no reach event. A property that
    failed is reported by its failure: an example that crashes before it records reach is
    the crash, not a missing event."""
    return r.outcome == "passed" and r.examples > 0 and r.reach_recorded == 0


def _note(r: PropertyResult) -> str:
    if r.outcome in ("skipped", "not run"):
        return r.reason
    if r.timed_out:
        return "timed out"
    if r.outcome == "failed":
        kind, rest = error_kind(r.message)
        return f"{kind}: {rest}" if kind else rest
    return HARNESS_DEFECT if harness_defect(r) else ""


#: the summary table fits this many columns (a CI log, a terminal); report.json has it all.
TABLE_WIDTH = 100
#: a note (why a property failed or was skipped) takes at most this many indented lines.
NOTE_LINES = 2
NOTE_INDENT = "    "
REACH_LEGEND = ("reach: the share of a property's examples that reached its interesting case "
                "(a budget that binds,\n  a net the pass converts, a graph with something to "
                "merge); n/a: it records none.")


def wrap_words(text: str, width: int = TABLE_WIDTH, lines: int = NOTE_LINES,
               indent: str = NOTE_INDENT, hang: str | None = None) -> list[str]:
    """``text`` on at most ``lines`` lines of at most ``width`` columns, the first
    ``indent``ed, the others ``hang``ed (default: two more spaces), broken between words; a
    cut (marked "...") falls between words, after as many words as fit, so the first words,
    where an error names itself, are always kept."""
    wrapped = textwrap.wrap(text, width=width, initial_indent=indent,
                            subsequent_indent=indent + "  " if hang is None else hang,
                            break_long_words=True)
    if len(wrapped) <= lines:
        return wrapped
    kept = wrapped[:lines]
    last = kept[-1]
    while len(last) + 4 > width and " " in last.strip():
        last = last.rsplit(" ", 1)[0]
    kept[-1] = last + " ..."
    return kept


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters (an ellipsis marks a cut)."""
    return text if len(text) <= width else text[:width - 3] + "..."


def short_name(nodeid: str) -> str:
    """``file::test[param]`` without the suite's folder and the file's ``test_`` prefix."""
    return nodeid.split("/")[-1].removeprefix("test_").replace(".py::", "::")


def fit_names(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name in at most ``width`` columns, shortened from the left ("..." then its end),
    where the words that tell a property from its neighbours are (``[add_scalar]``, the
    test's own name); a name whose end is another's keeps its file (``cse::...end``).
    Invariant: different names stay different."""
    fitted = {n: n if len(n) <= width else "..." + n[-(width - 3):] for n in names}
    seen = Counter(fitted.values())
    for name, short in fitted.items():
        if seen[short] > 1:
            head = name.split("::", 1)[0] + "::..."
            fitted[name] = head + name[-(width - len(head)):]
    return fitted


NAME_WIDTH = 62
ROW = "{:<62} {:<11} {:>8} {:>6} {:>8}"  # property, outcome, examples, reach, seconds


def summary_table(results: Sequence[PropertyResult]) -> str:
    """The failures grouped by cause (:func:`triage_lines`), then one row per property in at
    most :data:`TABLE_WIDTH` columns, a row's note (why it failed or was skipped) on up to
    :data:`NOTE_LINES` indented lines under it; then the counts and a legend."""
    lines = [ROW.format("property", "outcome", "examples", "reach", "seconds"),
             ROW.format(*("-" * n for n in (NAME_WIDTH, 11, 8, 6, 8)))]
    names = fit_names([short_name(r.nodeid) for r in results], NAME_WIDTH)
    for r in results:
        share = reach_share(r)
        lines.append(ROW.format(names[short_name(r.nodeid)], r.outcome, r.examples,
                                "n/a" if share is None else f"{share:.0%}",
                                f"{r.seconds:.1f}"))
        if _note(r):
            lines += wrap_words(_note(r))
    table = "\n".join(lines)
    counts = {o: sum(r.outcome == o for r in results)
              for o in ("passed", "failed", "skipped", "interrupted", "not run")}
    defects = sum(harness_defect(r) for r in results)
    tail = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    if not counts["passed"] and not counts["failed"]:
        tail += ": nothing ran, so nothing passed"
    tail += f"; {defects} harness defect(s)" if defects else ""
    triage = triage_lines(results)
    head = "\n".join(triage) + "\n\n" if triage else ""
    return f"{head}{table}\n\n{tail}\n{REACH_LEGEND}"


def has_reproducer(r: PropertyResult) -> bool:
    """Whether :func:`write_reproducers` writes one for ``r``: a failure with an example, or
    a timeout (a timed-out setup ran no example: its reproducer replays the property)."""
    return r.outcome == "failed" and (r.example is not None or r.timed_out)


def reproducer_path(r: PropertyResult) -> str | None:
    """Where ``r``'s reproducer is, relative to ``--out``; None where it has none."""
    return f"reproducers/{_filename(r)}" if has_reproducer(r) else None


def triage_lines(results: Sequence[PropertyResult]) -> list[str]:
    """The failures grouped by cause (:mod:`refimpl.fuzz.triage`): per group its count and
    cause (up to :data:`NOTE_LINES` lines), then one reproducer, relative to ``--out``."""
    rows = [dict(asdict(r), reproducer=reproducer_path(r)) for r in results]
    groups = group_failures(rows)
    if not groups:
        return []
    failed = sum(g.count for g in groups)
    lines = [f"failures by cause: {failed} failed properties, {len(groups)} cause(s) "
             "(reproducer paths are relative to --out)"]
    for number, group in enumerate(groups, start=1):
        cause = f"{group.kind}: {group.message}" if group.kind else group.message
        lines += wrap_words(f"{number}. {group.count} failed: {cause}", indent="  ",
                            hang="     ")
        more = f" and {group.count - 1} more" if group.count > 1 else ""
        lead = f"     shape {group.shape}; e.g. "
        room = max(TABLE_WIDTH - len(lead) - len(more), 20)
        first = fit_names([short_name(group.nodeids[0])], room)[short_name(group.nodeids[0])]
        lines.append(cut(f"{lead}{first}{more}", TABLE_WIDTH))
        if group.reproducer:
            lines.append(f"     python {group.reproducer}")
    return lines


#: a reproducer's file name (without ".py") has at most this many characters, so that the
#: line that runs it (``     python reproducers/NAME.py``) fits :data:`TABLE_WIDTH`.
FILENAME_STEM = 73


def _filename(result: PropertyResult) -> str:
    """``file__test_param.py`` from the node id; a longer stem keeps its first characters and
    a hash of the whole (two properties never share a file)."""
    name = result.nodeid.split("/")[-1].replace(".py::", "__")
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")
    if len(stem) > FILENAME_STEM:
        digest = hashlib.sha1(stem.encode()).hexdigest()[:8]
        stem = f"{stem[:FILENAME_STEM - 9]}_{digest}"
    return stem + ".py"


def python_string(text: str) -> str:
    """``text`` as a Python literal a person can read: a triple-quoted block where that is
    exact (no backslash, no triple quote, no quote at its end, only printable characters
    and newlines), else ``repr``."""
    readable = all(c.isprintable() or c == "\n" for c in text)
    if not readable or "\\" in text or "'''" in text or text.endswith("'"):
        return repr(text)
    return "'''\\\n" + text + "'''"


def _beside(path: Path, folder: Path) -> str:
    """Python source for ``path`` relative to the reproducer's folder (``HERE``), so that the
    campaign's ``--out`` folder can be moved or archived whole."""
    return f"str(HERE / {os.path.relpath(path, folder)!r})"


def _needs(opts: FuzzOptions, cwd: Path) -> str:
    """What the reproducer needs installed: refimpl and torch at the campaign's versions,
    and the target: its extra, or, for ``module:attribute``, its module, which the replay
    looks for first in ``cwd`` (the campaign's folder, stored in the file), then on
    ``sys.path``."""
    entry = BUILTIN_TARGETS.get(opts.target)
    if entry is None:
        module = opts.target.split(":", 1)[0]
        target = (f"{module!r} importable: looked for first in {cwd},\n  the folder the "
                  "campaign ran in, then on sys.path (set PYTHONPATH where that\n  folder "
                  "is not, e.g. on another machine)")
    elif entry.extra:
        target = f"pip install 'refimpl[{entry.extra}]'"
    else:
        target = "nothing more (a built-in target)"
    torch_release = torch.__version__.split("+")[0]  # "2.13.0+cpu": pip asks for 2.13.0
    return (f"refimpl {refimpl.__version__} and torch {torch.__version__}\n  (pip install "
            f"refimpl=={refimpl.__version__} torch=={torch_release});\n  the target: {target}")


def write_reproducers(results: Sequence[PropertyResult], opts: FuzzOptions,
                      properties: Path, cwd: Path) -> dict[str, str]:
    """One runnable file per failed property with an example; returns nodeid -> path.

    The file names the installed suite by package (``refimpl.properties``) rather than its
    folder, its pickled arguments relative to itself (never the example database), and the
    campaign's working folder only for a target given as ``module:attribute``."""
    folder = opts.out / "reproducers"
    folder.mkdir(parents=True, exist_ok=True)
    installed = properties.resolve() == default_properties_dir()
    written = {}
    for r in results:
        if not has_reproducer(r):
            continue
        path = folder / _filename(r)
        saved = examples_file(opts.out / "examples", r.nodeid)
        kept = kept_example(opts.out / "examples", r.nodeid)
        path.write_text(REPRODUCER.format(
            nodeid=r.nodeid, target=opts.target, message=r.message.strip() or "(no message)",
            filename=path.name, call=python_string(r.example or ""),
            recorded=python_string(r.message.strip()), needs=_needs(opts, cwd),
            rebuilt=_rebuilt(kept, saved, folder) if r.example else "",
            properties=PACKAGE if installed else str(properties.resolve()),
            route=kept.route if kept else "call", choices=kept.choices if kept else None,
            arguments=_beside(saved, folder) if kept and kept.route == "arguments" else None,
            timeout=opts.timeout, cwd=None if opts.target in BUILTIN_TARGETS else str(cwd)))
        written[r.nodeid] = str(path)
    return written


def reproducer_note(reproducers: dict[str, str], out: Path) -> str:
    """One line for the end of the output, instead of a line per failure: where the
    reproducers are (the causes above name one each; report.json names every one)."""
    return (f"reproducers: {len(reproducers)} in {out / 'reproducers'} (one per failing "
            "property; report.json names each)")


def suite_digest(properties: Path, components: Sequence[str]) -> str:
    """A digest of the chosen components' property files, names and contents: two campaigns
    with one digest ran the same properties (``--resume`` with ``--baseline`` checks it)."""
    digest = hashlib.sha1()
    for component in components:
        for path in component_files(properties, component):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def write_json(results: Sequence[PropertyResult], reproducers: dict[str, str],
               opts: FuzzOptions, header: str, stopped_by: int | None) -> Path:
    path = opts.out / "report.json"
    rows = [dict(asdict(r), reach=reach_share(r), harness_defect=harness_defect(r),
                 reproducer=reproducers.get(r.nodeid)) for r in results]
    groups = group_failures(rows)
    path.write_text(json.dumps({
        "target": header,
        "target_name": header.split(" (", 1)[0],
        "options": {"components": list(opts.components), "max_examples": opts.max_examples,
                    "minutes": opts.minutes, "profile": opts.profile, "timeout": opts.timeout,
                    "seed": opts.seed,
                    "suite": suite_digest(opts.properties or default_properties_dir(),
                                          opts.components)},
        "stopped_by_signal": stopped_by,
        "properties": rows,
        "failed": sum(r.outcome == "failed" for r in results),
        "not_run": sum(r.outcome == "not run" for r in results),
        "harness_defects": sum(harness_defect(r) for r in results),
        "causes": [dict(kind=g.kind, words=g.words, shape=g.shape, message=g.message,
                        nodeids=g.nodeids, reproducer=g.reproducer) for g in groups],
    }, indent=2))
    return path
