"""What a backend takes: the kinds of input it declares per method, and the filter that keeps
every other input from reaching it.

A backend may declare, as an attribute, ``accepts = {"fx_graph_cse": ("aten",)}``: for each
method it names, the kinds of input (:data:`INPUT_KINDS`) it takes. A method it does not name
takes every kind. torch's own ``fx_graph_cse`` is an example: in AOTAutograd it only ever sees
make_fx graphs, whose nodes carry ``meta["val"]``, and it reads those values.

The kind of an input is a fact about the input itself (:data:`KIND_OF`), never about how it
was drawn. For ``fx_graph_cse``: ``"aten"`` when every node but the output carries
``meta["val"]`` (a make_fx graph), else ``"torch"`` (a symbolic_trace graph).

The filter (:func:`filtered`): an input of a kind the backend does not take is not an example
for it. The property's example is rejected (``hypothesis.reject``), neither passed nor failed,
and Hypothesis draws another in its place; a property that can only draw kinds the backend
does not take is skipped, with the reason (:func:`skip_unless_takes`).

Invariant: a backend without ``accepts`` sees every input the properties draw; a backend with
it never sees an input of a kind it did not declare.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import hypothesis
import pytest
from torch import fx

#: method -> every kind of input the properties may hand it.
INPUT_KINDS: dict[str, tuple[str, ...]] = {"fx_graph_cse": ("aten", "torch")}

#: kind -> what it is, for reports.
KIND_NAMES: dict[str, str] = {
    "aten": "aten graphs (meta['val'] on every node)",
    "torch": "torch graphs (symbolic_trace: no meta['val'])",
}


class AcceptsError(ValueError):
    """A backend's ``accepts`` attribute that does not say what it takes."""


def graph_kind(graph: fx.Graph) -> str:
    """``"aten"`` if every node of ``graph`` but the output carries ``meta["val"]``, else
    ``"torch"``."""
    recorded = all("val" in node.meta for node in graph.nodes if node.op != "output")
    return "aten" if recorded else "torch"


#: method -> the function that tells the kind of its first argument.
KIND_OF: dict[str, Callable[[Any], str]] = {"fx_graph_cse": graph_kind}


def declared(backend: Any) -> dict[str, tuple[str, ...]]:
    """The backend's ``accepts``, checked: method -> the kinds it takes (only the methods it
    narrows). Raises :class:`AcceptsError` naming what is wrong."""
    accepts = getattr(backend, "accepts", None)
    if accepts is None:
        return {}
    if not isinstance(accepts, dict):
        raise AcceptsError(f"accepts must be a dict of method -> kinds, got "
                           f"{type(accepts).__name__}")
    checked = {}
    for method, kinds in accepts.items():
        if method not in INPUT_KINDS:
            raise AcceptsError(f"accepts names {method!r}; only {', '.join(INPUT_KINDS)} "
                               "can be narrowed")
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        unknown = [k for k in kinds if k not in INPUT_KINDS[method]]
        if unknown or not kinds:
            raise AcceptsError(f"accepts[{method!r}] = {kinds!r}: each kind must be one of "
                               f"{', '.join(INPUT_KINDS[method])}, and at least one given")
        checked[method] = kinds
    return checked


def accepted_kinds(backend: Any, method: str) -> tuple[str, ...] | None:
    """The kinds of input ``backend`` takes for ``method``; None where it takes every one."""
    kinds = declared(backend).get(method)
    return None if kinds is None or set(kinds) == set(INPUT_KINDS[method]) else kinds


def filtered(backend: Any, method: str, call: Callable) -> Callable:
    """``call`` (the backend's ``method``), rejecting the example when its input is of a
    kind the backend does not take (module docstring); ``call`` itself where it takes all."""
    kinds = accepted_kinds(backend, method)
    if kinds is None:
        return call
    kind_of = KIND_OF[method]

    @functools.wraps(call)
    def take(first: Any, *args: Any, **kwargs: Any) -> Any:
        if kind_of(first) not in kinds:
            hypothesis.reject()  # not an example for this backend: another is drawn
        return call(first, *args, **kwargs)

    return take


def skip_unless_takes(backend: Any, method: str, drawn: Iterable[str]) -> None:
    """Skip the property (visibly) when ``backend`` takes none of the kinds it ``drawn``."""
    kinds = accepted_kinds(backend, method)
    drawn = tuple(drawn)
    if kinds is not None and not set(drawn) & set(kinds):
        pytest.skip(f"backend {backend.name!r} takes only {' and '.join(kinds)} input for "
                    f"{method}; this property draws only {' and '.join(drawn)} input")


def accepts_lines(backend: Any) -> list[str]:
    """For a report header: one line per method the backend narrows, saying that inputs of
    other kinds are not drawn for it."""
    lines = []
    for method, kinds in declared(backend).items():
        if accepted_kinds(backend, method) is None:
            continue
        left_out = [k for k in INPUT_KINDS[method] if k not in kinds]
        lines.append(f"takes: {method} only on {' and '.join(KIND_NAMES[k] for k in kinds)};"
                     f" {' and '.join(left_out)} graphs not drawn")
    return lines
