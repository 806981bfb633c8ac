"""Run PyTorch's own tests for refimpl's systems with refimpl swapped in for torch's.

    python scripts/upstream_tests.py DIR [--implementation refimpl|torch] [--jobs J]
                                         [--xml-dir XDIR] [pytest arguments ...]

DIR holds upstream test modules, unmodified: copied from a PyTorch checkout at the installed
torch's release tag, or extracted from the seed files by :func:`extract_seeds` (each seed file
is one module, a header line naming its upstream path, then the module verbatim in one fenced
block): test/functorch/test_ac.py, test/functorch/test_memory_efficient_fusion.py,
test/test_flop_counter.py, test/inductor/test_layout_optim.py and
test/distributed/_composable/test_checkpoint.py (the specification refimpl reproduces; their
memory figures come from the CUDA allocator, so most of them need a GPU). The script runs
pytest on each module of DIR in a process of its own (``--jobs`` of them side by side), as
PyTorch's CI does (a module may leave global state behind: test_ac.py's ``setUp`` makes CUDA
the default device and never restores it), with this file loaded as a plugin which, before
the module is imported, swaps in refimpl for what it exercises (``--xml-dir``: a JUnit XML
per module there, and beside it ``<module>.reached.json``, how often each swap was reached).
``--implementation torch`` swaps nothing: the same modules on torch's own
implementation, the column refimpl's is compared with.

=============================================  ============================================
torch's                                        refimpl's
=============================================  ============================================
dynamo backend ``aot_eager_decomp_partition``  ``"refimpl"``: refimpl's partitioner (reads
                                               ``torch._functorch.config`` as torch does)
``torch.compile`` with inductor (the default)  ``"refimpl"``: refimpl's layout pass, then
                                               its partitioner (the layout tests)
``functorch.compile.memory_efficient_fusion``  ``refimpl.memory_efficient_fusion``
``torch._functorch.compile_utils.fx_graph_cse``  ``refimpl.fx_graph_cse``
``torch.distributed._composable.checkpoint``   ``refimpl.checkpoint``
``torch.utils.flop_counter.FlopCounterMode``   ``refimpl.FlopCounterMode`` (a subclass that
                                               counts its constructions)
=============================================  ============================================

Invariant: with refimpl swapped in, a test passes only on refimpl's answer. The summary
ends with how often each swap was reached, so a swap no test reached shows as 0, never as
covered. ``torch.compile`` keeps every argument but the backend; an inductor ``mode`` or
``options`` has no meaning for refimpl's backend and makes the call fail (never silently
dropped). Run DIR outside this checkout (pytest would otherwise read this repository's
pytest settings).

One compatibility shim, not a swap: test modules of older releases import ``HAS_CUDA`` from
``torch.testing._internal.inductor_utils``, which newer releases renamed; it is set to
``torch.cuda.is_available()`` where missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

#: dynamo backend names whose graphs refimpl's backend compiles instead.
SWAPPED_BACKENDS = ("aot_eager_decomp_partition", "inductor")
#: every swap, in the order the summary lists them.
SWAPS = (*SWAPPED_BACKENDS, "memory_efficient_fusion", "fx_graph_cse", "checkpoint",
         "FlopCounterMode")
IMPLEMENTATIONS = ("refimpl", "torch")
#: how the parent tells the plugin, in the child process, which implementation runs.
IMPLEMENTATION_VARIABLE = "REFIMPL_UPSTREAM_IMPLEMENTATION"
#: where the plugin writes {swap: times reached} as JSON when the module's run ends.
REACHED_VARIABLE = "REFIMPL_UPSTREAM_REACHED"
#: a seed file: a header line naming the upstream module, then the module in one fenced block.
SEED = re.compile(r"\A# `(?P<path>[^`]+)`\s*\n\s*```[^\n]*\n(?P<code>.*)\n```\s*\Z", re.DOTALL)
REACHED: Counter[str] = Counter()


def _counted(name: str, fn):
    def call(*args, **kwargs):
        REACHED[name] += 1
        return fn(*args, **kwargs)

    call.__wrapped__ = fn
    return call


def _swap_backends() -> None:
    """Registry entries and ``torch.compile``'s inductor default now reach refimpl."""
    from torch._dynamo.backends import registry

    from refimpl.partition.backend import refimpl_backend

    registry.lookup_backend("aot_eager_decomp_partition")  # imports the built-in backends
    registry._COMPILER_FNS["aot_eager_decomp_partition"] = _counted(
        "aot_eager_decomp_partition", refimpl_backend)
    original_compile = torch.compile
    inductor = _counted("inductor", refimpl_backend)

    def compile(model=None, *, backend="inductor", **kwargs):
        if backend == "inductor":
            backend = inductor
        return original_compile(model, backend=backend, **kwargs)

    torch.compile = compile


