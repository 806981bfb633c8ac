"""A malformed graph is refused with a ``KeyError`` (torch's ``fx_graph_cse`` contract) whose
one-line message says what is wrong.

The graph is a valid traced case (``refimpl.strategies.cse_cases``) broken one way: a node
moved before an input it reads, an input made to read its reader (a cycle), or a node made
to read a placeholder of another graph. torch's pass raises ``KeyError`` for each (its map
from old to new nodes lacks the input), and code written against it catches that; a backend
must raise it too (a subclass is fine), never return a graph or raise something else.

The message is for the user who built the graph (the rule for bad input: one line, naming
what is wrong), checked against what the generator broke (``MalformedCase.offence``):

* it names the node that reads wrongly and the node it reads;
* a reordered graph: it speaks of the order, not of a cycle nor of another graph;
* a cycle: it shows the cycle as a closed loop of node names, ``a -> b -> a``, each name
  reading the next (``->`` is "reads"), and speaks of no other graph;
* a foreign input: it says the input is a node of another graph.

A graph whose last node is not its output node (a node moved after it) is refused too, with
an error (any type: torch's pass asserts) whose one-line message speaks of the output.

A value that is not a graph at all (the ``GraphModule`` instead of its ``.graph``, the list of
its nodes, None) is refused with the error Python gives a value of the wrong type
(``TypeError``, or ``AttributeError`` where a pass reads ``.nodes`` of it), one line that
names the type it was given.

Reach: every example is a malformed graph.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st

from refimpl.oracle import component
from refimpl.oracle.blame import TargetError, blamed
from refimpl.properties.reach import reach
from refimpl.strategies.cse_cases import (
    CORRUPTIBLE,
    MalformedCase,
    cse_cases,
    malformed_graphs,
    misplaced_outputs,
)

#: what a caller may pass instead of a graph, made from a traced GraphModule
NOT_GRAPHS = {"graph module": lambda gm: gm, "list of nodes": lambda gm: list(gm.graph.nodes),
              "None": lambda gm: None}

#: how a message says that a node belongs to another graph
OTHER_GRAPH = re.compile(r"\b(another|other|different|foreign) graph\b")


def _reproducer(bad: MalformedCase) -> str:
    return ("reproduce with:\n  from refimpl.strategies.cse_cases import CseCase, MalformedCase\n"
            f"  bad = {bad!r}\n  fx_graph_cse(bad.graph())")


def refusal(backend, bad: MalformedCase):
    """The backend's ``KeyError`` for the malformed graph (the property fails otherwise)."""
    try:
        component(backend, "fx_graph_cse")(bad.graph())
    except TargetError as exc:
        # a wrong error (or a wrong return) is the target's failure: the message says so
        assert isinstance(exc.__cause__, KeyError), (
            f"{exc}, for a malformed graph ({bad.corruption}); expected a KeyError\n"
            f"{_reproducer(bad)}")
        return exc.__cause__
    raise AssertionError(
        f"{backend.name} fx_graph_cse returned a graph for a malformed graph "
        f"({bad.corruption}), expected a KeyError\n  bad = {bad!r}")


@given(malformed_graphs())
def test_a_malformed_graph_raises_key_error(refimpl_backend, bad):
    """Out of order, cyclic or foreign inputs: a ``KeyError``."""
    reach(True)
    refusal(refimpl_backend, bad)


