"""refimpl's CSE against torch's ``fx_graph_cse`` on random graphs (a comparison, not a
property of a target: it runs in the suite, not under ``refimpl fuzz``).

Compared on what torch gets right on both 2.13 and 2.14: make_fx graphs without the
documented torch findings (docs/findings.md "## CSE": randn_like, randint_like and in-place
random draws merged, values merged across in-place writes, 0.0 and -0.0 merged on 2.13).
"""

from __future__ import annotations

from hypothesis import given

from refimpl.expect.cse_soundness import unsound_reasons
from refimpl.oracle import load_backend
from refimpl.strategies import GraphOptions, never_merged_names, op_graphs

TORCH_COMPARABLE = GraphOptions(
    families=("unary", "binary", "constant", "reduction", "list", "matmul", "view", "random"),
    exclude=frozenset({"randn_like", "randint_like"}), styles=("aten",),
    constants=(1, 1.0, True, 2, 2.0, 0.0, float("nan"), float("inf"), float("-inf")))


@given(op_graphs(TORCH_COMPARABLE))
def test_refimpl_removes_at_least_as_much_as_torch(spec):
    """Both sound; refimpl's graph is never larger than torch's."""
    gm = spec.traced()
    graphs = {name: load_backend(name).fx_graph_cse(gm.graph) for name in ("refimpl", "torch")}
    for name, graph in graphs.items():
        reasons = unsound_reasons(gm, graph, spec.example_inputs,
                                  must_keep=never_merged_names(gm.graph))
        assert not reasons, f"{name}: {reasons}\n{spec}"
    assert len(graphs["refimpl"].nodes) <= len(graphs["torch"].nodes), f"torch removed more\n{spec}"