def _swap_functions() -> None:
    """Module attributes the test modules import by name (bound before they are imported)."""
    import functorch.compile
    import torch._functorch.compile_utils
    import torch.distributed._composable as composable
    import torch.utils.flop_counter

    import refimpl

    functorch.compile.memory_efficient_fusion = _counted(
        "memory_efficient_fusion", refimpl.memory_efficient_fusion)
    torch._functorch.compile_utils.fx_graph_cse = _counted("fx_graph_cse", refimpl.fx_graph_cse)
    checkpoint = _counted("checkpoint", refimpl.checkpoint)
    checkpoint.state = refimpl.checkpoint.state  # the tests read checkpoint.state(module)
    composable.checkpoint = checkpoint
    torch.utils.flop_counter.FlopCounterMode = _counted_counter(refimpl.FlopCounterMode)


def _counted_counter(counter: type) -> type:
    """A subclass of refimpl's counter that counts its constructions (still a class, so an
    ``isinstance`` anywhere keeps working)."""

    class FlopCounterMode(counter):
        __wrapped__ = counter

        def __init__(self, *args, **kwargs):
            REACHED["FlopCounterMode"] += 1
            super().__init__(*args, **kwargs)

    return FlopCounterMode


def _compatibility() -> None:
    from torch.testing._internal import inductor_utils

    if not hasattr(inductor_utils, "HAS_CUDA"):
        inductor_utils.HAS_CUDA = torch.cuda.is_available()


def _implementation() -> str:
    implementation = os.environ.get(IMPLEMENTATION_VARIABLE, "refimpl")
    if implementation not in IMPLEMENTATIONS:
        raise pytest.UsageError(f"{IMPLEMENTATION_VARIABLE}={implementation!r}: expected one "
                                f"of {', '.join(IMPLEMENTATIONS)}")
    return implementation


def pytest_configure(config: pytest.Config) -> None:
    _compatibility()
    if _implementation() == "refimpl":
        _swap_backends()
        _swap_functions()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """What each swap was reached by: a swap no test reached proves nothing."""
    if _implementation() == "torch":
        terminalreporter.section("torch's own implementation: nothing swapped")
        return
    terminalreporter.section("refimpl swapped in")
    for name in SWAPS:
        terminalreporter.write_line(f"{name:<28} reached {REACHED[name]} times")


def pytest_unconfigure(config: pytest.Config) -> None:
    """{swap: times reached} written where the parent asked (nothing swapped: {})."""
    if os.environ.get(REACHED_VARIABLE):
        reached = {name: REACHED[name] for name in SWAPS} if _implementation() == "refimpl" \
            else {}
        Path(os.environ[REACHED_VARIABLE]).write_text(json.dumps(reached) + "\n")


