"""The backend reads every op of torch's registry as its schema, tags and name say.

Each example draws ops of every group of ``refimpl.strategies.cse_registry`` (tagged random,
writing an argument, returning nothing, the ``empty`` family, views, attention kernels with
a drawn ``dropout_p``, the rest of the aten overloads; torch functions, Tensor methods and
``inplace=`` functions named like an aten op), calls each twice between two reads of each
tensor it takes, and compares the backend's graph with the one built by hand
(``refimpl.expect.cse_merges.expected_listing``, with versions): the second call is removed
exactly when the op is pure, and a read after the calls is merged with the read before
exactly when neither call writes that tensor (``Tensor(a!)`` in the schema, positional or
``out=`` by keyword; a trailing ``_`` or ``inplace=True`` for a torch function). So a
misread schema, tag, argument position or name shows in the graph, for whichever op of
about two thousand it concerns.

These graphs carry no recorded values (nothing runs): a backend that takes only make_fx
graphs (torch's) is not given them, and the property is skipped for it, saying so.

An explicit example holds ``empty_quantized`` (aten and torch) and
``_empty_affine_quantized``: uninitialized memory, never one value with another call.

Reach: every graph holds two equal calls.
"""

from __future__ import annotations

from hypothesis import example, given

from refimpl.expect.cse_merges import expected_listing, listing
from refimpl.oracle import component
from refimpl.oracle.accepts import skip_unless_takes
from refimpl.properties.reach import reach
from refimpl.strategies.cse_registry import RegistryCall, RegistryGraph, registry_graphs

#: uninitialized memory by another name: refimpl once merged two calls of each
EMPTY_QUANTIZED = RegistryGraph((
    RegistryCall("aten:empty_quantized.default", "empty"),
    RegistryCall("aten:_empty_affine_quantized.default", "empty"),
    RegistryCall("torch:empty_quantized", "torch_function")))


def _difference(got: list[tuple], expected: list[tuple]) -> str:
    extra = [row for row in got if row not in expected]
    missing = [row for row in expected if row not in got]
    return (f"kept or changed but not expected: {extra}\n"
            f"  expected but removed or changed: {missing}")


@given(registry_graphs())
@example(EMPTY_QUANTIZED)
def test_every_registry_op_is_read_from_its_schema(refimpl_backend, spec):
    """Twice-called registry ops and the reads around them: the backend's graph is the
    hand-built one."""
    skip_unless_takes(refimpl_backend, "fx_graph_cse", ("torch",))
    cse = component(refimpl_backend, "fx_graph_cse")
    reach(True)
    gm = spec.build()
    got, expected = listing(cse(gm.graph)), expected_listing(gm.graph)
    assert got == expected, (
        f"{refimpl_backend.name} fx_graph_cse merged otherwise than by hand: "
        f"{_difference(got, expected)}\nreproduce with:\n"
        f"  from refimpl.strategies.cse_registry import RegistryCall, RegistryGraph\n"
        f"  spec = {spec!r}\n  gm = spec.build(); new = fx_graph_cse(gm.graph)")
