"""Is a CSE result sound? The judge the properties use, with a reproducer for its message.

``unsound_reasons(gm, new_graph, make_inputs)`` runs the original and the rewritten graph on
equal fresh inputs and lists what differs, by check (:data:`CHECKS`; a property names the
checks it makes, so it fails only for what its name says):

* ``structure``: the new graph fails ``lint`` or has more nodes;
* ``kept``: it has fewer random, mutating, effectful, uninitialized or opaque nodes (those
  are never merged; :func:`node_kind`);
* ``values``: an output, an input after the run (in-place writes), or the value any
  surviving node had right after it ran, is not bit-identical (dtype, NaN and -0.0 compared
  by bits; nodes matched by name, as both passes keep names). Both runs start from the same
  RNG seed: random nodes are kept in order, so they draw the same numbers, and graphs with
  random ops are compared too;
* ``aliasing``: which outputs share storage with which outputs and inputs, and which are
  the same tensor object.

:func:`node_kind` is this module's own reading of torch's documented semantics, written
apart from any CSE: an aten op is random when tagged ``torch.Tag.nondeterministic_seeded``,
mutating when its schema is mutable (an ``a!`` annotation), effectful when it returns
nothing or torch.fx lists it as side-effectful (``Node.is_impure``); ``empty*`` ops return
uninitialized memory (torch.empty's documentation; ``new_empty``, ``empty_quantized`` and
the private ``_empty_affine_quantized`` among them). A torch function or Tensor method is
read through the aten ops of its name, plus Python's conventions: a trailing ``_`` or an
``inplace=True`` argument writes; ``operator.setitem`` and the augmented assignments
(``iadd``...) write their target. Modules and other Python functions are opaque.
"""

from __future__ import annotations

import inspect
import operator
from collections import Counter
from collections.abc import Callable, Collection, Hashable

import torch
from torch import fx

KEPT_KINDS = ("random", "mutating", "side_effect", "uninitialized", "opaque")
#: what :func:`unsound_reasons` can check (module docstring)
CHECKS = ("structure", "kept", "values", "aliasing")
#: ``operator`` functions that write their first argument: item assignment and the
#: in-place operators of Python's ``operator`` documentation (``x[i] = v``, ``x += y``)
_WRITING_OPERATORS = frozenset(getattr(operator, name) for name in (
    "setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul",
    "imod", "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"))
#: where a torch function named like an aten op lives
_TORCH_MODULES = (torch, torch.nn.functional, torch.special, torch.linalg, torch.fft)


def bitwise_equal(a, b) -> bool:
    """Same structure and, for tensors, the same dtype, shape and bits (NaN and -0.0 too)."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(bitwise_equal, a, b))
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(_bits(a), _bits(b)))
    return a == b


def _bits(t: torch.Tensor) -> torch.Tensor:
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.reshape(-1))
    return flat.view(torch.uint8)


def kept_counts(graph: fx.Graph) -> Counter[str]:
    """How many nodes of each never-merged kind (:func:`node_kind`) the graph has."""
    return Counter(kind for kind in map(node_kind, graph.nodes) if kind in KEPT_KINDS)


def node_kind(node: fx.Node) -> str:
    """``"structural"``, ``"pure"`` or one of :data:`KEPT_KINDS` (module docstring)."""
    if node.op in ("placeholder", "get_attr", "output"):
        return "structural"
    if node.op == "call_module":
        return "opaque"
    if isinstance(node.target, torch._ops.OpOverload):
        return _aten_kind([node.target], node)
    if node.target in _WRITING_OPERATORS:
        return "mutating"
    if node.op == "call_function" and getattr(node.target, "__module__", "") in (
            "_operator", "operator"):
        return "pure"
    return _named_kind(node)


def _aten_kind(ops: list, node: fx.Node) -> str:
    """The kind of a call of one of ``ops`` (aten overloads): any random one makes it random,
    any mutable one mutating (a method's in-place overloads are read by the caller)."""
    name = ops[0]._schema.name.split("::")[-1]
    if any(torch.Tag.nondeterministic_seeded in op.tags for op in ops):
        return "random"
    if any(op._schema.is_mutable for op in ops):
        return "mutating"
    if name.lstrip("_").startswith(("empty", "new_empty")):
        return "uninitialized"
    if all(not op._schema.returns for op in ops) or node.is_impure():
        return "side_effect"
    return "pure"


def _named_kind(node: fx.Node) -> str:
    """A Tensor method or torch function, read through the aten ops of its name."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    is_torch = node.op == "call_method" or any(
        getattr(module, name, None) is node.target for module in _TORCH_MODULES)
    packet = getattr(torch.ops.aten, name, None) if is_torch and name else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return "side_effect" if node.is_impure() else "opaque"
    ops = [getattr(packet, overload) for overload in packet.overloads()]
    pure_overloads = [op for op in ops if not op._schema.is_mutable] or ops
    kind = _aten_kind(pure_overloads, node)
    if kind == "random":
        return kind
    return "mutating" if name.endswith("_") or writes_by_flag(node) else kind


def writes_by_flag(node: fx.Node) -> bool:
    """A true ``inplace`` argument (``F.relu(x, True)``; torch.nn.functional tests ``if
    inplace:``, so ``None`` and ``0`` write nothing), by keyword or by position, or one
    that is a graph value (it may be true); an ``out=`` tensor."""
    if node.kwargs.get("out") is not None:
        return True
    try:
        given = inspect.signature(node.target).bind(*node.args, **node.kwargs).arguments
    except (TypeError, ValueError):  # a method name, a builtin without a signature
        given = node.kwargs
    flag = given.get("inplace", False)
    return isinstance(flag, fx.Node) or bool(flag)


def _snapshot(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def run_recording(gm: fx.GraphModule, inputs: list,
                  seed: int = 0) -> tuple[object, dict[str, object]]:
    """Run ``gm`` from RNG seed ``seed`` (the caller's RNG state is restored afterwards);
    return its output and a copy of every node's value right after it ran."""
    values: dict[str, object] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node: fx.Node):
            result = super().run_node(node)
            values[node.name] = _snapshot(result)
            return result

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Recorder(gm).run(*inputs), values


def storage_pattern(outputs, inputs) -> list[list[tuple[bool, bool]]]:
    """For each output tensor and each output and input tensor: do they share storage, and
    are they the same tensor object?"""
    flat = [t for t in (*_leaves(outputs), *inputs) if isinstance(t, torch.Tensor)]
    ptrs = [t.untyped_storage().data_ptr() for t in flat]
    n_out = len([t for t in _leaves(outputs) if isinstance(t, torch.Tensor)])
    return [[(ptrs[i] == ptrs[j], flat[i] is flat[j]) for j in range(len(flat))]
            for i in range(n_out)]


def _leaves(value) -> list:
    return [v for x in value for v in _leaves(x)] if isinstance(value, (list, tuple)) \
        else [value]


def unsound_reasons(gm: fx.GraphModule, new_graph: fx.Graph, make_inputs: Callable[[], list],
                    must_keep: Collection[str] | None = None,
                    checks: Collection[str] = CHECKS) -> list[str]:
    """What of ``checks`` (:data:`CHECKS`) shows ``new_graph`` does not compute what
    ``gm.graph`` computes; a graph that fails ``lint`` fails every check.

    ``must_keep``: names of nodes that must survive (random draws, writes), as the caller
    knows them independently (e.g. a generator's record); by default the never-merged
    counts of this module's own classification (:func:`kept_counts`) are compared.
    """
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"checks={sorted(unknown)!r}: each must be one of {CHECKS}")
    try:
        new_graph.lint()
    except Exception as exc:  # lint raises RuntimeError or AssertionError
        return [f"lint failed: {exc}"]
    reasons = []
    if "structure" in checks and len(new_graph.nodes) > len(gm.graph.nodes):
        reasons.append(f"node count grew: {len(gm.graph.nodes)} -> {len(new_graph.nodes)}")
    if "kept" in checks:
        reasons += _lost_nodes(gm.graph, new_graph, must_keep)
    if "values" in checks or "aliasing" in checks:
        reasons += _run_differences(gm, new_graph, make_inputs, checks)
    return reasons


