"""The judge of the ``cse_cases`` properties: run the backend's ``fx_graph_cse`` on a drawn
:class:`refimpl.strategies.cse_cases.CseCase` and check its result.

Soundness is ``refimpl.expect.cse_soundness.unsound_reasons`` (the original graph run
eagerly from one RNG seed: values, outputs, inputs after the run, aliasing; and the nodes
the generator marked never-merged); completeness is the case's by-hand merge count. Both are
independent of any CSE's rules. A failure prints the case, which rebuilds the graph.
"""

from __future__ import annotations

from collections.abc import Collection

from torch import fx

from refimpl.expect.cse_soundness import CHECKS, unsound_reasons
from refimpl.oracle import component
from refimpl.strategies.cse_cases import CseCase, keep_names


def run_case(backend, case: CseCase) -> tuple[fx.GraphModule, fx.Graph]:
    """The case's traced graph and the backend's CSE of it."""
    gm = case.traced()
    return gm, component(backend, "fx_graph_cse")(gm.graph)


def reproducer(case: CseCase) -> str:
    return (f"reproduce with:\n  from refimpl.strategies.cse_cases import CseCase\n"
            f"  case = {case!r}\n  gm = case.traced(); new = fx_graph_cse(gm.graph)")


def assert_sound(backend, case: CseCase, gm: fx.GraphModule, new_graph: fx.Graph,
                 checks: Collection[str] = CHECKS) -> None:
    """The judge's ``checks``, with the generator's never-merged nodes as ``must_keep``."""
    reasons = unsound_reasons(gm, new_graph, case.example_inputs,
                              must_keep=keep_names(gm.graph), checks=checks)
    assert not reasons, (f"{backend.name} fx_graph_cse is unsound: {reasons}\n"
                         f"{reproducer(case)}")


def assert_merged(backend, case: CseCase, gm: fx.GraphModule, new_graph: fx.Graph) -> None:
    """At least the case's by-hand count of nodes is removed."""
    removed = len(gm.graph.nodes) - len(new_graph.nodes)
    assert removed >= case.expected_merges, (
        f"{backend.name} fx_graph_cse removed {removed} nodes, expected at least "
        f"{case.expected_merges} (sound merges, by hand)\n{reproducer(case)}")
