"""``refimpl fuzz --target mine --baseline torch``: what only the target under test fails.

The baseline is another target, run after the campaign on the same seed (``--seed``, or one
chosen and printed) and the same example count, unshrunk (only its verdict per property is
compared, and shrinking a failure both share would double the run), its report written to
``--out/baseline``; or
an earlier campaign's report.json, which must have run with the same ``--seed`` and bound
(:func:`refimpl.fuzz.compare.check_comparable`).

The rule, per property: **only mine** where the target under test failed it and the baseline
ran it and passed; **both** where both failed (a defect the baseline shares: not new); **no
baseline verdict** where the baseline did not run it (skipped, not run, no examples: a
component it lacks, or inputs it does not take). The "only mine" failures are shown first,
grouped by cause (:mod:`refimpl.fuzz.triage`), before the campaign's own summary.

With ``--resume``, a finished campaign already in ``--out`` is reused instead of run again
(:func:`reusable_campaign`): where its report ran the same target, seed, bound, components
and profile, only the baseline runs. A report that ran otherwise is refused (one line, exit
2): its rows would be compared with a baseline drawn differently. A campaign that did not
finish (stopped, or properties not run) is run again, keeping its example database, as
``--resume`` does without ``--baseline``.

Invariant: the baseline never changes the campaign's verdict, report rows or exit status; it
only adds the section above (stdout, the top of summary.txt, ``baseline`` in report.json).
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from refimpl.fuzz.campaign import campaign_header, component_skips, report_campaign
from refimpl.fuzz.compare import (
    CompareError,
    check_comparable,
    load_report,
    rows_of,
    target_name,
)
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.outdir import clean_out
from refimpl.fuzz.report import (
    TABLE_WIDTH,
    fit_names,
    short_name,
    suite_digest,
    wrap_words,
    write_json,
    write_reproducers,
)
from refimpl.fuzz.runner import CampaignResult, caught_stop_signals, run_campaign
from refimpl.fuzz.suite import default_properties_dir
from refimpl.fuzz.triage import group_failures
from refimpl.fuzz.worker import PropertyResult
from refimpl.oracle import describe, load_backend


@dataclass(frozen=True)
class Baseline:
    """What ``--baseline`` named: a target to run (its backend), or an earlier report."""

    name: str
    backend: Any = None
    report: dict | None = None


@dataclass(frozen=True)
class Split:
    """The failing properties of the target under test, by the baseline's verdict."""

    only_mine: list[str] = field(default_factory=list)
    both: list[str] = field(default_factory=list)
    no_verdict: list[str] = field(default_factory=list)


def load_baseline(text: str, opts: FuzzOptions) -> tuple[FuzzOptions, Baseline]:
    """The baseline ``text`` names, and ``opts`` with the seed both run on. An existing
    ``.json`` file is an earlier report (checked: the same --seed and bound as ``opts``);
    anything else a target (``opts`` gets a random seed where none was given). Raises
    CompareError, or the target's load error, for a one-line usage error."""
    path = Path(text)
    if text.endswith(".json") or path.is_file():
        report = load_report(path)
        if opts.seed is None:
            raise CompareError(f"{path} is a report: give --seed "
                               f"{report.get('options', {}).get('seed')} (its seed), so that "
                               "both ran on the same examples")
        check_comparable(report, opts.seed, opts.max_examples, opts.minutes, path)
        return opts, Baseline(target_name(report), report=report)
    seeded = opts if opts.seed is not None else replace(opts, seed=random.randrange(2**31))
    return seeded, Baseline(text, backend=load_backend(text))


def finished(report: dict) -> bool:
    """Whether a report is of a campaign that ran to its end: no signal stopped it and
    every property it collected ran (or was skipped)."""
    return not report.get("stopped_by_signal") and not any(
        row["outcome"] in ("interrupted", "not run") for row in report["properties"])


#: how a reused campaign's option is named where it differs (the others by their own name)
LABELS = {"suite": "property files (digest)"}


def reusable_campaign(opts: FuzzOptions, backend: Any, seed_given: int | None
                      ) -> dict | None:
    """``--baseline`` with ``--resume``: the report in ``--out`` when it is of a finished
    campaign of this target that ran as ``opts`` asks (seed, bound, components, profile, the
    same property files: :func:`refimpl.fuzz.report.suite_digest`);
    None where there is none to reuse (no report, or an unfinished campaign: it runs again,
    as --resume runs one). CompareError, one line naming what differs, for a finished
    campaign that ran otherwise, or where no --seed was given (``seed_given`` None)."""
    path = opts.out / "report.json"
    if not (opts.resume and opts.baseline is not None and path.is_file()):
        return None
    report = load_report(path)
    if not finished(report):
        return None
    ran = report.get("options", {})
    if seed_given is None:
        raise CompareError(f"{path} ran with --seed {ran.get('seed')}: give it, so that "
                           "the baseline draws the examples that campaign drew")
    properties = opts.properties or default_properties_dir()
    asked = {"target": _name_and_version(describe(backend)), "seed": opts.seed,
             "max_examples": opts.max_examples, "minutes": opts.minutes,
             "components": list(opts.components), "profile": opts.profile,
             "suite": suite_digest(properties, opts.components)}
    was = dict(ran, target=_name_and_version(str(report.get("target"))))
    differ = [f"{LABELS.get(name, name)} {was.get(name)!r} (this run: {value!r})"
              for name, value in asked.items() if was.get(name) != value]
    if differ:
        raise CompareError(f"{path} ran with {'; '.join(differ)}: its rows cannot be "
                           "compared with this baseline; pass --force instead of --resume "
                           "to run the campaign again")
    return report


