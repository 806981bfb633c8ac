"""Small CSE graphs of named shapes (``cse_cases``): the aliasing, effect and key cases that
``op_graphs`` does not draw, as plain data that rebuilds exactly.

A :class:`CseCase` is a shape's name (a key of :data:`SHAPES`), the dialect (``"aten"``:
aten ``OpOverload`` calls with make_fx's ``meta["val"]``; ``"torch"``: torch functions and
Tensor methods as symbolic_trace records them, no values; ``"symbolic"``: aten calls with
fake values whose sizes are symbols) and the shape's drawn choices.
``case.traced()`` builds the ``fx.GraphModule``; the nodes a CSE must never merge (writes,
random draws, opaque calls) carry ``meta[KEEP_META]``; ``case.expected_merges`` is how many
nodes a sound CSE can remove by hand (the property asks for at least that many), 0 where
no merge is claimed. Inputs are ``(3, 3)`` float tensors (:meth:`CseCase.example_inputs`).

The shapes (each a class of bugs, not one bug):

* ``list_view_write``: a pure op on a value, a write through one element of ``unbind``,
  ``split`` or ``chunk`` of it, the pure op again: the write separates the two;
* ``returned_write_of_view``: two equal views of a value, an in-place op on the first,
  returned with the second: the in-place op returns the first view itself, so the two
  returned tensors are two objects in eager;
* ``opaque_alias``: a Python function (opaque to CSE) of two or three tensors returning
  one of them (any position, the tensors in any graph order), a view or an element of it,
  or ``getitem`` of a tuple of them, then written: the write reaches that argument;
* ``view_chain_write``: a write through a view of a view (``as_strided`` among them)
  between two equal reads of the base;
* ``out_write``: an ``out=`` call writing the base (or a view of it) between two equal reads;
* ``keyword_arguments``: the tensor arguments of views, writes and pure ops given by
  keyword (``aten.t.default(self=x)``), as hand-built or rewritten graphs have them;
* ``opaque_functions``: Python calls with effects a schema cannot show: ``torch.manual_seed``
  (no aten op) before each of two equal random draws, and a user function named like
  ``torch.sym_*`` or like the builtin ``max`` that writes its argument; every node's ``op``
  maybe an equal string that is not the interned literal;
* ``attention_dropout``: an attention kernel whose only randomness is its ``dropout_p``,
  twice: random for ``dropout_p > 0`` (never merged), pure for ``dropout_p == 0`` or
  ``dropout_p`` left out (its default is 0.0; expected merged);
* ``unrecorded_values``: a maybe-copy op (``reshape``, ``flatten``, ``contiguous``) twice,
  one result written, the other read, in an aten graph where some values were never
  recorded (a graph a pass extended without ``meta["val"]``);
* ``maybe_copy_twice``: a maybe-copy op (``reshape``, ``flatten``, ``contiguous``) twice on
  one value, the first result written, the second read, the sizes static or symbols (the
  ``symbolic`` dialect: make_fx's fake values of sizes ``(s0, s0)``): a view of a contiguous
  input (expected merged), a copy of its transpose (never merged);
* ``write_reads_twin``: a pure op twice and an in-place op that writes the first while
  reading the second: pointwise (``a.add_(b)``: the merge is sound, expected) or not
  (``a.addmm_(b, b)``: never);
* ``distinct_equal_leaves``: the same call twice with equal arguments that are distinct
  objects (a string built at run time, a fresh ``torch.device``): expected merged;
* ``complex_constants``: ``x * c1`` and ``x * c2`` with complex constants that differ only
  in their imaginary part (``2+1j``, ``2+3j``): two values, never merged;
* ``dead_repeat``: a graph with no inputs: ``a = full(...)``, a write to ``a`` (``tril_``,
  ``cumsum_``: not elementwise; ``mul_``), the same ``full`` again that nothing reads: the
  repeat is expected removed (no reader of it sees the write).
* ``views_after_write``: ``y.<writer>(); a = pure(y); v = view(y); w = view(y); b =
  pure(y)``: ``w`` and ``b`` expected merged (the write comes before every read).
* ``unbacked_sizes``: (symbolic dialect) ``pure(n)`` twice, ``n`` of a data-dependent size
  (``nonzero``: an unbacked symbol): expected merged.
* ``lookalike_fills``: ``full([3, 3], c1)`` and ``full([3, 3], c2)``, ``c1 == c2`` of
  another type or bits (``1``/``True``/``1.0``, ``0.0``/``-0.0``, ``nan``/``-nan``): never
  merged.
* ``reshaped_twin``: ``v = y.t(); w = y.t(); v.t_()`` (or ``transpose_``), ``pure(v) +
  pure(w)``: ``v`` and ``w`` differ in shape once ``v`` is transposed in place: never merged.
* ``lifted_refusal``: ``a = make(x); b = make(x); r = pure(b); a.<writer>(); s = pure(b)``:
  ``s`` repeats ``r``, and once it is gone ``b`` may become ``a``: 2 nodes expected removed.

* ``python_writes``: (torch dialect) ``a = cos(t); x += y`` (``-=``, ``*=``, ``/=``) or
  ``x[0] = 2.0``; ``b = cos(t)``, ``t`` the target ``x`` (never merged: the write comes
  between) or the other operand ``y`` (read, not written: expected merged); ``x`` an input
  or a clone of it. symbolic_trace records these as ``operator.iadd``... and
  ``operator.setitem``, which write their first argument only.

* ``many_writes``: ``y = clone(x)``, ``y.add_(1.0)`` 2 or 300 times, then a maybe-copy op
  twice on ``y`` (``reshape``, ``contiguous``): expected merged (every write comes before
  both). 300 writes make positions and write counts past 256, where CPython's small ints
  end (``is`` and ``==`` on them part).

Generation: the dialect, then the shape's choices, each from a short list (so each shrinks
to its first item), then whether every node's ``op`` is an equal string that is not the
interned literal (as a graph deserialised or built from computed strings has it: ``==``
sees no difference, ``is`` does).
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import fx

from refimpl.strategies.graphs import annotate, annotate_symbolic

aten = torch.ops.aten

__all__ = ["CORRUPTIONS", "KEEP_META", "SHAPES", "CseCase", "MalformedCase", "cse_cases",
           "keep_names", "malformed_graphs", "misplaced_outputs"]

#: the meta key marking a node the generator knows must never be merged
KEEP_META = "cse_cases_keep"


# --- opaque Python functions the graphs call (module level: a reproducer imports them) ---

def later_argument(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Returns its second argument itself."""
    return y


