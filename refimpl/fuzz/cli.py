"""``refimpl fuzz``: every target property of the chosen components, against the chosen backend.

Exit status, after writing the report of what ran:
  0  every property that could run passed (a component the target lacks is skipped);
  1  a property failed, timed out, or crashed, however the campaign ended (a signal or
     --minutes included: a finding is never lost to another status);
  2  bad arguments or unusable infrastructure (--target that cannot load, --database
     unreachable, --scheduler unreachable or without workers, --engine dask without its
     extra, --out or --junitxml unusable, --timeout beyond the OS timer), one line
     naming the option, before any property runs;
  3  incomplete: time ran out before every property completed a round, or nothing ran;
  128 + N  signal N (SIGINT: 130, SIGTERM: 143) stopped the campaign and nothing failed.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

from refimpl.fuzz.baseline import (
    Baseline,
    load_baseline,
    reusable_campaign,
    run_with_baseline,
)
from refimpl.fuzz.campaign import run_and_report
from refimpl.fuzz.compare import CompareError, check_comparable, load_report, target_name
from refimpl.fuzz.database import DatabaseError, check_database
from refimpl.fuzz.distributed import DaskError, check_scheduler, run_dask
from refimpl.fuzz.hypofuzz import check_installed, run_hypofuzz
from refimpl.fuzz.options import COMPONENTS, DEFAULT_TIMEOUT, ENGINES, FuzzOptions
from refimpl.fuzz.outdir import OutError, check_junitxml, check_out, check_writable_folder
from refimpl.fuzz.profiles import PROFILES
from refimpl.fuzz.suite import component_files, default_properties_dir
from refimpl.oracle import builtin_target_names, load_backend

HELP = "run the target properties against a backend; write reproducers for what fails"


class UsageError(Exception):
    """A bad argument or unusable infrastructure: exit 2 with ``option: message``."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")