def _names(message: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", message) is not None


def _loops(message: str) -> list[list[str]]:
    """Every chain ``a -> b -> ...`` in the message, as its list of names."""
    chains = re.findall(r"[\w.]+(?:\s*->\s*[\w.]+)+", message)
    return [re.split(r"\s*->\s*", chain) for chain in chains]


def _shows_the_cycle(message: str, graph_edges: set[tuple[str, str]], pair) -> bool:
    """A closed chain (its first name is its last) whose every arrow is a read of the
    broken graph, through both nodes of the offence."""
    return any(chain[0] == chain[-1] and len(chain) >= 3 and set(pair) <= set(chain)
               and all((a, b) in graph_edges for a, b in itertools.pairwise(chain))
               for chain in _loops(message))


def wrong_in_message(bad: MalformedCase, message: str) -> list[str]:
    """What the message gets wrong about ``bad`` (module docstring); [] when nothing."""
    reader, read = bad.offence()
    wrong = [f"does not name {name!r}" for name in (reader, read) if not _names(message, name)]
    if "\n" in message.strip():
        wrong.append("is not one line")
    if bad.corruption == "foreign":
        if not OTHER_GRAPH.search(message):
            wrong.append(f"does not say that {read!r} is a node of another graph")
        return wrong
    if OTHER_GRAPH.search(message):
        wrong.append(f"speaks of another graph, but {read!r} is a node of this one")
    if bad.corruption == "reorder":
        if "order" not in message or re.search(r"\bcycle\b", message):
            wrong.append("does not say the nodes are out of order (or claims a cycle)")
    else:
        edges = {(n.name, s.name) for n in bad.graph().nodes for s in n.all_input_nodes}
        if not _shows_the_cycle(message, edges, (reader, read)):
            wrong.append("does not show the cycle as a closed loop a -> b -> a of reads")
    return wrong


@given(malformed_graphs())
def test_a_malformed_graph_is_refused_saying_what_is_wrong(refimpl_backend, bad):
    """The ``KeyError``'s one-line message names the offending node and its input, and says
    which of the three is wrong (module docstring)."""
    reach(True)
    error = refusal(refimpl_backend, bad)
    message = str(error.args[0]) if error.args else str(error)
    wrong = wrong_in_message(bad, message)
    assert not wrong, (
        f"{refimpl_backend.name} fx_graph_cse refused a malformed graph ({bad.corruption}, "
        f"offence {bad.offence()}) with a message that {'; '.join(wrong)}: {message!r}\n"
        f"{_reproducer(bad)}")


@given(misplaced_outputs())
def test_a_graph_not_ending_with_its_output_is_refused(refimpl_backend, bad):
    """A node after the output node: an error (not a graph), its message about the output."""
    reach(True)
    try:
        component(refimpl_backend, "fx_graph_cse")(bad.graph())
    except TargetError as exc:
        message = str(exc.__cause__)
        # a wrong error (or a wrong return) is the target's failure: the message says so
        assert "output" in message and "\n" not in message.strip(), (
            f"{exc}, for a graph whose last node is not its output ({bad.offence()}); "
            f"expected a one-line error that says so, got {message!r}\n{_reproducer(bad)}")
    else:
        raise AssertionError(
            f"{refimpl_backend.name} fx_graph_cse returned a graph for a graph whose last node "
            f"is not its output ({bad.offence()}), expected an error\n{_reproducer(bad)}")


@given(cse_cases(CORRUPTIBLE), st.sampled_from(sorted(NOT_GRAPHS)))
def test_a_value_that_is_not_a_graph_is_refused_naming_its_type(refimpl_backend, case, given):
    """The GraphModule, its list of nodes, or None instead of a graph: a ``TypeError`` (or
    ``AttributeError``), not a result; its one-line message names the type given."""
    reach(True)
    value = NOT_GRAPHS[given](case.traced())
    reproduce = (f"reproduce with:\n  from refimpl.strategies.cse_cases import CseCase\n"
                 f"  case = {case!r}\n  fx_graph_cse(<{given}>)")
    component(refimpl_backend, "fx_graph_cse")  # skips, visibly, a backend without one
    # called without component()'s input-kind filter: it reads a graph, and this is none
    cse = blamed(refimpl_backend.name, "fx_graph_cse", refimpl_backend.fx_graph_cse)
    try:
        result = cse(value)
    except TargetError as exc:
        message = str(exc.__cause__)
        assert isinstance(exc.__cause__, (TypeError, AttributeError)), (
            f"{exc}, for a {given} given as the graph; expected a TypeError\n{reproduce}")
        assert _names(message, type(value).__name__) and "\n" not in message.strip(), (
            f"{refimpl_backend.name} fx_graph_cse refused a {given} given as the graph with "
            f"a message that does not name {type(value).__name__!r} in one line: "
            f"{message!r}\n{reproduce}")
    else:
        raise AssertionError(
            f"{refimpl_backend.name} fx_graph_cse returned {type(result).__name__} for a "
            f"{given} given as the graph, expected a TypeError\n{reproduce}")