def view_of_later(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Returns a transposed view of its second argument."""
    return y.t()


def row_of_later(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Returns row 0 of its second argument (a view)."""
    return y[0]


def first_of_three(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Returns its first argument itself."""
    return x


def middle_of_three(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Returns its second argument itself."""
    return y


def view_of_middle(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Returns a transposed view of its second argument."""
    return y.t()


def row_of_last(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Returns row 0 of its third argument (a view)."""
    return z[0]


def sym_bump_(t: torch.Tensor) -> torch.Tensor:
    """Adds 1 to ``t`` in place: a user function whose name looks like ``torch.sym_*``."""
    return t.add_(1)


def bump_named_max(t: torch.Tensor) -> torch.Tensor:
    """Adds 1 to ``t`` in place: a user function whose ``__name__`` is ``max``, like the
    builtin's (a function defined as ``max`` in a user's module)."""
    return t.add_(1)


bump_named_max.__name__ = "max"
#: the user functions that write their argument, by the name a case records
BUMPS = {"sym_bump_": sym_bump_, "max": bump_named_max}


#: calls whose result is (a view of) one of their tensor arguments: name -> (function, how
#: many tensor arguments, which one it returns). ``getitem`` indexes the tuple of them.
OPAQUE_ALIASES = {
    "later_argument": (later_argument, 2, 1), "view_of_later": (view_of_later, 2, 1),
    "row_of_later": (row_of_later, 2, 1), "first_of_three": (first_of_three, 3, 0),
    "middle_of_three": (middle_of_three, 3, 1), "view_of_middle": (view_of_middle, 3, 1),
    "row_of_last": (row_of_last, 3, 2), "getitem_0": (operator.getitem, 3, 0),
    "getitem_1": (operator.getitem, 3, 1), "getitem_2": (operator.getitem, 3, 2)}
#: the orders in which the three candidate tensors are passed
ORDERS = tuple(itertools.permutations(range(3)))


@dataclass(frozen=True)
class CseCase:
    """One drawn graph (module docstring): ``shape``, ``style``, the shape's ``choices``."""

    shape: str
    style: str
    choices: tuple
    #: every node's ``op`` an equal string that is not the interned literal
    fresh_ops: bool = False

    def build(self) -> fx.GraphModule:
        graph = fx.Graph()
        emit = _Emit(graph, self.style)
        xs = [graph.placeholder(f"x{i}") for i in range(SHAPES[self.shape].inputs)]
        outputs = SHAPES[self.shape].build(emit, xs, *self.choices)
        graph.output(tuple(outputs))
        if self.fresh_ops or SHAPES[self.shape].fresh_ops(*self.choices):
            for node in graph.nodes:
                node.op = _fresh(node.op)
        return fx.GraphModule(torch.nn.Module(), graph)

    def traced(self) -> fx.GraphModule:
        """:meth:`build`, with make_fx's ``meta["val"]`` in the aten dialect (all values but
        those ``unrecorded_values`` leaves out); in the symbolic one, fake tensors whose
        sizes are symbols (``(s0, s0)``), as ``tracing_mode="symbolic"`` records them."""
        gm = self.build()
        if self.style == "symbolic":
            return annotate_symbolic(gm, self.example_inputs())
        if self.style != "aten":
            return gm
        annotate(gm, self.example_inputs())
        if self.shape == "unrecorded_values":
            unrecorded = self.choices[-1]
            for node in gm.graph.nodes:
                if node.name in unrecorded:
                    del node.meta["val"]
        return gm

    def example_inputs(self, seed: int = 0) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(3, 3, generator=gen) for _ in range(SHAPES[self.shape].inputs)]

    @property
    def expected_merges(self) -> int:
        return SHAPES[self.shape].merges(*self.choices)


def keep_names(graph: fx.Graph) -> frozenset[str]:
    """The nodes the generator marked never-merged (:data:`KEEP_META`)."""
    return frozenset(n.name for n in graph.nodes if n.meta.get(KEEP_META))


class _Emit:
    """Adds calls to a graph in one dialect: aten overloads, or torch functions and methods."""

    def __init__(self, graph: fx.Graph, style: str):
        self.graph, self.style = graph, style

    def call(self, target, *args, keep: bool = False, **kwargs) -> fx.Node:
        return self.by_keyword(target, kwargs, *args, keep=keep)

    def by_keyword(self, target, kwargs: dict, *args, keep: bool = False) -> fx.Node:
        """``target(*args, **kwargs)``; ``kwargs`` may name ``self`` (aten's first argument)."""
        node = self.graph.call_function(target, args, kwargs)
        node.meta[KEEP_META] = keep
        return node

    def op(self, aten_op, torch_name: str, *args, keep: bool = False, **kwargs) -> fx.Node:
        """``aten_op(*args)`` in aten; ``torch_name`` in torch: ``".m"`` a Tensor method,
        ``"F.f"`` a functional, else a ``torch`` function."""
        if self.style in ("aten", "symbolic"):
            return self.call(aten_op, *args, keep=keep, **kwargs)
        if torch_name.startswith("."):
            node = self.graph.call_method(torch_name[1:], args, kwargs)
            node.meta[KEEP_META] = keep
            return node
        target = getattr(F, torch_name[2:]) if torch_name.startswith("F.") \
            else getattr(torch, torch_name)
        return self.call(target, *args, keep=keep, **kwargs)

    def base(self, x: fx.Node, clone: bool) -> fx.Node:
        return self.op(aten.clone.default, ".clone", x) if clone else x

    def pure(self, name: str, x: fx.Node) -> fx.Node:
        return self.op(*PURE[name], x)

    def write(self, name: str, x: fx.Node) -> fx.Node:
        aten_op, torch_name, args = WRITERS[name]
        return self.op(aten_op, torch_name, x, *args, keep=True)

    def view(self, name: str, x: fx.Node) -> fx.Node:
        if name == "slice" and self.style == "torch":
            return self.call(operator.getitem, x, (slice(None), slice(0, 2)))
        aten_op, torch_name, args = VIEWS[name]
        return self.op(aten_op, torch_name, x, *args)


PURE = {"cos": (aten.cos.default, "cos"), "neg": (aten.neg.default, ".neg"),
        "exp": (aten.exp.default, "exp")}
WRITERS = {"mul_": (aten.mul_.Tensor, ".mul_", (2.0,)), "add_": (aten.add_.Tensor, ".add_", (1.0,)),
           "relu_": (aten.relu_.default, ".relu_", ())}
VIEWS = {"t": (aten.t.default, ".t", ()), "transpose": (aten.transpose.int, ".transpose", (0, 1)),
         "select": (aten.select.int, ".select", (0, 0)),
         "slice": (aten.slice.Tensor, "", (1, 0, 2)),
         "unsqueeze": (aten.unsqueeze.default, ".unsqueeze", (0,)),
         "as_strided": (aten.as_strided.default, ".as_strided", ((2, 2), (3, 1)))}
#: views that fit the result of any of VIEWS (a view of a view)
SECOND_VIEWS = ("unsqueeze", "as_strided")
#: ops with an ``out=`` overload: aten's ``.out``, torch's function
OUT_OPS = {"cos": (aten.cos.out, "cos"), "neg": (aten.neg.out, "neg"),
           "exp": (aten.exp.out, "exp")}
SPLITTERS = {"unbind": (aten.unbind.int, ".unbind", ()),
             "split": (aten.split.Tensor, ".split", (2,)),
             "chunk": (aten.chunk.default, ".chunk", (2,))}


def _list_view_write(emit, xs, clone, pure, splitter, dim, index, writer, return_part):
    base = emit.base(xs[0], clone)
    a = emit.pure(pure, base)
    aten_op, torch_name, args = SPLITTERS[splitter]
    parts = emit.op(aten_op, torch_name, base, *args, dim)
    part = emit.call(operator.getitem, parts, index)
    written = emit.write(writer, part)
    both = emit.op(aten.add.Tensor, "add", a, emit.pure(pure, base))
    return [both, written] if return_part else [both]


def _returned_write_of_view(emit, xs, clone, view, writer, return_first):
    base = emit.base(xs[0], clone)
    first, second = emit.view(view, base), emit.view(view, base)
    written = emit.write(writer, first)
    return [written, second, first] if return_first else [written, second]


def _opaque_alias(emit, xs, function, clone, order, writer, pure):
    """``f(a, b[, c])`` returns (a view of) one argument, the tensors ``x0``, ``x1`` and
    ``base`` (``x2`` or a clone of it) passed in the drawn ``order``; ``getitem_<i>`` is
    ``(a, b, c)[i]``. The aliased tensor may come before or after the others in the graph,
    and be any argument. Both reads come after the call (the call itself may write its
    arguments), the write through its result between them."""
    target, arity, position = OPAQUE_ALIASES[function]
    tensors = (xs[0], xs[1], emit.base(xs[2], clone))
    args = tuple(tensors[i] for i in order[:arity])
    if target is operator.getitem:
        alias = emit.call(operator.getitem, args, position)
    else:
        alias = emit.call(target, *args, keep=True)
    aliased = args[position]
    a = emit.pure(pure, aliased)
    emit.write(writer, alias)
    return [emit.op(aten.add.Tensor, "add", a, emit.pure(pure, aliased))]


def _view_chain_write(emit, xs, clone, first, second, writer, pure):
    """``a = pure(y); second(first(y)).<writer>; b = pure(y)``: a view of a view (one of
    them ``as_strided``, maybe), written: the write reaches ``y``."""
    base = emit.base(xs[0], clone)
    a = emit.pure(pure, base)
    emit.write(writer, emit.view(second, emit.view(first, base)))
    return [emit.op(aten.add.Tensor, "add", a, emit.pure(pure, base))]


def _views_after_write(emit, xs, clone, view, writer, pure):
    """``y.<writer>(); a = pure(y); v = view(y); w = view(y); b = pure(y)``: the write comes
    before every read, so ``w`` repeats ``v`` (one storage already) and ``b`` repeats ``a``
    (nothing written between them): 2 merges. Merging the equal views must not count the
    write to ``y`` again (``b`` would look like a newer value)."""
    base = emit.base(xs[0], clone)
    emit.write(writer, base)
    a = emit.pure(pure, base)
    v, w = emit.view(view, base), emit.view(view, base)
    b = emit.pure(pure, base)
    return [emit.op(aten.add.Tensor, "add", a, b), emit.op(aten.add.Tensor, "add", v, w)]


def _unbacked_sizes(emit, xs, pure):
    """``n = nonzero(x).to(float32); a = pure(n); b = pure(n)``: in the symbolic dialect
    ``n``'s rows are a data-dependent size (an unbacked symbol ``u0``); values of such a
    size are values like any other (only a node that defines the symbol is not): ``b``
    expected merged."""
    rows = emit.op(aten.nonzero.default, "nonzero", xs[0])
    n = emit.op(aten._to_copy.default, "", rows, dtype=torch.float32)
    return [emit.op(aten.add.Tensor, "add", emit.pure(pure, n), emit.pure(pure, n))]


#: fill values ``==`` (or hashing) confuses although their type or bits differ
LOOKALIKE_FILLS = ((1, True), (1, 1.0), (True, 1.0), (0, False), (0.0, -0.0),
                   (math.nan, -math.nan))


def _lookalike_fills(emit, xs, pair):
    """``a = full([3, 3], c1); b = full([3, 3], c2)`` with ``c1 == c2`` (or both NaN) but of
    another type (bool, int, float: the tensor's dtype) or other bits (a signed zero, a NaN's
    sign): two values, never merged. Returns a clone of each (so neither fill escapes)."""
    a, b = (emit.op(aten.full.default, "full", [3, 3], fill) for fill in pair)
    return [emit.op(aten.clone.default, ".clone", a), emit.op(aten.clone.default, ".clone", b)]


#: in-place view ops: they change the shape and strides of the view they write, not its data
INPLACE_VIEWS = {"t_": (aten.t_.default, ".t_", ()),
                 "transpose_": (aten.transpose_.default, ".transpose_", (0, 1))}


def _reshaped_twin(emit, xs, clone, view, inplace_view, pure):
    """``v = view(y); w = view(y); v.<inplace_view>(); pure(v) + pure(w)``: the in-place view
    op changes ``v``'s shape, not ``w``'s, so the equal views ``v`` and ``w`` are two values
    (never merged), whether ``y`` is an input or a clone."""
    base = emit.base(xs[0], clone)
    v, w = emit.view(view, base), emit.view(view, base)
    aten_op, torch_name, args = INPLACE_VIEWS[inplace_view]
    emit.op(aten_op, torch_name, v, *args, keep=True)
    return [emit.op(aten.add.Tensor, "add", emit.pure(pure, v), emit.pure(pure, w))]


def _out_write(emit, xs, into_view, op, pure):
    """``y = x.clone(); a = pure(y); op(x, out=y or y.t()); b = pure(y)``: an ``out=`` call
    writes its ``out`` argument (keyword-only), directly or through a view."""
    base = emit.op(aten.clone.default, ".clone", xs[0])
    a = emit.pure(pure, base)
    target = emit.view("t", base) if into_view else base
    aten_op, torch_name = OUT_OPS[op]
    emit.op(aten_op, torch_name, xs[0], keep=True, out=target)
    return [emit.op(aten.add.Tensor, "add", a, emit.pure(pure, base))]


def _keyword_arguments(emit, xs, clone, view, writer, pure):
    """aten only: every argument of the view, the write and the pure op by keyword."""
    def named(op, args) -> dict:
        return dict(zip([a.name for a in op._schema.arguments[1:]], args))
    base = emit.by_keyword(aten.clone.default, {"self": xs[0]}) if clone else xs[0]
    a = emit.by_keyword(PURE[pure][0], {"self": base})
    view_op, _, view_args = VIEWS[view]
    v = emit.by_keyword(view_op, {"self": base, **named(view_op, view_args)})
    write_op, _, write_args = WRITERS[writer]
    emit.by_keyword(write_op, {"self": v, **named(write_op, write_args)}, keep=True)
    b = emit.by_keyword(PURE[pure][0], {"self": base})
    return [emit.by_keyword(aten.add.Tensor, {"self": a, "other": b})]


def _opaque_functions(emit, xs, which, seed, fresh_ops):
    """torch only: two reseeded draws (equal in eager), or a user function writing twice.
    ``fresh_ops``: every node's ``op`` an equal string that is not the interned literal (as a
    graph deserialised or built from computed strings has it; :meth:`CseCase.build`)."""
    if which == "manual_seed":
        draws = []
        for _ in range(2):
            emit.call(torch.manual_seed, seed, keep=True)
            draws.append(emit.call(torch.rand_like, xs[0], keep=True))
        outputs = draws
    else:
        base = emit.op(aten.clone.default, ".clone", xs[0])
        emit.call(BUMPS[which], base, keep=True)
        emit.call(BUMPS[which], base, keep=True)
        outputs = [emit.op(aten.cos.default, "cos", base)]
    return outputs


def _attention_dropout(emit, xs, dropout_p, given):
    """aten only: ``_scaled_dot_product_attention_math(q, q, q, None, dropout_p)`` twice,
    ``dropout_p`` given by position, by keyword, or left out (its default, 0.0)."""
    q = emit.call(aten.unsqueeze.default, emit.call(aten.unsqueeze.default, xs[0], 0), 0)
    outs = []
    for _ in range(2):
        kwargs = {"dropout_p": dropout_p} if given == "keyword" else {}
        args = (q, q, q, None, dropout_p) if given == "position" else (q, q, q)
        pair = emit.call(aten._scaled_dot_product_attention_math.default, *args,
                         keep=_draws(dropout_p, given), **kwargs)
        outs.append(emit.call(operator.getitem, pair, 0))
    return [emit.call(aten.sub.Tensor, outs[0], outs[1])]


def _draws(dropout_p: float, given: str) -> bool:
    """Does an attention call draw? Only with a ``dropout_p`` given and not zero."""
    return given != "omitted" and dropout_p != 0


MAYBE_COPY = {"reshape": (aten.reshape.default, ([-1],)), "flatten": (aten.flatten.using_ints, ()),
              "contiguous": (aten.contiguous.default, ())}


def _unrecorded_values(emit, xs, transposed, op, writer, unrecorded):
    """aten only (``unrecorded`` names the nodes whose values are dropped: CseCase.traced)."""
    base = emit.call(aten.t.default, xs[0]) if transposed else xs[0]
    aten_op, args = MAYBE_COPY[op]
    first, second = emit.call(aten_op, base, *args), emit.call(aten_op, base, *args)
    emit.write(writer, first)
    return [emit.call(aten.cos.default, second)]


def _maybe_copy_twice(emit, xs, transposed, op, writer):
    """aten (static or symbolic sizes): ``first = op(y); second = op(y); first.<writer>();
    cos(second)`` with ``y`` the input (contiguous: each call is a view of it, or it
    itself, so the two are one value and are expected merged) or its transpose (each call
    copies: two storages, never merged, for the write to one is not seen by the other)."""
    base = emit.call(aten.t.default, xs[0]) if transposed else xs[0]
    aten_op, args = MAYBE_COPY[op]
    first, second = emit.call(aten_op, base, *args), emit.call(aten_op, base, *args)
    written = emit.write(writer, first)
    return [emit.call(aten.cos.default, second), emit.call(aten.neg.default, written)]


def _write_reads_twin(emit, xs, clone, pure, writer):
    """aten only: ``a = pure(x); b = pure(x); a.<writer>(b ...)``."""
    base = emit.base(xs[0], clone)
    a, b = emit.pure(pure, base), emit.pure(pure, base)
    if writer == "addmm_":
        written = emit.call(aten.addmm_.default, a, b, b, keep=True)
    else:
        written = emit.call(getattr(aten, writer).Tensor, a, b, keep=True)
    return [emit.call(aten.neg.default, written)]


#: Python's augmented assignments and item assignment, as symbolic_trace records them
PYTHON_WRITERS = {"iadd": operator.iadd, "isub": operator.isub, "imul": operator.imul,
                  "itruediv": operator.itruediv, "setitem": operator.setitem}


def _python_writes(emit, xs, writer, read, clone):
    """torch only: ``a = cos(t); x <op>= y`` (or ``x[0] = 2.0``) ``; b = cos(t)``, ``t`` the
    written ``x`` or the operand ``y``."""
    target = emit.base(xs[0], clone)
    t = target if read == "target" else xs[1]
    a = emit.pure("cos", t)
    if writer == "setitem":
        emit.call(operator.setitem, target, 0, 2.0, keep=True)
    else:
        emit.call(PYTHON_WRITERS[writer], target, xs[1], keep=True)
    b = emit.pure("cos", t)
    return [emit.call(operator.add, a, b), target]


def _fresh(text: str) -> str:
    """An equal string that is a new object (not the interned literal)."""
    return "".join(list(text))


def _distinct_equal_leaves(emit, xs, leaf):
    if leaf == "string":
        first, second = (emit.op(aten.gelu.default, "F.gelu", xs[0], approximate=_fresh("tanh"))
                         for _ in range(2))
    else:  # device: a new torch.device object each call
        first, second = (emit.op(aten.full.default, "full", [3, 3], 2.0, dtype=torch.float32,
                                 device=torch.device("cpu")) for _ in range(2))
    return [emit.op(aten.add.Tensor, "add", first, second)]


#: writers of a whole tensor that read nothing else: not elementwise (``tril_``, ``cumsum_``)
#: and elementwise (``mul_``)
WHOLE_WRITERS = {"tril_": (aten.tril_.default, ".tril_", ()),
                 "cumsum_": (aten.cumsum_.default, ".cumsum_", (0,)), "mul_": WRITERS["mul_"]}


def _dead_repeat(emit, xs, writer):
    """``a = full([3, 3], 2.0); a.<writer>(); b = full([3, 3], 2.0)``, ``b`` read by nothing;
    returns ``-a`` (so ``a``'s storage is not an output's)."""
    a = emit.op(aten.full.default, "full", [3, 3], 2.0)
    aten_op, torch_name, args = WHOLE_WRITERS[writer]
    written = emit.op(aten_op, torch_name, a, *args, keep=True)
    emit.op(aten.full.default, "full", [3, 3], 2.0)
    return [emit.op(aten.neg.default, "neg", written)]


#: fresh tensors made from ``x`` (the twins of :func:`_lifted_refusal`)
MAKERS = ("clone", *PURE)


def _lifted_refusal(emit, xs, maker, writer, pure, return_written):
    """``a = make(x); b = make(x); r = pure(b); a.<writer>(); s = pure(b)``: ``s`` repeats
    ``r`` (nothing writes ``b`` between them); once ``s`` is gone, every read of ``b`` comes
    before the write to ``a``, so ``b`` may become ``a`` too: 2 nodes removed (a CSE that
    refuses ``b`` while ``s`` still reads it must look again). Returns ``r + s`` and the
    written ``a`` (itself, or negated: ``a``'s storage escapes or not)."""
    a, b = (emit.base(xs[0], True) if maker == "clone" else emit.pure(maker, xs[0])
            for _ in range(2))
    r = emit.pure(pure, b)
    written = emit.write(writer, a)
    both = emit.op(aten.add.Tensor, "add", r, emit.pure(pure, b))
    return [both, written if return_written else emit.op(aten.neg.default, "neg", written)]


#: pairs of complex constants equal in their real part, different in their imaginary part
COMPLEX_PAIRS = ((2 + 1j, 2 + 3j), (1j, 2j), (-1 + 0.5j, -1 - 0.5j))


def _complex_constants(emit, xs, pair):
    """``x * c1 - x * c2`` (complex), the products not returned (so either may be merged)."""
    first, second = (emit.op(aten.mul.Tensor, "mul", xs[0], c) for c in pair)
    return [emit.op(aten.sub.Tensor, "sub", first, second)]


#: maybe-copy ops in both dialects: aten op, torch name, arguments
COPIES_AFTER_WRITES = {"reshape": (aten.reshape.default, ".reshape", ([-1],)),
                       "contiguous": (aten.contiguous.default, ".contiguous", ())}


def _many_writes(emit, xs, writes, op):
    """``y = clone(x); y.add_(1.0)`` ``writes`` times; ``r = op(y); s = op(y)``: every write
    comes before both, so ``s`` is ``r`` (1 merge); returns ``r + s``."""
    base = emit.base(xs[0], True)
    for _ in range(writes):
        emit.write("add_", base)
    aten_op, torch_name, args = COPIES_AFTER_WRITES[op]
    r, s = (emit.op(aten_op, torch_name, base, *args) for _ in range(2))
    return [emit.op(aten.add.Tensor, "add", r, s)]


@dataclass(frozen=True)
class Shape:
    """A shape: its builder, how many inputs, the dialects it is drawn in, its choices (one
    list per builder parameter after ``emit, xs``) and its by-hand merge count."""

    build: object
    inputs: int
    styles: tuple[str, ...]
    choices: tuple[tuple, ...]
    merges: object = lambda *choices: 0
    #: whether every node's ``op`` is an equal string that is not the interned literal
    fresh_ops: object = lambda *choices: False


_BOOL = (False, True)
SHAPES: dict[str, Shape] = {
    "list_view_write": Shape(_list_view_write, 1, ("aten", "torch"), (
        _BOOL, tuple(PURE), tuple(SPLITTERS), (0, 1), (0, 1), tuple(WRITERS), _BOOL)),
    "returned_write_of_view": Shape(_returned_write_of_view, 1, ("aten", "torch"), (
        _BOOL, tuple(VIEWS), tuple(WRITERS), _BOOL)),
    "opaque_alias": Shape(_opaque_alias, 3, ("aten", "torch"), (
        tuple(OPAQUE_ALIASES), _BOOL, ORDERS, tuple(WRITERS), tuple(PURE))),
    "view_chain_write": Shape(_view_chain_write, 1, ("aten", "torch"), (
        _BOOL, tuple(VIEWS), SECOND_VIEWS, tuple(WRITERS), tuple(PURE))),
    "views_after_write": Shape(_views_after_write, 1, ("aten", "torch"), (
        _BOOL, tuple(VIEWS), tuple(WRITERS), tuple(PURE)), merges=lambda *choices: 2),
    "unbacked_sizes": Shape(_unbacked_sizes, 1, ("symbolic",), (tuple(PURE),),
                            merges=lambda pure: 1),
    "lookalike_fills": Shape(_lookalike_fills, 0, ("aten", "torch"), (LOOKALIKE_FILLS,)),
    "reshaped_twin": Shape(_reshaped_twin, 1, ("aten", "torch"), (
        _BOOL, ("t", "transpose"), tuple(INPLACE_VIEWS), tuple(PURE))),
    "out_write": Shape(_out_write, 1, ("aten", "torch"), (_BOOL, tuple(OUT_OPS), tuple(PURE))),
    "keyword_arguments": Shape(_keyword_arguments, 1, ("aten",), (
        _BOOL, tuple(VIEWS), ("mul_", "add_"), tuple(PURE))),
    "opaque_functions": Shape(_opaque_functions, 1, ("torch",), (
        ("manual_seed", *BUMPS), (0, 7), _BOOL), fresh_ops=lambda which, seed, fresh: fresh),
    "python_writes": Shape(_python_writes, 2, ("torch",), (
        tuple(PYTHON_WRITERS), ("target", "other"), _BOOL),
        merges=lambda writer, read, clone: 1 if read == "other" else 0),
    "attention_dropout": Shape(_attention_dropout, 1, ("aten",), (
        (0.0, 0.5, 0, -0.0, 0.25), ("position", "keyword", "omitted")),
        merges=lambda p, given: 0 if _draws(p, given) else 2),
    "unrecorded_values": Shape(_unrecorded_values, 1, ("aten",), (
        _BOOL, tuple(MAYBE_COPY), tuple(WRITERS),
        (("x0",), ("t_default",), ("x0", "t_default")))),
    "maybe_copy_twice": Shape(_maybe_copy_twice, 1, ("aten", "symbolic"), (
        _BOOL, tuple(MAYBE_COPY), tuple(WRITERS)),
        merges=lambda transposed, op, writer: 0 if transposed else 1),
    "write_reads_twin": Shape(_write_reads_twin, 1, ("aten",), (
        _BOOL, tuple(PURE), ("add_", "mul_", "sub_", "addmm_")),
        merges=lambda clone, pure, writer: 0 if writer == "addmm_" else 1),
    "distinct_equal_leaves": Shape(_distinct_equal_leaves, 1, ("aten", "torch"), (
        ("string", "device"),), merges=lambda leaf: 1),
    "complex_constants": Shape(_complex_constants, 1, ("aten", "torch"), (COMPLEX_PAIRS,)),
    "dead_repeat": Shape(_dead_repeat, 0, ("aten", "torch"), (tuple(WHOLE_WRITERS),),
                         merges=lambda writer: 1),
    "lifted_refusal": Shape(_lifted_refusal, 1, ("aten", "torch"), (
        MAKERS, tuple(WRITERS), tuple(PURE), _BOOL), merges=lambda *choices: 2),
    "many_writes": Shape(_many_writes, 1, ("aten", "torch"), (
        (2, 300), tuple(COPIES_AFTER_WRITES)), merges=lambda *choices: 1),
}


@st.composite
def cse_cases(draw, shapes: tuple[str, ...] = tuple(SHAPES)) -> CseCase:
    """Cases of the given shapes (module docstring)."""
    unknown = set(shapes) - set(SHAPES)
    if not shapes or unknown:
        raise ValueError(f"shapes={shapes!r}: each must be one of {tuple(SHAPES)}")
    shape = draw(st.sampled_from(shapes))
    style = draw(st.sampled_from(SHAPES[shape].styles))
    choices = tuple(draw(st.sampled_from(options)) for options in SHAPES[shape].choices)
    if shape == "unrecorded_values" and not choices[0]:  # no t node to leave unrecorded
        choices = (*choices[:-1], ("x0",))
    return CseCase(shape, style, choices, draw(st.booleans()))


# --- malformed graphs: what a CSE must refuse (the caller's graph is wrong) ---

#: how a valid graph is broken: a reader moved before its input, an input made to read its
#: reader (a cycle), or a reader made to read a node of another graph (each a KeyError in
#: torch's pass); or a reader moved after the output node (``output_not_last``, drawn apart:
#: :func:`misplaced_outputs`).
CORRUPTIONS = ("reorder", "cycle", "long_cycle", "foreign")
#: aten shapes whose graphs hold a computed value read by another (what each corruption needs)
CORRUPTIBLE = ("list_view_write", "write_reads_twin", "keyword_arguments")


@dataclass(frozen=True)
class MalformedCase:
    """A traced :class:`CseCase` broken by ``corruption`` at the ``pick``-th (reader, computed
    input) pair of its graph, counted modulo their number."""

    case: CseCase
    corruption: str
    pick: int

    def graph(self) -> fx.Graph:
        return self.broken()[0]

    def offence(self) -> tuple[str, str]:
        """The names of the node that reads wrongly and of the node it reads: the moved reader
        and its input (``reorder``), the input and the reader it now reads (``cycle``), the
        reader and the other graph's placeholder (``foreign``)."""
        return self.broken()[1:]

    def broken(self) -> tuple[fx.Graph, str, str]:
        """The broken graph, and :meth:`offence`.

        A cycle: the source reads its reader (a loop of two nodes), or (``long_cycle``) a
        node that reads it only through others (a loop of three or more). An output not
        last: a computed node, or a placeholder (``input_after_output``), moved after it."""
        graph = self.case.traced().graph
        pairs = [(node, source) for node in graph.nodes if node.op == "call_function"
                 for source in node.all_input_nodes
                 if source.op == "call_function" and source.all_input_nodes]
        reader, source = pairs[self.pick % len(pairs)]
        if self.corruption == "reorder":
            source.prepend(reader)
            return graph, reader.name, source.name
        if self.corruption in ("cycle", "long_cycle"):
            far = [(_indirect_reader(s), s) for _, s in pairs if _indirect_reader(s)]
            if self.corruption == "long_cycle" and far:
                reader, source = far[self.pick % len(far)]
            source.replace_input_with(source.all_input_nodes[0], reader)
            return graph, source.name, reader.name
        output = next(n for n in graph.nodes if n.op == "output")
        if self.corruption == "input_after_output":
            placeholders = [n for n in graph.nodes if n.op == "placeholder"]
            moved = placeholders[self.pick % len(placeholders)]
            output.append(moved)
            return graph, moved.name, output.name
        if self.corruption == "output_not_last":
            output.append(reader)
            return graph, reader.name, output.name
        other = fx.Graph().placeholder("elsewhere")
        other.meta["val"] = source.meta["val"]
        reader.replace_input_with(source, other)
        return graph, reader.name, other.name


def _indirect_reader(source: fx.Node) -> fx.Node | None:
    """The last computed node (in graph order) that reads ``source`` only through other
    nodes; None if there is none."""
    direct = {user for user in source.users if user.op == "call_function"}
    reached, frontier = set(direct), list(direct)
    while frontier:
        users = [u for u in frontier.pop().users if u.op == "call_function" and u not in reached]
        reached.update(users)
        frontier += users
    indirect = [n for n in source.graph.nodes if n in reached - direct]
    return indirect[-1] if indirect else None


@st.composite
def malformed_graphs(draw) -> MalformedCase:
    """A valid aten case of a :data:`CORRUPTIBLE` shape, broken one of the CORRUPTIONS ways."""
    case = draw(cse_cases(CORRUPTIBLE).filter(lambda c: c.style == "aten"))
    return MalformedCase(case, draw(st.sampled_from(CORRUPTIONS)), draw(st.integers(0, 7)))


@st.composite
def misplaced_outputs(draw) -> MalformedCase:
    """A valid aten case of a :data:`CORRUPTIBLE` shape with a node (computed, or a
    placeholder) moved after its output."""
    case = draw(cse_cases(CORRUPTIBLE).filter(lambda c: c.style == "aten"))
    corruption = draw(st.sampled_from(("output_not_last", "input_after_output")))
    return MalformedCase(case, corruption, draw(st.integers(0, 7)))
