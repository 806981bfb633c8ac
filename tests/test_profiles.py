"""The Hypothesis profiles: what each one sets, whatever profile Hypothesis loaded first."""

import os
import subprocess
import sys

import pytest

PROBE = ("from refimpl.fuzz.profiles import load_selected_profile;"
         "from hypothesis import settings;"
         "print(load_selected_profile(), settings.default.derandomize,"
         " settings.default.database is None)")


@pytest.mark.parametrize(("profile", "expected"), [
    ("fuzz", "fuzz False False"),  # random, with a database: a campaign that varies
    ("dev", "dev False False"),
    ("ci", "ci True True"),  # repeatable, no database
])
def test_profile_settings_under_ci(profile, expected):
    """With CI set, Hypothesis loads its own ``ci`` profile at import; refimpl's profiles
    must not inherit from it (a fuzz campaign under CI was derandomized, and HypoFuzz then
    refused every test)."""
    env = dict(os.environ, CI="true", HYPOTHESIS_PROFILE=profile)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == expected


@pytest.mark.parametrize(("ci", "expected"), [("true", "ci"), ("", "fuzz")])
def test_fuzz_default_profile_follows_ci(monkeypatch, ci, expected):
    """`refimpl fuzz` in CI is derandomised (repeatable verdicts); a campaign elsewhere is
    random."""
    from refimpl.fuzz.cli import default_profile

    monkeypatch.setenv("CI", ci)
    assert default_profile() == expected
