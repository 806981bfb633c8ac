"""Run PyTorch's own tests for refimpl's systems with refimpl swapped in for torch's.

    python scripts/upstream_tests.py DIR [--xml-dir XDIR] [pytest arguments ...]

DIR holds upstream test modules, copied unmodified from a PyTorch checkout at the installed
torch's release tag: test/functorch/test_ac.py, test/functorch/test_memory_efficient_fusion.py,
test/inductor/test_layout_optim.py and test/distributed/_composable/test_checkpoint.py (the
specification refimpl reproduces; their memory figures come from the CUDA allocator, so most
of them need a GPU). The script runs pytest on each module of DIR in a process of its own, as
PyTorch's CI does (a module may leave global state behind: test_ac.py's ``setUp`` makes CUDA
the default device and never restores it), with this file loaded as a plugin which, before
the module is imported, swaps in refimpl for what it exercises (``--xml-dir``: a JUnit XML
per module there):

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
=============================================  ============================================

Invariant: a test passes only on refimpl's answer. The summary ends with how often each swap
was reached, so a swap no test reached shows as 0, never as covered. ``torch.compile`` keeps
every argument but the backend; an inductor ``mode`` or ``options`` has no meaning for
refimpl's backend and makes the call fail (never silently dropped). Run DIR outside this
checkout (pytest would otherwise read this repository's pytest settings).

One compatibility shim, not a swap: test modules of older releases import ``HAS_CUDA`` from
``torch.testing._internal.inductor_utils``, which newer releases renamed; it is set to
``torch.cuda.is_available()`` where missing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

#: dynamo backend names whose graphs refimpl's backend compiles instead.
SWAPPED_BACKENDS = ("aot_eager_decomp_partition", "inductor")
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

    import refimpl

    functorch.compile.memory_efficient_fusion = _counted(
        "memory_efficient_fusion", refimpl.memory_efficient_fusion)
    torch._functorch.compile_utils.fx_graph_cse = _counted("fx_graph_cse", refimpl.fx_graph_cse)
    checkpoint = _counted("checkpoint", refimpl.checkpoint)
    checkpoint.state = refimpl.checkpoint.state  # the tests read checkpoint.state(module)
    composable.checkpoint = checkpoint


def _compatibility() -> None:
    from torch.testing._internal import inductor_utils

    if not hasattr(inductor_utils, "HAS_CUDA"):
        inductor_utils.HAS_CUDA = torch.cuda.is_available()


def pytest_configure(config: pytest.Config) -> None:
    _compatibility()
    _swap_backends()
    _swap_functions()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """What each swap was reached by: a swap no test reached proves nothing."""
    names = [*SWAPPED_BACKENDS, "memory_efficient_fusion", "fx_graph_cse", "checkpoint"]
    terminalreporter.section("refimpl swapped in")
    for name in names:
        terminalreporter.write_line(f"{name:<28} reached {REACHED[name]} times")


def modules(path: Path) -> list[Path]:
    """The test modules at ``path``: the file itself, or a folder's ``test_*.py``."""
    return [path] if path.is_file() else sorted(path.glob("test_*.py"))


def run_module(module: Path, xml_dir: Path | None, pytest_args: list[str]) -> int:
    """pytest on one module, in a child process with this plugin loaded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))}
    xml = [f"--junitxml={xml_dir / (module.stem + '.xml')}"] if xml_dir else []
    command = [sys.executable, "-m", "pytest", str(module), "-p", "upstream_tests", "-p",
               "no:cacheprovider", "-p", "no:refimpl", *xml, *pytest_args]
    return subprocess.run(command, env=env, cwd=module.parent).returncode


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
    rest = argv[1:]
    xml_dir = None
    if rest[:1] == ["--xml-dir"] and len(rest) > 1:
        xml_dir, rest = Path(rest[1]).resolve(), rest[2:]
        xml_dir.mkdir(parents=True, exist_ok=True)
    statuses = {m.name: run_module(m.resolve(), xml_dir, rest) for m in modules(Path(argv[0]))}
    print("\n".join(f"{name}: pytest exit {status}" for name, status in statuses.items()))
    return 0 if all(status == 0 for status in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
