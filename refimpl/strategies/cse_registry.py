"""Every op of this torch's registry as a CSE must read it (``registry_graphs``): the aten
overloads and the torch functions and Tensor methods of the same names, each called twice
between two reads of each tensor it takes.

For one drawn call ``f`` on tensors ``t_1 .. t_k`` (placeholders of its own) a graph holds::

    before_i = aten.neg(t_i)   (each i)
    a = f(...); b = f(...)
    after_i = aten.neg(t_i)    (each i)
    out_i = aten.add(before_i, after_i)   (returned)

so a CSE must merge ``b`` into ``a`` exactly when ``f`` is pure, and ``after_i`` into
``before_i`` exactly when ``f`` writes ``t_i`` in neither call. Nothing runs: a CSE reads
schemas, tags and names, and these graphs carry no recorded values (a backend that takes only
make_fx graphs is not given them). Arguments, from the schema: a tensor (``Tensor``,
``Tensor?``, ``Tensor(a!)``) is a placeholder, a tensor list two; a keyword-only tensor
(``out=``) is given by keyword; every other argument is its default or a constant of its
type. An attention kernel's ``dropout_p`` is drawn (0, 0.0, 0.25, by keyword, or left to its
default of 0.0).

The ops are drawn by what their schema says (:data:`GROUPS`, each drawn in every example):
tagged random, writing an argument (``!``), returning nothing, the ``empty`` family,
returning a view, taking ``dropout_p``, and the rest; the torch dialect draws functions of
``torch``, ``torch.nn.functional``, ``torch.special``, ``torch.linalg``, ``torch.fft`` and
Tensor methods whose name is an aten op, on one tensor (in-place ``_`` names among them, and
``inplace=True`` where a function takes it).
"""

from __future__ import annotations

import functools
import inspect
import keyword
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch import fx

aten = torch.ops.aten

__all__ = ["GROUPS", "TORCH_NAMESPACES", "RegistryCall", "RegistryGraph", "registry_graphs"]

#: what a torch-dialect call may be (where its name is an aten op's)
TORCH_NAMESPACES = {"torch": torch, "functional": torch.nn.functional,
                    "special": torch.special, "linalg": torch.linalg, "fft": torch.fft}
#: values of a drawn ``dropout_p``: the constant 0 (int and float), a real dropout, given by
#: keyword, or left to the schema's default
DROPOUT_CHOICES = (0, 0.0, 0.25, "keyword 0.0", "default")
#: how many ops of each group one graph calls
PER_GROUP = 2
#: a constant of each (non-tensor) argument type a schema may name
_CONSTANTS = {"int": 1, "SymInt": 1, "float": 1.0, "bool": False, "str": "none",
              "Scalar": 1, "ScalarType": torch.float32, "Layout": torch.strided,
              "Device": torch.device("cpu"), "MemoryFormat": torch.contiguous_format,
              "int[]": [1], "SymInt[]": [1], "float[]": [1.0], "bool[]": [False],
              "str[]": ["none"], "Scalar[]": [1]}


def _tensors_of(arg_type) -> int:
    """How many placeholders an argument of this schema type takes: 1 for a tensor
    (optional or not), 2 for a list of them, 0 for anything else."""
    if isinstance(arg_type, torch.OptionalType):
        arg_type = arg_type.getElementType()
    if isinstance(arg_type, torch.TensorType):
        return 1
    if isinstance(arg_type, torch.ListType):
        return 2 * bool(_tensors_of(arg_type.getElementType()))
    return 0


def _constant(arg):
    """The argument's default where it has one, else a constant of its type (None for an
    optional or unknown type)."""
    if arg.has_default_value():
        return arg.default_value
    return _CONSTANTS.get(str(arg.type))


def _group(op: torch._ops.OpOverload) -> str:
    """What the schema says first, in the order of :data:`GROUPS`."""
    schema = op._schema
    names = [a.name for a in schema.arguments]
    if "dropout_p" in names:
        return "dropout_p"
    if torch.Tag.nondeterministic_seeded in op.tags:
        return "random"
    if schema.name.split("::")[-1].lstrip("_").startswith(("empty", "new_empty")):
        return "empty"
    if schema.is_mutable:
        return "writes"
    if not schema.returns:
        return "no_returns"
    if any(r.alias_info for r in schema.returns):
        return "view"
    return "other"


#: the aten groups, then the torch dialect's
GROUPS = ("dropout_p", "random", "empty", "writes", "no_returns", "view", "other",
          "torch_function", "tensor_method", "inplace_flag")


