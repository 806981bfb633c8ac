"""Run PyTorch's own tests for refimpl's systems with refimpl swapped in for torch's.

    python scripts/upstream_tests.py DIR [pytest arguments ...]

DIR holds upstream test modules, copied unmodified from a PyTorch checkout at the installed
torch's release tag: test/functorch/test_ac.py, test/functorch/test_memory_efficient_fusion.py,
test/inductor/test_layout_optim.py and test/distributed/_composable/test_checkpoint.py (the
specification refimpl reproduces; their memory figures come from the CUDA allocator, so most
of them need a GPU). The script runs pytest on DIR with this file loaded as a plugin, which,
before any test module is imported, swaps in refimpl for what each module exercises:

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


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).exists():
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print("upstream_tests.py: DIR (the upstream test modules, or one of them) must exist", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return int(pytest.main([argv[0], "-p", "upstream_tests", "-p", "no:cacheprovider",
                            "-p", "no:refimpl", *argv[1:]]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