def _components(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))  # dedupe
    bad = [c for c in names if c not in COMPONENTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown component(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {','.join(COMPONENTS)}")
    return names


class _AddComponents(argparse.Action):
    """``--component`` given more than once names the union of its subsets, in order
    (argparse's plain store would keep the last one alone, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        so_far = getattr(namespace, self.dest)
        chosen = () if so_far is self.default else so_far
        setattr(namespace, self.dest, tuple(dict.fromkeys((*chosen, *values))))


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
        return value
    return parse


def _folder(text: str) -> Path:
    """A folder argument: an empty string would mean the current folder, silently."""
    if not text.strip():
        raise argparse.ArgumentTypeError("name a folder (an empty name would write into the "
                                         "current folder)")
    return Path(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="refimpl",
                        help=f"{', '.join(builtin_target_names())}, or package.module:attribute "
                             "(default: refimpl)")
    parser.add_argument("--component", type=_components, default=COMPONENTS,
                        action=_AddComponents,
                        help=f"comma-separated subset of {','.join(COMPONENTS)}; given more "
                             "than once, the union (default: all)")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--max-examples", type=_positive(int), default=None,
                       help="examples per property (default: 10)")
    bound.add_argument("--minutes", type=_positive(float), default=None,
                       help="repeat rounds until this much time has passed (the round in "
                            "progress is stopped on time)")
    parser.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT,
                        help="seconds one example may run before it fails as 'timed out' "
                             f"(default: {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--seed", type=int, default=None,
                        help="fix Hypothesis's seed for repeatable rounds (Hypothesis then "
                             "neither reads nor writes the example database)")
    parser.add_argument("--out", type=_folder, default=Path("fuzz-out"),
                        help="folder for report.json, reproducers/ and logs/ (default: fuzz-out)")
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="reuse a non-empty --out, keeping its example database; with "
                            "--baseline, a finished campaign there of this target, seed and "
                            "examples is reused and only the baseline runs")
    again.add_argument("--force", action="store_true",
                       help="replace an earlier campaign's --out, database included")
    parser.add_argument("--compare", type=Path, default=None, metavar="OLD/report.json",
                        help="an earlier campaign's report.json, run with the same --seed and "
                             "--max-examples: list new failures, fixed properties and reach "
                             "changes at the end")
    parser.add_argument("--baseline", default=None, metavar="TARGET|OLD/report.json",
                        help="another target (run after this one on the same seed and "
                             "examples, unshrunk, into --out/baseline) or an earlier "
                             "report.json: show first what only --target fails")
    parser.add_argument("--junitxml", type=Path, default=None,
                        help="also write JUnit XML here (for CI systems)")
    parser.add_argument("--jobs", type=_positive(int), default=1,
                        help="components run side by side in worker processes (default: 1)")
    parser.add_argument("--database", default=None,
                        help="shared example database: a folder or redis://host:port/db")
    parser.add_argument("--profile", choices=PROFILES, default=default_profile(),
                        help="Hypothesis profile the bounds apply to (default: ci where the "
                             "CI variable is set, so a CI run is repeatable; else fuzz)")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop each component at its first failing property")
    parser.add_argument("--no-shrink", dest="shrink", action="store_false",
                        help="report failures unshrunk (faster; larger reproducers)")
    parser.add_argument("--properties", type=Path, default=None,
                        help="the property suite's folder (default: refimpl.properties)")
    parser.add_argument("--engine", choices=ENGINES, default="runner",
                        help="runner (default; bounded runs), hypofuzz (long campaigns on "
                             "many machines; pip install 'refimpl[hypofuzz]', see its licence) "
                             "or dask (one property per task on a Dask cluster; pip install "
                             "'refimpl[dask]')")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="--engine dask: a running Dask scheduler (default: a local "
                             "cluster of --jobs workers on loopback)")


def default_profile() -> str:
    """``ci`` where the ``CI`` variable is set (derandomised, as docs/design.md's profiles say:
    a CI run gives the same verdict every time), else ``fuzz`` (random, database on)."""
    return "ci" if os.environ.get("CI") else "fuzz"


def _options(args: argparse.Namespace) -> FuzzOptions:
    return FuzzOptions(
        target=args.target, components=args.component, seed=args.seed,
        max_examples=None if args.minutes else (args.max_examples or 10), minutes=args.minutes,
        out=args.out, jobs=args.jobs, database=args.database, properties=args.properties,
        profile=args.profile, fail_fast=args.fail_fast, shrink=args.shrink,
        timeout=args.timeout, junitxml=args.junitxml, resume=args.resume, force=args.force,
        compare=args.compare, baseline=args.baseline,
        engine=args.engine, scheduler=args.scheduler)


def preflight(opts: FuzzOptions):
    """Check everything a campaign needs before any property runs; returns the backend.
    Raises :class:`UsageError` naming the option at fault."""

    if opts.engine == "hypofuzz":
        if opts.minutes is None:
            raise UsageError("--minutes", "--engine hypofuzz runs until stopped: give --minutes")
        try:
            check_installed()
        except ImportError as exc:
            raise UsageError("--engine", str(exc)) from None
    if opts.engine == "dask":
        try:
            check_scheduler(opts.scheduler, opts.jobs)
        except DaskError as exc:
            raise UsageError(exc.option, str(exc)) from None
    try:
        component_files(opts.properties or default_properties_dir(), opts.components[0])
    except FileNotFoundError as exc:
        raise UsageError("--properties", str(exc)) from None
    try:
        backend = load_backend(opts.target)
    except Exception as exc:  # any failure to import or construct the target
        raise UsageError("--target", f"{type(exc).__name__}: {exc}") from None
    try:
        check_timer(opts.timeout)
    except (OverflowError, ValueError, OSError) as exc:
        raise UsageError("--timeout", f"{opts.timeout:g} s is more than this system's interval "
                                      f"timer takes ({exc})") from None
    try:
        check_out(opts.out, resume=opts.resume, force=opts.force)
    except OutError as exc:
        raise UsageError("--out", str(exc)) from None
    if opts.compare is not None:
        check_compare(opts, backend)
    if opts.junitxml is not None:
        try:
            check_junitxml(opts.junitxml, opts.out)
        except OutError as exc:
            raise UsageError("--junitxml", str(exc)) from None
        if opts.junitxml.is_dir():
            raise UsageError("--junitxml", f"{opts.junitxml} is a folder; name a file")
        try:
            check_writable_folder(opts.junitxml.parent)
        except OSError as exc:
            raise UsageError("--junitxml", str(exc)) from None
    if opts.database is not None:
        try:
            check_database(opts.database)
        except DatabaseError as exc:
            raise UsageError("--database", str(exc)) from None
    return backend


def check_baseline(opts: FuzzOptions) -> tuple[FuzzOptions, Baseline | None]:
    """--baseline: the options with the seed both targets run on, and the baseline (a loaded
    target or a checked report); UsageError naming --baseline."""
    if opts.baseline is None:
        return opts, None
    if opts.engine != "runner":
        raise UsageError("--baseline", f"runs with --engine runner only, not {opts.engine}")
    try:
        return load_baseline(opts.baseline, opts)
    except Exception as exc:  # a report that is none, or a target that cannot load
        raise UsageError("--baseline", str(exc) if isinstance(exc, CompareError)
                         else f"{type(exc).__name__}: {exc}") from None


def check_reuse(opts: FuzzOptions, backend: Any, seed_given: int | None) -> dict | None:
    """--baseline with --resume: the finished campaign in --out to reuse, or None (run it);
    UsageError naming --resume where it ran otherwise (:func:`reusable_campaign`)."""
    try:
        return reusable_campaign(opts, backend, seed_given)
    except CompareError as exc:
        raise UsageError("--resume", str(exc)) from None


def check_compare(opts: FuzzOptions, backend: Any) -> None:
    """--compare names a whole report of a campaign that drew as this one will: the same
    --seed and bound (UsageError otherwise); a report of another target is said, once."""
    try:
        old = load_report(opts.compare)
        warnings = check_comparable(old, opts.seed, opts.max_examples, opts.minutes,
                                    opts.compare)
    except CompareError as exc:
        raise UsageError("--compare", str(exc)) from None
    if target_name(old) != backend.name:
        warnings.append(f"{opts.compare} is a report of target {target_name(old)!r}, this "
                        f"run is {backend.name!r}: differences may be the targets'")
    for warning in warnings:
        print(f"refimpl fuzz: warning: --compare: {warning}", file=sys.stderr, flush=True)


def check_timer(seconds: float) -> None:
    """Arm and disarm the interval timer the workers bound each example with: an error if
    the OS cannot take ``seconds`` (Python raises OverflowError past its range)."""
    previous = signal.getitimer(signal.ITIMER_REAL)
    handler = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
    finally:
        signal.setitimer(signal.ITIMER_REAL, *previous)
        signal.signal(signal.SIGALRM, handler)


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, os.getcwd())  # a target module in the current folder is found
    try:
        opts = _options(args)
        opts, baseline = check_baseline(opts)
        backend = preflight(opts)
        reused = check_reuse(opts, backend, args.seed)
    except (UsageError, ValueError) as exc:
        print(f"refimpl fuzz: {exc}", file=sys.stderr)
        return 2
    if opts.engine == "hypofuzz":
        return run_hypofuzz(opts, backend)
    if opts.engine == "dask":
        return run_dask(opts, backend)
    if opts.baseline is not None:
        return run_with_baseline(opts, backend, baseline, reused)
    return run_and_report(opts, backend)
