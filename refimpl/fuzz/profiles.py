"""The Hypothesis profiles, registered once, here.

``dev``   the default on a workstation: a few dozen examples, the local example database.
``ci``    derandomised and bounded, no database; Hypothesis itself loads a profile named "ci"
          when the ``CI`` environment variable is set, so CI runs are repeatable.
``fuzz``  many examples, no deadline, the database on: for long property-fuzzing campaigns.
          ``REFIMPL_FUZZ_DATABASE`` (a folder or ``redis://host:port/db``) names its example
          database, so that workers on several machines (HypoFuzz's, pytest's) share one.

Choose one with ``HYPOTHESIS_PROFILE=name``; otherwise ``ci`` under CI and ``dev`` elsewhere.
An example count (``--refimpl-max-examples N`` or ``REFIMPL_MAX_EXAMPLES=N``, the option
first) replaces the profile's own: the loaded profile is then ``<name>-N``, the chosen one
with only ``max_examples`` changed.
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


def example_count(text: str | None, source: str) -> int | None:
    """``text`` (from ``source``: the option or the variable) as an example count; None for
    none given; ValueError naming ``source`` for anything but a whole number >= 1."""
    if text is None or text == "":
        return None
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{source}={text!r}: expected a whole number of examples") from None
    if count < 1:
        raise ValueError(f"{source}={text!r}: must be at least 1")
    return count


def load_selected_profile(max_examples: int | None = None) -> str:
    """Register the profiles and load the selected one, with ``max_examples`` in place of
    its own where given (as the profile ``<name>-<max_examples>``); returns its name."""
    register_profiles()
    name = selected_profile()
    if max_examples is not None:
        parent, name = name, f"{name}-{max_examples}"
        settings.register_profile(name, parent=settings.get_profile(parent),
                                  max_examples=max_examples)
    settings.load_profile(name)
    return name
