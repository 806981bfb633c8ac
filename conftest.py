"""Shared pytest set-up: Hypothesis profile, the backend under test, CUDA skips."""

from __future__ import annotations

import pytest
import torch

from refimpl.oracle import describe, load_backend, selected_target
from refimpl.testing.profiles import load_selected_profile

PROFILE = load_selected_profile()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--refimpl-target", default=None,
                     help="backend under test: refimpl, torch or package.module:attribute "
                          "(default: $REFIMPL_TARGET, else refimpl)")


def pytest_report_header(config: pytest.Config) -> list[str]:
    backend = load_backend(selected_target(config.getoption("--refimpl-target")))
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CUDA tests skip)"
    return [f"refimpl target: {describe(backend)}",
            f"hypothesis profile: {PROFILE}; torch {torch.__version__}; CUDA device: {cuda}"]


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
