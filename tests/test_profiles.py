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


COUNTING = '''
from hypothesis import given, strategies as st


@given(x=st.integers())
def test_counts(refimpl_backend, x):
    with open("calls.txt", "a") as f:
        f.write("x\\n")
'''


def _pytest(tmp_path, *args, env_extra=None):
    (tmp_path / "test_counting.py").write_text(COUNTING)
    (tmp_path / "calls.txt").unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "REFIMPL_MAX_EXAMPLES"}
    env.update(CI="true", HYPOTHESIS_PROFILE="ci", **(env_extra or {}))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-o", "addopts=", "test_counting.py", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    calls = tmp_path / "calls.txt"
    return done, len(calls.read_text().splitlines()) if calls.exists() else 0


@pytest.mark.parametrize(("args", "env", "expected"), [
    ((), None, 15),  # the ci profile's own
    (("--refimpl-max-examples", "3"), None, 3),
    ((), {"REFIMPL_MAX_EXAMPLES": "4"}, 4),
    (("--refimpl-max-examples", "2"), {"REFIMPL_MAX_EXAMPLES": "4"}, 2),  # the option first
])
def test_the_pytest_route_takes_an_example_count(tmp_path, args, env, expected):
    done, calls = _pytest(tmp_path, *args, env_extra=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == expected, done.stdout
    if expected != 15:
        assert f"hypothesis profile: ci-{expected}" in done.stdout


@pytest.mark.parametrize("value", ["0", "three"])
def test_a_bad_example_count_is_a_usage_error_naming_it(tmp_path, value):
    done, calls = _pytest(tmp_path, "--refimpl-max-examples", value)
    assert done.returncode == 4 and calls == 0, done.stdout + done.stderr
    assert f"--refimpl-max-examples={value!r}" in done.stderr
