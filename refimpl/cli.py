"""The ``refimpl`` command line: one subcommand per job, each in its component's module.

Each subcommand module provides ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status: 0 success, 1 a failed check, 2 bad arguments).
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


def torch_version() -> str:
    """The installed torch's version, read from its metadata (importing torch is slow)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="refimpl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version",
                        version=f"refimpl {refimpl.__version__} (torch {torch_version()})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # component not built yet: its command is simply not offered
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args._run(args)


if __name__ == "__main__":
    sys.exit(main())