@functools.cache
def _aten_ops() -> dict[str, tuple[str, ...]]:
    """group -> the qualified names of this torch's aten overloads (``aten::mm.out``)."""
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    registered = sorted((s.name.split("::")[1], s.overload_name or "default")
                        for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::"))
    for name, overload in registered:  # every one (dir(aten) lists only those looked up)
        if keyword.iskeyword(overload):  # random.from: fx cannot write it as Python code
            continue
        groups[_group(getattr(getattr(aten, name), overload))].append(f"{name}.{overload}")
    return {g: tuple(names) for g, names in groups.items() if names}


def _takes_inplace(fn) -> bool:
    try:
        return "inplace" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


@functools.cache
def _torch_calls() -> dict[str, tuple[str, ...]]:
    """group -> ``namespace:name`` of torch functions and ``Tensor:name`` methods named like
    an aten op (a function taking ``inplace`` in its own group)."""
    functions, methods, flags = [], [], []
    for ns_name, namespace in TORCH_NAMESPACES.items():
        for name in dir(namespace):
            fn = getattr(namespace, name, None)
            if (isinstance(getattr(aten, name, None), torch._ops.OpOverloadPacket)
                    and callable(fn) and not isinstance(fn, type)):
                (flags if _takes_inplace(fn) else functions).append(f"{ns_name}:{name}")
    for name in dir(torch.Tensor):
        if isinstance(getattr(aten, name, None), torch._ops.OpOverloadPacket):
            methods.append(f"Tensor:{name}")
    return {"torch_function": tuple(functions), "tensor_method": tuple(methods),
            "inplace_flag": tuple(flags)}


def _defaults_from(schema, name: str) -> bool:
    """Do the argument ``name`` and every argument after it have a default?"""
    names = [a.name for a in schema.arguments]
    return all(a.has_default_value() for a in schema.arguments[names.index(name):])


@dataclass(frozen=True)
class RegistryCall:
    """One op of the registry (``aten:<packet>.<overload>``, ``<namespace>:<name>`` or
    ``Tensor:<name>``), its group, and its drawn ``dropout_p`` choice (aten kernels that
    take one) or ``inplace`` flag (functions that take one)."""

    op: str
    group: str
    dropout: object = None
    inplace: bool = False

    def overload(self) -> torch._ops.OpOverload:
        packet, overload = self.op.split(":", 1)[1].rsplit(".", 1)
        return getattr(getattr(aten, packet), overload)

    def emit(self, graph: fx.Graph) -> list[fx.Node]:
        """The reads, the two calls, the reads again and their sums (module docstring); the
        sums to return."""
        args, kwargs, tensors = self._arguments(graph)
        before = [graph.call_function(aten.neg.default, (t,)) for t in tensors]
        for _ in range(2):
            self._call(graph, args, kwargs)
        after = [graph.call_function(aten.neg.default, (t,)) for t in tensors]
        return [graph.call_function(aten.add.Tensor, pair) for pair in zip(before, after)]

    def _call(self, graph: fx.Graph, args: tuple, kwargs: dict) -> fx.Node:
        space, name = self.op.split(":", 1)
        if space == "aten":
            return graph.call_function(self.overload(), args, kwargs)
        if space == "Tensor":
            return graph.call_method(name, args, kwargs)
        return graph.call_function(getattr(TORCH_NAMESPACES[space], name), args, kwargs)

    def _arguments(self, graph: fx.Graph) -> tuple[tuple, dict, list[fx.Node]]:
        """(args, kwargs, the placeholders among them)."""
        if not self.op.startswith("aten:"):
            t = graph.placeholder(f"t{len(graph.nodes)}")
            return (t,), {"inplace": True} if self.inplace else {}, [t]
        tensors: list[fx.Node] = []

        def placeholders(n: int):
            made = [graph.placeholder(f"t{len(graph.nodes)}") for _ in range(n)]
            tensors.extend(made)
            return made[0] if n == 1 else made
        args, kwargs = [], {}
        schema = self.overload()._schema
        dropout = self.dropout
        if dropout in ("keyword 0.0", "default") and not _defaults_from(schema, "dropout_p"):
            dropout = 0.0  # a kernel whose dropout_p, or a later argument, has no default
        for arg in schema.arguments:
            n = _tensors_of(arg.type)
            value = placeholders(n) if n else _constant(arg)
            if arg.name == "dropout_p" and dropout in ("keyword 0.0", "default"):
                break  # every later argument keeps its default
            if arg.name == "dropout_p":
                value = dropout
            if arg.kwarg_only:
                if n or not arg.has_default_value():
                    kwargs[arg.name] = value
            else:
                args.append(value)
        if dropout == "keyword 0.0":
            kwargs["dropout_p"] = 0.0
        return tuple(args), kwargs, tensors


@dataclass(frozen=True)
class RegistryGraph:
    """Drawn registry calls, each on placeholders of its own, in one graph."""

    calls: tuple[RegistryCall, ...]

    def build(self) -> fx.GraphModule:
        graph = fx.Graph()
        outputs = [out for call in self.calls for out in call.emit(graph)]
        graph.output(tuple(outputs))
        return fx.GraphModule(torch.nn.Module(), graph)


@st.composite
def _registry_call(draw, group: str) -> RegistryCall:
    pool = {**_aten_ops(), **_torch_calls()}[group]
    name = draw(st.sampled_from(pool))
    if group in _torch_calls():
        return RegistryCall(name, group, inplace=group == "inplace_flag" and draw(st.booleans()))
    dropout = draw(st.sampled_from(DROPOUT_CHOICES)) if group == "dropout_p" else None
    return RegistryCall(f"aten:{name}", group, dropout)


@st.composite
def registry_graphs(draw) -> RegistryGraph:
    """:data:`PER_GROUP` ops of every group (module docstring), in a drawn order."""
    groups = [g for g in GROUPS if g in {**_aten_ops(), **_torch_calls()}]
    calls = [draw(_registry_call(g)) for g in groups for _ in range(PER_GROUP)]
    return RegistryGraph(tuple(draw(st.permutations(calls))))
