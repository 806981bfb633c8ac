"""``refimpl fuzz``: every property of the chosen components, against the chosen backend."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from refimpl.fuzz.options import COMPONENTS, FuzzOptions
from refimpl.testing.profiles import PROFILES

HELP = "run the property suite against a backend; write reproducers for what fails"


def _components(text: str) -> tuple[str, ...]:
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [c for c in names if c not in COMPONENTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown component(s) {', '.join(bad) or '(none)'}; "
                                         f"choose from {','.join(COMPONENTS)}")
    return names


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="refimpl",
                        help="refimpl, torch, or package.module:attribute (default: refimpl)")
    parser.add_argument("--component", type=_components, default=COMPONENTS,
                        help=f"comma-separated subset of {','.join(COMPONENTS)} (default: all)")
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--max-examples", type=_positive(int), default=None,
                       help="examples per property (default: 10)")
    bound.add_argument("--minutes", type=_positive(float), default=None,
                       help="repeat rounds with fresh seeds until this much time has passed")
    parser.add_argument("--seed", type=int, default=None,
                        help="fix Hypothesis's seed for repeatable rounds (Hypothesis then "
                             "neither reads nor writes the example database)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"),
                        help="folder for report.json, reproducers/ and logs (default: fuzz-out)")
    parser.add_argument("--jobs", type=_positive(int), default=1,
                        help="components run side by side in worker processes (default: 1)")
    parser.add_argument("--database", default=None,
                        help="shared example database: a folder or redis://host:port/db")
    parser.add_argument("--profile", choices=PROFILES, default="fuzz",
                        help="Hypothesis profile the bounds apply to (default: fuzz)")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop each component at its first failing property")
    parser.add_argument("--no-shrink", dest="shrink", action="store_false",
                        help="report failures unshrunk (faster; larger reproducers)")
    parser.add_argument("--properties", type=Path, default=None,
                        help="the property suite's folder (default: properties/ of the source)")


def run(args: argparse.Namespace) -> int:
    from refimpl.fuzz.report import summary_table, write_json, write_reproducers
    from refimpl.fuzz.runner import run_campaign
    from refimpl.fuzz.suite import default_properties_dir
    from refimpl.oracle import BackendError, describe, load_backend

    max_examples = args.max_examples if args.minutes is None else None
    opts = FuzzOptions(target=args.target, components=args.component, seed=args.seed,
                       max_examples=max_examples or (None if args.minutes else 10),
                       minutes=args.minutes, out=args.out, jobs=args.jobs,
                       database=args.database, properties=args.properties,
                       profile=args.profile, fail_fast=args.fail_fast, shrink=args.shrink)
    try:
        header = describe(load_backend(opts.target))
    except BackendError as exc:
        print(f"refimpl fuzz: --target: {exc}", file=sys.stderr)
        return 2
    print(f"refimpl fuzz: target {header}", flush=True)
    try:
        results = run_campaign(opts)
    except FileNotFoundError as exc:
        print(f"refimpl fuzz: --properties: {exc}", file=sys.stderr)
        return 2
    properties = opts.properties or default_properties_dir()
    reproducers = write_reproducers(results, opts, properties)
    report = write_json(results, reproducers, opts, header)
    print(f"\ntarget: {header}\n{summary_table(results)}\n\nreport: {report}")
    for nodeid, path in reproducers.items():
        print(f"reproducer for {nodeid}: python {path}")
    return 1 if any(r.outcome == "failed" for r in results) else 0