def _lost_nodes(graph: fx.Graph, new_graph: fx.Graph,
                must_keep: Collection[str] | None) -> list[str]:
    if must_keep is not None:
        lost = sorted(set(must_keep) - {n.name for n in new_graph.nodes})
        return [f"never-merged nodes removed: {lost}"] if lost else []
    if kept_counts(graph) != kept_counts(new_graph):
        return [f"never-merged nodes changed: {dict(kept_counts(graph))} -> "
                f"{dict(kept_counts(new_graph))}"]
    return []


def _run_differences(gm: fx.GraphModule, new_graph: fx.Graph,
                     make_inputs: Callable[[], list], checks: Collection[str]) -> list[str]:
    """Run both graphs from equal inputs and one RNG seed; what differs (values, aliasing)."""
    reasons = []
    old_in, new_in = make_inputs(), make_inputs()
    old_out, old_values = run_recording(gm, old_in)
    new_out, new_values = run_recording(fx.GraphModule(gm, new_graph), new_in)
    if "values" in checks:
        if not bitwise_equal(old_out, new_out):
            reasons.append("outputs differ")
        if not bitwise_equal(old_in, new_in):
            reasons.append("inputs differ after the run (in-place writes)")
        changed = [name for name, v in new_values.items() if name != "output"
                   and name in old_values and not bitwise_equal(old_values[name], v)]
        if changed:
            reasons.append(f"values of surviving nodes differ: {changed}")
    if "aliasing" in checks and storage_pattern(old_out, old_in) != storage_pattern(
            new_out, new_in):
        reasons.append("outputs share storage differently (with each other or the inputs, "
                       "or are one tensor object)")
    return reasons


def naive_duplicates(graph: fx.Graph) -> int:
    """How many nodes a naive CSE would drop: one that ignores effects (random draws, writes,
    aliasing) and compares constants with ``==`` (``0.0 == -0.0``; here NaN equals NaN too).
    A graph with none offers no merge to make or to refuse; the properties' reach reads it.

    Algorithm: hash-consing in graph order; a node's key is (op, target, its arguments with
    each graph value replaced by its naive representative), kwargs as a sorted mapping.
    """
    first: dict[Hashable, fx.Node] = {}
    rep: dict[fx.Node, fx.Node] = {}
    dropped = 0
    for node in graph.nodes:
        rep[node] = node
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        try:
            key = (node.op, node.target, _naive(node.args, rep),
                   tuple(sorted((k, _naive(v, rep)) for k, v in node.kwargs.items())))
            hash(key)
        except TypeError:  # an unhashable target or constant: never a naive duplicate
            continue
        if key in first:
            rep[node] = first[key]
            dropped += 1
        else:
            first[key] = node
    return dropped


def _naive(value, rep: dict[fx.Node, fx.Node]):
    if isinstance(value, fx.Node):
        return ("node", rep[value])
    if isinstance(value, (list, tuple)):
        return tuple(_naive(v, rep) for v in value)
    if isinstance(value, slice):
        return ("slice", _naive((value.start, value.stop, value.step), rep))
    if isinstance(value, float) and value != value:
        return "nan"
    return value
