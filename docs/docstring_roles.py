"""MkDocs hook: the Sphinx roles refimpl's docstrings use, shown as Sphinx shows them.

refimpl's docstrings name other objects with Sphinx's roles (``:func:`name```,
``:class:`~pkg.mod.Name```, ``:mod:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``), which read
well in the source and in ``help()``. mkdocstrings renders the backticked name as code but
leaves the role's prefix as text (":func:" before it). This hook removes the prefix from each
rendered page and, for a name written with Sphinx's ``~``, keeps its last component only, as
Sphinx would.

Invariant: every ``:role:<code>X</code>`` on a page becomes ``<code>X'</code>``, X' being X,
or X's last dotted component when X starts with ``~``; nothing else on the page changes.
"""

from __future__ import annotations

import re

ROLES = ("func", "class", "mod", "meth", "attr", "data", "exc", "obj")
_ROLE = re.compile(":(?:" + "|".join(ROLES) + r"):<code>(~?)([^<]*)</code>")


def shown_as_sphinx(html: str) -> str:
    """``html`` with every role prefix removed (module docstring's invariant)."""

    def code(match: re.Match[str]) -> str:
        tilde, name = match.groups()
        return f"<code>{name.rsplit('.', 1)[-1] if tilde else name}</code>"

    return _ROLE.sub(code, html)


def on_page_content(html: str, **_) -> str:
    """MkDocs calls this with each page's rendered body."""
    return shown_as_sphinx(html)
