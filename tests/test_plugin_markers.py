"""The plugin's torch_releases marker: which versions a pinned release matches."""

import pytest

from refimpl.fuzz.pytest_plugin import release_matches


@pytest.mark.parametrize(("version", "releases", "expected"), [
    ("2.13.0+cpu", ("2.13",), True),
    ("2.14.1+cu130", ("2.13",), False),
    ("2.14.1+cu130", ("2.13", "2.14"), True),
    ("2.14.1", ("2.14.0",), False),
    ("2.1.0", ("2.13",), False),  # whole components: 2.1 is not 2.13
    ("2.13.0", ("2",), True),
])
def test_release_matches(version, releases, expected):
    assert release_matches(version, releases) is expected


def test_no_release_is_an_error():
    with pytest.raises(ValueError, match="at least one release"):
        release_matches("2.13.0", ())

