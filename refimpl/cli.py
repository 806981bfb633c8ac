"""The ``refimpl`` command line: one subcommand per job, each in its component's module.

Each subcommand module provides ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status: 0 success, 1 a failed check, 2 bad arguments).
Only the subcommand being run is imported (they import torch, about 2 s): ``refimpl --help``
and ``refimpl --version`` read the one-line summaries below and import no component.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys

import refimpl

#: subcommand -> module that implements it.
COMMANDS: dict[str, str] = {
    "flops": "refimpl.flops.cli",
    "pareto": "refimpl.pareto",
    "fuzz": "refimpl.fuzz.cli",
}
#: subcommand -> its module's HELP, for ``refimpl --help`` without importing the module
#: (tests/test_cli_help.py checks that each is the module's own).
SUMMARIES: dict[str, str] = {
    "flops": "print a model's FLOPs, MACs and parameters per module and per op (forward by "
             "default)",
    "pareto": "memory vs recompute over budgets 0..1: optimum, torch's plan, knapsack (PNG, "
              "CSV, JSON)",
    "fuzz": "run the target properties against a backend; write reproducers for what fails",
}


def torch_version() -> str:
    """The installed torch's version, read from its metadata (importing torch is slow)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors in one line (``refimpl flops: error: argument --depth:
    invalid int value: 'x'``) and exit 2, as every other usage error of refimpl's; the
    usage it would print first is one ``--help`` away."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word that is not an option (the top level
    takes only --help and --version), if that word names a subcommand."""
    words = [word for word in argv if not word.startswith("-")]
    return words[0] if words and words[0] in COMMANDS else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; the arguments only of the subcommand ``argv`` chooses (all when argv is
    None), so that no other subcommand's module is imported."""
    parser = OneLineParser(prog="refimpl", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--version", action="version",
                        version=f"refimpl {refimpl.__version__} (torch {torch_version()})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    loaded = COMMANDS if argv is None else [chosen_command(argv)]
    for name, module_name in COMMANDS.items():
        command = sub.add_parser(name, help=SUMMARIES[name], description=SUMMARIES[name])
        if name in loaded:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return args._run(args)


if __name__ == "__main__":
    sys.exit(main())
