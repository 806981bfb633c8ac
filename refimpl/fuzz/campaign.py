"""One campaign with the plain runner, from a checked set of options to the exit status.

Steps: clean --out (:mod:`.outdir`); mark every component the target lacks as skipped with
the target's reason (its properties are collected and skipped, never run, never passed); run
(:mod:`.runner`); write the reproducers, report.json, the JUnit XML and the summary, also when
a signal stopped the campaign.

SIGINT and SIGTERM stay caught from the start until the report is written: the first one
stops the workers; one that arrives after the workers ended (while the report is written)
waits until the report is whole and changes neither it nor the exit status, which is the
report's (a failure found is never traded for a signal's status).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from refimpl.fuzz.compare import describe_against, load_report
from refimpl.fuzz.junit import write_junit
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.outdir import clean_out
from refimpl.fuzz.report import reproducer_note, summary_table, write_json, write_reproducers
from refimpl.fuzz.runner import caught_stop_signals, run_campaign
from refimpl.fuzz.suite import default_properties_dir
from refimpl.oracle import describe
from refimpl.oracle.accepts import accepts_lines
from refimpl.oracle.backend import COMPONENTS, provided_by, skip_reason


def component_skips(backend: Any, components: tuple[str, ...]) -> dict[str, str]:
    """component -> why all its properties are skipped, for each component ``backend`` lacks."""

    return {c: f"backend {backend.name!r} has no {COMPONENTS[c]}: "
               f"{skip_reason(backend, COMPONENTS[c])}"
            for c in components if provided_by(backend, c) is None}


#: the exit status of a campaign that ended before every property it could run passed a
#: round (time ran out first), or that ran nothing at all (every property skipped).
INCOMPLETE = 3


def exit_status(results, stopped_by: int | None) -> int:
    """What the campaign's exit says, most serious first: 1 a property failed (whatever
    stopped the campaign: a finding is never traded for another status); 128 + N signal N
    stopped it; 3 not every property that could run completed a round, or none ran; 0 every
    property that could run passed."""
    if any(r.outcome == "failed" for r in results):
        return 1
    if stopped_by:
        return 128 + stopped_by
    unfinished = any(r.outcome in ("interrupted", "not run") for r in results)
    if unfinished or not any(r.outcome == "passed" for r in results):
        return INCOMPLETE
    return 0


def campaign_header(opts: FuzzOptions, backend: Any) -> str:
    """What runs and how it is bounded, for the first lines of the output: the target, the
    components run (those the target lacks marked), and the limits."""
    skips = component_skips(backend, opts.components)
    version = getattr(backend, "version", "unknown version")
    chosen = [c if c not in skips else f"{c} (skipped: the target has none)"
              for c in opts.components]
    bound = (f"{opts.max_examples} examples per property" if opts.max_examples is not None
             else f"{opts.minutes:g} minutes in all")
    takes = "".join(f"\n{line}" for line in accepts_lines(backend))
    return (f"target {backend.name} ({version})\ncomponents: {', '.join(chosen)}{takes}\n"
            f"limits: {bound}; {opts.timeout:g} s per example (past it the property fails "
            "as 'timed out')")


def run_and_report(opts: FuzzOptions, backend: Any) -> int:
    """The plain runner's campaign: clean --out, run, then :func:`report_campaign`."""

    old_report = load_report(opts.compare) if opts.compare else None  # before --force cleans
    clean_out(opts.out, resume=opts.resume)
    print(f"refimpl fuzz: {campaign_header(opts, backend)}", flush=True)
    with caught_stop_signals():  # until the report is written (a late signal waits)
        campaign = run_campaign(opts, component_skips(backend, opts.components))
        return report_campaign(opts, backend, campaign.results, campaign.stopped_by,
                               old_report)


def report_campaign(opts: FuzzOptions, backend: Any, results: list, stopped_by: int | None,
                    old_report: dict | None, engine_note: str = "") -> int:
    """The one report tail of every engine: reproducers, report.json, summary.txt, the JUnit
    XML (``--junitxml``), the printed summary, the ``--compare`` lines; the exit status.

    SIGINT and SIGTERM are caught while it runs: a signal that arrives now came after the
    campaign ended, so it is only mentioned, and the exit status is the report's."""
    with caught_stop_signals() as late:
        status = _report(opts, backend, results, stopped_by, old_report, engine_note)
    if late:
        print(f"refimpl fuzz: signal {late[0]} arrived after the campaign ended, while its "
              "report was written; the report is whole and the exit status is its own",
              file=sys.stderr, flush=True)
    return status


def _report(opts: FuzzOptions, backend: Any, results: list, stopped_by: int | None,
            old_report: dict | None, engine_note: str) -> int:
    properties = opts.properties or default_properties_dir()
    reproducers = write_reproducers(results, opts, properties, Path(os.getcwd()))
    report = write_json(results, reproducers, opts, describe(backend), stopped_by)
    summary = f"{campaign_header(opts, backend)}{engine_note}\n\n{summary_table(results)}"
    (opts.out / "summary.txt").write_text(summary + "\n")
    if opts.junitxml is not None:
        write_junit(results, reproducers, opts.junitxml, opts.target)
    stopped = f"\nstopped by signal {stopped_by}" if stopped_by else ""
    print(f"\n{summary}{stopped}\n\nreport: {report}", flush=True)
    if reproducers:
        print(reproducer_note(reproducers, opts.out))
    if old_report is not None:
        print("\n" + describe_against(old_report, load_report(report), opts.compare))
    return exit_status(results, stopped_by)
