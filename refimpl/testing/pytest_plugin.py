"""refimpl's pytest plugin (entry point ``pytest11``), active wherever refimpl is installed.

It gives a user's suite what refimpl's own suite uses:

- ``--refimpl-target`` (default ``$REFIMPL_TARGET``, else ``refimpl``): the backend under test;
- the ``refimpl_backend`` fixture: that backend, loaded once per session;
- a report header line naming the backend, its version and its components, and the
  Hypothesis profile in force (dev / ci / fuzz, see :mod:`refimpl.testing.profiles`);
- ``@pytest.mark.cuda`` tests are skipped, with the reason shown, when no GPU is present.

The public strategies are importable as ``refimpl.strategies``.
"""

from __future__ import annotations

import pytest
import torch

from refimpl.oracle import describe, load_backend, selected_target
from refimpl.testing.profiles import load_selected_profile


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("refimpl", "refimpl oracle")
    group.addoption("--refimpl-target", default=None,
                    help="backend under test: refimpl, torch or package.module:attribute "
                         "(default: $REFIMPL_TARGET, else refimpl)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped (visibly) without one")
    config._refimpl_profile = load_selected_profile()


def pytest_report_header(config: pytest.Config) -> list[str]:
    backend = load_backend(selected_target(config.getoption("--refimpl-target")))
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CUDA tests skip)"
    return [f"refimpl target: {describe(backend)}",
            f"hypothesis profile: {config._refimpl_profile}; torch {torch.__version__}; "
            f"CUDA device: {cuda}"]


@pytest.fixture(scope="session")
def refimpl_backend(request: pytest.FixtureRequest):
    """The backend under test (--refimpl-target / REFIMPL_TARGET / refimpl)."""
    return load_backend(selected_target(request.config.getoption("--refimpl-target")))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is present")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
