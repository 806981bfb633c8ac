"""A failing example, kept so that its reproducer can rebuild exactly that example.

The worker (:mod:`refimpl.fuzz.events`) keeps, at every failing call, a record of how the
example can be rebuilt, so after shrinking the record is the minimal example's (Hypothesis
replays the minimal failing example last). One record per property under ``<out>/examples/``:

- ``<key>.json``: the route (:data:`ROUTES`) and Hypothesis's record of the example's
  choices (the ``@reproduce_failure`` version and blob, where Hypothesis gave one);
- ``<key>.pt``: the arguments themselves, pickled with ``torch.save``, for the "arguments"
  route only.

The routes, in order of preference:

``call``       the printed call (``name(a=..., b=...)``, Hypothesis's pretty printer)
               evaluates back to the same arguments (:func:`rebuilds_exactly`): the
               reproducer is code only, a file that can be pasted into a bug report;
``arguments``  it does not (a tensor whose repr is cut with ``...``, a module whose weights no
               repr holds), but the arguments pickle: the reproducer reads ``<key>.pt``;
``choices``    neither (``st.data()`` draws, a lambda): the reproducer replays Hypothesis's
               choice sequence through the property's own strategies (same Hypothesis
               release, same property suite);
``none``       nothing rebuilds it (an example that timed out inside ``st.data()`` draws).

No route depends on the example database or on pytest's node ids.

The printed call is also read back here (:func:`build_kwargs`): the worker checks a call
against its arguments the way a reproducer rebuilds them.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from hypothesis.vendor.pretty import pretty
from torch import nn

import refimpl.expect.precision
import refimpl.strategies

#: how a reproducer rebuilds its example (module docstring), best first
ROUTES = ("call", "arguments", "choices", "none")
#: the fixtures a replay supplies itself (a printed example shows them as ``<... object>``)
REPLAY_FIXTURES = ("refimpl_backend",)
_OPAQUE = re.compile(r"^(\s*)(\w+)=<[^\n]*object at 0x[0-9a-f]+>,?$", re.MULTILINE)
_ARGUMENT = re.compile(r"^    (?P<name>\w+)=(?P<value>.*?),?\n(?=    \w+=|\S|\Z)",
                       re.MULTILINE | re.DOTALL)
_DECORATOR = re.compile(r"@reproduce_failure\((?P<args>.*)\)", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class KeptExample:
    """How one failing example is rebuilt: its route, and Hypothesis's choices if known."""

    route: str
    hypothesis: str | None = None  # the Hypothesis release the blob is for
    blob: str | None = None  # base64, as ``@reproduce_failure`` takes it

    @property
    def choices(self) -> tuple[str, str] | None:
        """``(hypothesis release, blob)`` for ``@reproduce_failure``, or None."""
        return (self.hypothesis, self.blob) if self.blob else None


# --- the printed call ---------------------------------------------------------------------
def describe_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(\\n    a=...,\\n)``: the call as Hypothesis prints a falsifying example."""
    body = "".join(f"    {k}={_pretty(v)},\n" for k, v in arguments.items())
    return f"{name}(\n{body})"


def _pretty(value: Any) -> str:
    try:
        return pretty(value).replace("\n", "\n    ")
    except Exception as exc:  # a broken __repr__ must not end the example
        return f"<unprintable {type(value).__name__}: {exc!r}>"


class _Names(dict):
    """A lookup namespace: module globals first, then strategies, the plugin's fixture values
    (``Precision``, printed as ``refimpl_precision=Precision(tf32=False)``), torch, math."""

    def __init__(self, module: ModuleType) -> None:
        super().__init__(vars(module))

    def __missing__(self, name: str):
        for source in (refimpl.strategies, refimpl.expect.precision, torch, math):
            try:
                return getattr(source, name)
            except AttributeError:
                continue
        raise KeyError(name)  # lets eval go on to the builtins


def _call_body(call: str, fixtures: dict) -> str:
    """The keyword arguments of ``name(a=..., b=...)`` as source, each fixture printed as
    ``<... object at 0x...>`` replaced by the name of its value in the namespace. The call
    ends at its first line that is only ``)`` (Hypothesis prints ``st.data()`` draws after
    it), or at its last ``)`` where it is one line."""
    start = call.index("(") + 1
    end = call.find("\n)", start)
    body = call[start: end if end >= 0 else call.rindex(")")]
    return _OPAQUE.sub(lambda m: f"{m.group(1)}{m.group(2)}=__fixture_{m.group(2)},", body)


def _argument_sources(body: str) -> dict[str, str]:
    """``name -> source`` of each keyword argument of a call's body: by Python's parser,
    else (a value that is not code, as ``<Foo at 0x...>``) by the printed layout, one
    argument per line at four spaces' indent, its continuation lines indented further."""
    try:
        keywords = ast.parse(f"dict({body})", mode="eval").body.keywords
    except SyntaxError:
        return {m["name"]: m["value"] for m in _ARGUMENT.finditer(body + "\n")}
    return {k.arg: ast.unparse(k.value) for k in keywords}


def _namespace(module: ModuleType, fixtures: dict) -> _Names:
    names = _Names(module)
    names.update({f"__fixture_{k}": v for k, v in fixtures.items()})
    return names