def _name_and_version(header: str) -> str:
    """``name (version)`` of a target's description (its components after ``;`` left out)."""
    return header.split(";", 1)[0]


def results_of(report: dict) -> list[PropertyResult]:
    """A report's rows as the results they were written from (report.json holds every
    field of :class:`PropertyResult`, and more)."""
    names = [f.name for f in fields(PropertyResult)]
    return [PropertyResult(**{n: row[n] for n in names if n in row})
            for row in report["properties"]]


def split(mine: dict[str, dict], base: dict[str, dict]) -> Split:
    """:class:`Split` of ``mine``'s failing rows by ``base``'s (module docstring)."""
    result = Split()
    for nodeid, row in mine.items():
        if row["outcome"] != "failed":
            continue
        other = base.get(nodeid)
        if other is not None and other["outcome"] == "failed":
            result.both.append(nodeid)
        elif other is not None and other["outcome"] == "passed" and other["examples"] > 0:
            result.only_mine.append(nodeid)
        else:
            result.no_verdict.append(nodeid)
    return result


def describe_split(result: Split, mine: dict[str, dict], mine_name: str, base_name: str
                   ) -> str:
    """The section shown first: the "only mine" failures grouped by cause, then the counts
    of shared failures and of those the baseline gave no verdict on."""
    lines = [f"baseline {base_name}: {len(result.only_mine)} failing properties fail only "
             f"on {mine_name}"]
    for group in group_failures(mine[n] for n in result.only_mine):
        names = fit_names([short_name(n) for n in group.nodeids], TABLE_WIDTH - 8)
        cause = f"{group.kind}: {group.message}" if group.kind else group.message
        lines += wrap_words(f"{group.count} x {cause}", indent="  ", hang="    ")
        lines += [f"      {names[short_name(n)]}" for n in group.nodeids]
    lines.append(f"  {len(result.both)} fail on {base_name} too (not new)")
    if result.no_verdict:
        lines.append(f"  {len(result.no_verdict)} {base_name} did not run (no verdict):")
        names = fit_names([short_name(n) for n in result.no_verdict], TABLE_WIDTH - 6)
        lines += [f"      {names[short_name(n)]}" for n in result.no_verdict]
    return "\n".join(lines)


def _run_baseline(opts: FuzzOptions, baseline: Baseline) -> dict:
    """Run the baseline target into ``--out/baseline``, unshrunk; its report.

    Shrinking finds a smaller failing example of a property already failed, so it never
    changes the verdict the split reads; the baseline's reproducers hold the first failing
    example instead (a shrunk one: run that target as its own campaign and pass its report)."""
    base_opts = replace(opts, target=baseline.name, out=opts.out / "baseline", junitxml=None,
                        compare=None, resume=False, force=False, shrink=False)
    clean_out(base_opts.out, resume=False)  # an earlier baseline's files go
    print(f"refimpl fuzz: baseline {campaign_header(base_opts, baseline.backend)}", flush=True)
    campaign = run_campaign(base_opts, component_skips(baseline.backend, opts.components))
    properties = opts.properties or default_properties_dir()
    reproducers = write_reproducers(campaign.results, base_opts, properties, Path.cwd())
    path = write_json(campaign.results, reproducers, base_opts, describe(baseline.backend),
                      campaign.stopped_by)
    return json.loads(path.read_text())


def run_with_baseline(opts: FuzzOptions, backend: Any, baseline: Baseline,
                      reused: dict | None = None) -> int:
    """The campaign (or ``reused``, the finished campaign's report in --out:
    :func:`reusable_campaign`), then the baseline (a target run, or its report), then the
    "only mine" section and the campaign's own report; the campaign's exit status."""
    old_report = load_report(opts.compare) if opts.compare else None  # before --force cleans
    if reused is None:
        clean_out(opts.out, resume=opts.resume)
    print(f"refimpl fuzz: {campaign_header(opts, backend)}\nseed: {opts.seed} (both targets)",
          flush=True)
    if reused is not None:
        note = (f"refimpl fuzz: --resume: the finished campaign of {backend.name} in "
                f"{opts.out} ran on this seed and these examples: reused, not run again")
        print(textwrap.fill(note, TABLE_WIDTH, subsequent_indent="  ",
                            break_on_hyphens=False), flush=True)
    with caught_stop_signals():
        campaign = (run_campaign(opts, component_skips(backend, opts.components))
                    if reused is None else CampaignResult(results_of(reused)))
        base = baseline.report
        if base is None and campaign.stopped_by is None:
            base = _run_baseline(opts, baseline)
        section = ""
        if base is not None:
            mine = {r.nodeid: dict(outcome=r.outcome, examples=r.examples, message=r.message,
                                   example=r.example, nodeid=r.nodeid)
                    for r in campaign.results}
            result = split(mine, rows_of(base))
            section = describe_split(result, mine, backend.name, baseline.name)
            print(f"\n{section}", flush=True)
        status = report_campaign(opts, backend, campaign.results, campaign.stopped_by,
                                 old_report)
    if section:
        _record(opts.out, section, result, baseline.name)
    return status


def _record(out: Path, section: str, result: Split, base_name: str) -> None:
    """The section at the top of summary.txt, and ``baseline`` in report.json."""
    summary = out / "summary.txt"
    summary.write_text(f"{section}\n\n{summary.read_text()}")
    report_path = out / "report.json"
    report = json.loads(report_path.read_text())
    report["baseline"] = {"target": base_name, "only_mine": result.only_mine,
                          "both": result.both, "no_verdict": result.no_verdict}
    report_path.write_text(json.dumps(report, indent=2))
