"""refimpl's pytest plugin (entry point ``pytest11``), active wherever refimpl is installed.

It gives a user's suite what refimpl's own suite uses:

- ``--refimpl-target`` (default ``$REFIMPL_TARGET``, else ``refimpl``): the backend under test;
- the ``refimpl_backend`` fixture: that backend, loaded once per session;
- ``--refimpl-precision`` (``float32``, the default, or ``tf32``) and the
  ``refimpl_precision`` fixture: the float32 arithmetic compared runs use on CUDA
  (:mod:`refimpl.expect.precision`);
- ``--refimpl-max-examples N`` (default ``$REFIMPL_MAX_EXAMPLES``): examples per property,
  in place of the Hypothesis profile's own (ci: 15, dev: 25), e.g. 3 for a first look;
- a report header line naming the backend, its version and its components, and the
  Hypothesis profile in force (dev / ci / fuzz, see :mod:`refimpl.fuzz.profiles`);
- ``@pytest.mark.cuda`` tests are skipped, with the reason shown, when no GPU is present;
- ``@pytest.mark.torch_releases("2.13", ...)`` marks a test that pins one torch release's
  behaviour (a finding, a documented difference): it runs where ``torch.__version__`` starts
  with one of the given releases and is skipped, with the reason shown, elsewhere.

The public strategies are importable as ``refimpl.strategies``.
"""

from __future__ import annotations

import os

import pytest
import torch

from refimpl.expect.precision import PRECISIONS, Precision
from refimpl.fuzz.profiles import example_count, load_selected_profile
from refimpl.oracle import describe, load_backend, selected_target


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("refimpl", "refimpl oracle")
    group.addoption("--refimpl-target", default=None,
                    help="backend under test: refimpl, torch or package.module:attribute "
                         "(default: $REFIMPL_TARGET, else refimpl)")
    group.addoption("--refimpl-max-examples", default=None, metavar="N",
                    help="examples per property, in place of the Hypothesis profile's own "
                         "(default: $REFIMPL_MAX_EXAMPLES, else the profile's)")
    group.addoption("--refimpl-precision", default="float32", choices=PRECISIONS,
                    help="float32 arithmetic of compared runs on CUDA: float32 (TF32 off, "
                         "the reference) or tf32 (TF32 on, judged against channels-last "
                         "eager with TF32)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped (visibly) without one")
    config.addinivalue_line(
        "markers", "torch_releases(*releases): pins these torch releases' behaviour; "
        "skipped (visibly) on others")
    option = config.getoption("--refimpl-max-examples")
    try:
        count = (example_count(option, "--refimpl-max-examples") if option is not None else
                 example_count(os.environ.get("REFIMPL_MAX_EXAMPLES"), "REFIMPL_MAX_EXAMPLES"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config._refimpl_profile = load_selected_profile(count)


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


@pytest.fixture(scope="session")
def refimpl_precision(request: pytest.FixtureRequest) -> Precision:
    """The precision compared runs use (--refimpl-precision; refimpl.expect.precision)."""
    return Precision.named(request.config.getoption("--refimpl-precision"))


def release_matches(version: str, releases: tuple[str, ...]) -> bool:
    """Whether torch ``version`` (e.g. "2.14.1+cu130") is one of ``releases`` ("2.14",
    "2.13.0"): a release matches on whole dot-separated components."""
    if not releases:
        raise ValueError("torch_releases needs at least one release, e.g. '2.13'")
    parts = version.split("+")[0].split(".")
    return any(parts[:len(r.split("."))] == r.split(".") for r in releases)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda_skip = pytest.mark.skip(reason="needs a CUDA device; none is present")
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(cuda_skip)
        marker = item.get_closest_marker("torch_releases")
        if marker is not None and not release_matches(torch.__version__, marker.args):
            item.add_marker(pytest.mark.skip(
                reason=f"pins torch {', '.join(marker.args)}'s behaviour; "
                       f"this is torch {torch.__version__}"))