def extract_seeds(seeds: Path, into: Path) -> dict[str, Path]:
    """Each seed file ``NNN_*.txt`` of ``seeds`` written verbatim as its upstream module
    (``test_ac.py`` ...) into ``into``: {seed file name: module path}.

    Invariant: the module's text is the fenced block's, byte for byte (a trailing newline
    added); a seed file not in that layout, or two naming one module, is a ValueError
    naming the file."""
    found: dict[str, Path] = {}
    into.mkdir(parents=True, exist_ok=True)
    for seed in sorted(seeds.glob("[0-9][0-9][0-9]_*.txt")):
        parsed = SEED.match(seed.read_text(encoding="utf-8"))
        if parsed is None:
            raise ValueError(f"{seed}: not a seed file (a header line `path`, then one "
                             f"fenced block)")
        module = into / re.split(r"[\\/]", parsed["path"])[-1]
        if not module.name.startswith("test_") or module in found.values():
            raise ValueError(f"{seed}: names {module.name}, not a new test_*.py module")
        module.write_text(parsed["code"] + "\n", encoding="utf-8")
        found[seed.name] = module
    if not found:
        raise ValueError(f"{seeds}: holds no seed files (NNN_*.txt)")
    return found


def modules(path: Path) -> list[Path]:
    """The test modules at ``path``: the file itself, or a folder's ``test_*.py``."""
    return [path] if path.is_file() else sorted(path.glob("test_*.py"))


def run_module(module: Path, xml_dir: Path | None, pytest_args: list[str],
               implementation: str = "refimpl") -> int:
    """pytest on one module, in a child process with this plugin loaded."""
    env = {**os.environ, IMPLEMENTATION_VARIABLE: implementation, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))}
    if xml_dir is not None:  # beside its JUnit XML: what each swap was reached by
        env[REACHED_VARIABLE] = str(xml_dir / f"{module.stem}.reached.json")
    xml = [f"--junitxml={xml_dir / (module.stem + '.xml')}"] if xml_dir else []
    command = [sys.executable, "-m", "pytest", str(module), "-p", "upstream_tests", "-p",
               "no:cacheprovider", "-p", "no:refimpl", *xml, *pytest_args]
    return subprocess.run(command, env=env, cwd=module.parent).returncode


def _options(rest: list[str]) -> tuple[dict[str, str], list[str]]:
    """This script's own options, each followed by its value, ahead of pytest's."""
    own: dict[str, str] = {}
    while rest[:1] and rest[0] in ("--xml-dir", "--implementation", "--jobs"):
        if len(rest) < 2:
            raise ValueError(f"{rest[0]} needs a value")
        own[rest[0]], rest = rest[1], rest[2:]
    if own.get("--implementation", "refimpl") not in IMPLEMENTATIONS:
        raise ValueError(f"--implementation {own['--implementation']}: expected one of "
                         f"{', '.join(IMPLEMENTATIONS)}")
    if not own.get("--jobs", "1").isdigit() or int(own.get("--jobs", "1")) < 1:
        raise ValueError(f"--jobs {own['--jobs']}: expected a whole number >= 1")
    return own, rest


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).exists() or not modules(Path(argv[0])):
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print("upstream_tests.py: DIR must hold upstream test modules (test_*.py), or be one",
              file=sys.stderr)
        return 2
    if importlib.util.find_spec("expecttest") is None:  # torch.testing._internal needs it
        print("upstream_tests.py: PyTorch's test modules need expecttest: "
              "pip install expecttest (refimpl's test extra has it)", file=sys.stderr)
        return 2
    try:
        own, rest = _options(argv[1:])
    except ValueError as error:
        print(f"upstream_tests.py: {error}", file=sys.stderr)
        return 2
    xml_dir = Path(own["--xml-dir"]).resolve() if "--xml-dir" in own else None
    if xml_dir is not None:
        xml_dir.mkdir(parents=True, exist_ok=True)
    implementation = own.get("--implementation", "refimpl")
    found = [m.resolve() for m in modules(Path(argv[0]))]
    with ThreadPoolExecutor(int(own.get("--jobs", "1"))) as pool:
        done = pool.map(lambda m: run_module(m, xml_dir, rest, implementation), found)
        statuses = dict(zip((m.name for m in found), done, strict=True))
    print("\n".join(f"{name}: pytest exit {status}" for name, status in statuses.items()))
    return 0 if all(status == 0 for status in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