def build_kwargs(call: str, module: ModuleType, fixtures: dict) -> dict:
    """The keyword arguments of a printed call ``name(a=..., b=...)``, evaluated in the
    property's namespace (:class:`_Names`), ``fixtures`` standing in for their printed form."""
    return eval(f"dict({_call_body(call, fixtures)})", {}, _namespace(module, fixtures))


def build_some_kwargs(call: str, module: ModuleType, fixtures: dict,
                      names: list[str]) -> dict:
    """Only the arguments ``names`` of a printed call (the others need not be valid Python:
    ``data=data(...)``); a name the call lacks, or whose value does not evaluate, raises."""
    sources = _argument_sources(_call_body(call, fixtures))
    namespace = _namespace(module, fixtures)
    return {name: eval(sources[name], {}, namespace) for name in names}


# --- exactness ----------------------------------------------------------------------------
def same_value(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same example value, strictly: same type, tensors equal in dtype,
    shape, strides and every element (NaN included), floats equal bit for bit in sign (0.0 is
    not -0.0), containers and dataclasses field by field. A module is never the same (its
    weights are not in its repr); an object without ``__eq__`` of its own only as itself."""
    if type(a) is not type(b) or isinstance(a, nn.Module):
        return False
    if isinstance(a, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
                and a.device == b.device and bool(torch.equal(a.isnan(), b.isnan()))
                and bool(torch.equal(a.nan_to_num(), b.nan_to_num())))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same_value(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    return bool(a == b)


def rebuilds_exactly(call: str, arguments: dict[str, Any], module: ModuleType) -> bool:
    """The printed ``call`` evaluated in the property's namespace (the reproducer's way,
    :func:`build_kwargs`) gives back ``arguments`` (:func:`same_value`); the fixtures a
    replay supplies itself (the backend) stand in for their printed form."""
    fixtures = {name: arguments[name] for name in REPLAY_FIXTURES if name in arguments}
    try:
        rebuilt = build_kwargs(call, module, fixtures)
    except Exception:  # not valid Python (a cut tensor repr), or a name no namespace holds
        return False
    return same_value(rebuilt, arguments)


# --- Hypothesis's choices -----------------------------------------------------------------
def observed_choices(observation: Any) -> tuple[str, str] | None:
    """``(hypothesis release, blob)`` of a failing test case, from its observation's
    ``@reproduce_failure(...)`` line (Hypothesis's observability metadata); None where the
    observation carries none."""
    metadata = getattr(observation, "metadata", None)
    line = getattr(metadata, "reproduction_decorator", None)
    found = _DECORATOR.fullmatch(line.strip()) if isinstance(line, str) else None
    if found is None:
        return None
    version, blob = ast.literal_eval(f"({found['args']},)")[:2]
    return version, blob.decode("ascii") if isinstance(blob, bytes) else blob


# --- the files ----------------------------------------------------------------------------
def _key(nodeid: str) -> str:
    return hashlib.sha1(nodeid.encode()).hexdigest()[:16]


def examples_file(folder: Path, nodeid: str) -> Path:
    """Where the pickled failing arguments of ``nodeid`` are kept (a stable, file-safe name)."""
    return folder / f"{_key(nodeid)}.pt"


def record_file(folder: Path, nodeid: str) -> Path:
    """Where the record (:class:`KeptExample`) of ``nodeid``'s failing example is kept."""
    return folder / f"{_key(nodeid)}.json"


def keep_arguments(folder: Path, nodeid: str, arguments: dict[str, Any], call: str,
                   module: ModuleType | None, observation: Any = None) -> KeptExample:
    """Record how the reproducer will rebuild this failing example (the first route of
    :data:`ROUTES` that works; a stale pickle of an earlier failing call is removed), with
    the choices of ``observation`` (Hypothesis's test case) where it has them."""
    choices = observed_choices(observation) if observation is not None else None
    examples_file(folder, nodeid).unlink(missing_ok=True)
    if module is not None and rebuilds_exactly(call, arguments, module):
        route = "call"
    elif save_arguments(folder, nodeid, arguments) is not None:
        route = "arguments"
    else:
        route = "choices" if choices else "none"
    kept = KeptExample(route, *(choices or (None, None)))
    folder.mkdir(parents=True, exist_ok=True)
    record_file(folder, nodeid).write_text(json.dumps(dataclasses.asdict(kept)))
    return kept


def kept_example(folder: Path, nodeid: str) -> KeptExample | None:
    """The record :func:`keep_arguments` wrote for ``nodeid``; None where there is none."""
    try:
        return KeptExample(**json.loads(record_file(folder, nodeid).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def save_arguments(folder: Path, nodeid: str, arguments: dict[str, Any]) -> Path | None:
    """Pickle ``arguments``; None (and no file) when they cannot be pickled."""
    path = examples_file(folder, nodeid)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(arguments, path)
    except Exception:
        path.unlink(missing_ok=True)
        return None
    return path


def load_arguments(path: Path) -> dict[str, Any]:
    """The arguments :func:`save_arguments` wrote (a trusted file of this campaign's)."""
    return torch.load(path, weights_only=False)
