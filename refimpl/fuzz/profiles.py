"""The Hypothesis profiles, registered once, here.

``dev``   the default on a workstation: a few dozen examples, the local example database.
``ci``    derandomised and bounded, no database; Hypothesis itself loads a profile named "ci"
          when the ``CI`` environment variable is set, so CI runs are repeatable.
``fuzz``  many examples, no deadline, the database on: for long property-fuzzing campaigns.
          ``REFIMPL_FUZZ_DATABASE`` (a folder or ``redis://host:port/db``) names its example
          database, so that workers on several machines (HypoFuzz's, pytest's) share one.

Choose one with ``HYPOTHESIS_PROFILE=name``; otherwise ``ci`` under CI and ``dev`` elsewhere.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from refimpl.fuzz.database import make_database

PROFILES = ("dev", "ci", "fuzz")

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]


def register_profiles() -> None:
    """Register dev/ci/fuzz with Hypothesis (idempotent).

    Each derives from Hypothesis's own ``default`` profile, not from the one loaded now: with
    ``CI`` set Hypothesis loads its built-in ``ci`` profile at import, and a profile derived
    from that would inherit ``derandomize=True`` (a "fuzz" campaign that never varies)."""
    base = settings.get_profile("default")
    settings.register_profile("dev", parent=base, max_examples=25, deadline=None,
                              suppress_health_check=_SLOW_OK)
    settings.register_profile("ci", parent=base, max_examples=15, deadline=None, derandomize=True,
                              database=None, print_blob=True,
                              suppress_health_check=_SLOW_OK)
    database = os.environ.get("REFIMPL_FUZZ_DATABASE")
    shared = {}
    if database:
        shared["database"] = make_database(database)
    settings.register_profile("fuzz", parent=base, max_examples=2000, deadline=None,
                              suppress_health_check=_SLOW_OK, **shared)


def selected_profile() -> str:
    """The profile named by HYPOTHESIS_PROFILE, else ``ci`` under CI, else ``dev``."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r} is not one of {', '.join(PROFILES)}")
    return name


def load_selected_profile() -> str:
    """Register the profiles and load the selected one; returns its name."""
    register_profiles()
    name = selected_profile()
    settings.load_profile(name)
    return name
