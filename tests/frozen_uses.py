"""A recording subclass for the equivalence tests of ``frozen=True`` mutants.

A ``frozen`` dataclass differs from a plain one only when something assigns to an instance
after ``__init__``, deletes an attribute, or hashes it. :func:`recording` builds a subclass
that notes each of those, so a test can run the code over such a class and show none happens.
"""

from __future__ import annotations


def recording(cls, calls: list[str]):
    """A subclass of the dataclass ``cls`` that records every use ``frozen`` changes: an
    assignment after ``__init__``, a deletion, a hash."""

    class Recording(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "_built", True)  # assignments before this are __init__'s

        def __setattr__(self, name, value):
            if getattr(self, "_built", False):
                calls.append(f"set {name}")
            super().__setattr__(name, value)

        def __delattr__(self, name):
            calls.append(f"del {name}")
            super().__delattr__(name)

        def __hash__(self):
            calls.append("hash")
            return super().__hash__()

    return Recording
