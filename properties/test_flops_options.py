"""Options a FLOP counter cannot mean are refused, with an error naming the option.

``depth`` is a table depth: None or an int >= 0 (a bool is not a depth); ``display`` is
True or False; ``custom_mapping`` is a dict or None, from op packets (``aten.mm``) to
formulas (callables). Anything else is the user's mistake,
and a counter that takes it anyway prints a table that is not what was asked (``depth=-1``:
no module rows; ``display="no"``: printed). Each example draws one option and one value it
cannot take (:data:`BAD`); the counter must refuse it, on construction or, for ``depth``,
when ``get_table(depth=...)`` is asked for, with a ValueError or TypeError whose message
names the option.

Reach: a well-formed counter with the same other options counted a product (> 0).

Against torch (``--refimpl-target torch``, 2.13) this fails: torch's counter takes every
``depth`` and ``display`` value (docs/findings.md, FLOPs 13).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.oracle.blame import TargetError
from refimpl.properties.reach import reach


def _two_flops(*args, **kwargs) -> int:
    """A formula: 2 FLOPs whatever the call."""
    return 2


aten = torch.ops.aten
#: option -> values it cannot take. A custom_mapping key must be an op packet
#: (``aten.mm``), not an overload, a name or a Python function, and its value a formula.
BAD = {
    "depth": [-1, -3, 1.5, "2", True, False],
    "display": ["no", "yes", None, 0, 1],
    "custom_mapping": [["mm"], "mm", 3, {"mm": _two_flops}, {torch.mm: _two_flops},
                       {aten.mm: 3}, {aten.mm.default: _two_flops}],
}
REFUSED = (ValueError, TypeError)


def _refusal(fn) -> BaseException | None:
    """What ``fn`` raised (a constructor's exception as the oracle chains it), or None."""
    try:
        fn()
    except TargetError as exc:
        return exc.__cause__
    except Exception as exc:  # judged by the caller: which type, what message
        return exc
    return None


@given(st.sampled_from(sorted(BAD)).flatmap(
    lambda option: st.tuples(st.just(option), st.sampled_from(BAD[option]))),
    st.booleans())
def test_options_it_cannot_mean_are_refused(refimpl_backend, bad, in_get_table):
    option, value = bad
    make = component(refimpl_backend, "flop_counter")
    with make(display=False) as counter:
        torch.mm(torch.randn(2, 3), torch.randn(3, 4))
    reach(counter.get_total_flops() > 0)
    if option == "depth" and in_get_table:
        refusal = _refusal(lambda: counter.get_table(depth=value))
        where = f"get_table(depth={value!r})"
    else:
        refusal = _refusal(lambda: make(**{"display": False, option: value}))
        where = f"flop_counter({option}={value!r})"
    assert refusal is not None, f"{refimpl_backend.name}: {where} was accepted"
    assert isinstance(refusal, REFUSED) and option in str(refusal), (
        f"{refimpl_backend.name}: {where} raised {refusal!r}, expected a ValueError or "
        f"TypeError naming {option}")
