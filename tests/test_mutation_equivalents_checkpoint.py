"""Checkpoint mutants that survived the mutation run and compute what the original computes.

benchmarks/mutation_score.py counts a survivor as equivalent only where its ``EQUIVALENT``
entry names a test that demonstrates the equivalence; these are those tests, for survivors of
the first runs of seeds 731252159 and 146862235 (keys ``path:line operator occurrence`` on
the tree each run measured). Each test shows both versions agree on every input the code
can receive, and shows, by running the checkpoint, that it receives no other (or that the
code never uses what the mutant changes).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import itertools
import sys

import pytest
import torch
from torch import nn

from refimpl.checkpointing import CheckpointError, checkpoint, options, replay, versions, wrapper
from refimpl.checkpointing import frame as frame_module
from refimpl.checkpointing.frame import Frame
from tests.frozen_uses import recording

#: frame.py:177 ``len(recomputed) != len(self.metadata)`` -> ``<``
SAVE_COUNTS = range(0, 300)


class SavesMoreWhenRecomputed(nn.Module):
    """Saves ``extra`` more tensors (sines) when called inside a backward; with ``extra`` < 0,
    fewer (the product alone)."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 3))
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        again = torch._C._current_graph_task_id() != -1
        h = x * self.w
        if again and self.extra < 0:  # fewer: the product alone
            return h
        h = h.sin().sin()
        for _ in range(self.extra if again else 0):
            h = h.sin()
        return h


def test_count_check_sees_at_most_the_forwards_count(monkeypatch) -> None:
    """frame.py:177 (``!=`` to ``<``): ``Frame._check`` compares the number of tensors the
    recomputation saved with the forward's. ``recompute_pack`` raises as soon as a
    recomputation saves one more than the forward (while checks are on, the only time
    ``_check`` runs), so ``_check`` never sees more; on every count it can see (recomputed
    <= forward), ``!=`` and ``<`` agree."""
    for recomputed, forward in itertools.product(SAVE_COUNTS, SAVE_COUNTS):
        if recomputed <= forward:
            assert (recomputed != forward) == (recomputed < forward)
    seen: list[tuple[int, int]] = []
    original = Frame._check

    def recording(self, recomputed):
        seen.append((len(recomputed), len(self.metadata)))
        return original(self, recomputed)

    monkeypatch.setattr(Frame, "_check", recording)
    outcomes = []
    for extra, early_stop, debug in itertools.product((-1, 0, 1, 3), (True, False),
                                                      (True, False)):
        m = checkpoint(SavesMoreWhenRecomputed(extra), early_stop=early_stop, debug=debug)
        out = m(torch.ones(2, 3, requires_grad=True)).sum()
        try:
            out.backward()
            outcomes.append("ok")
        except CheckpointError as error:
            outcomes.append("more" if "more tensors" in str(error) else "other")
    assert seen and all(r <= f for r, f in seen), seen
    assert "more" in outcomes and "other" in outcomes and "ok" in outcomes, outcomes


@pytest.mark.parametrize("preserve", [True, False])
def test_replay_state_is_never_changed_nor_hashed(monkeypatch, preserve: bool) -> None:
    """replay.py:29 and replay.py:39 (``frozen=True`` to ``frozen=False`` on ``Autocast`` and
    ``GlobalState``): ``frozen`` changes only attribute assignment and deletion after
    ``__init__`` (they raise) and ``__hash__`` (generated; without it the class is
    unhashable). The checkpoint never does any of the three to these objects: with recording
    subclasses in their place, a forward and a backward under CPU autocast, nested
    checkpoints, dropout, with and without ``preserve_rng_state``, record nothing; the
    objects are the frame's private data and never leave it."""
    calls: list[str] = []
    monkeypatch.setattr(replay, "Autocast", recording(replay.Autocast, calls))
    monkeypatch.setattr(replay, "GlobalState", recording(replay.GlobalState, calls))
    inner = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.GELU())
    model = nn.Sequential(inner, nn.Linear(3, 3))
    checkpoint(inner, preserve_rng_state=preserve)
    checkpoint(model, preserve_rng_state=preserve)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.ones(2, 3, requires_grad=True)).float().sum()
    out.backward()
    assert model[1].weight.grad is not None
    assert calls == []
    captured = replay.capture((torch.ones(1),), preserve)
    assert type(captured).__name__ == "Recording" and calls == []


def _mutant(module, old: str, new: str, line: int):
    """``module`` rebuilt from its source with ``old`` replaced by ``new`` on ``line`` (one
    occurrence), under a name of its own: the mutant, next to the original."""
    source = inspect.getsource(module).splitlines(keepends=True)
    assert source[line - 1].count(old) == 1, source[line - 1]
    source[line - 1] = source[line - 1].replace(old, new)
    name = f"{module.__name__}_mutant_{line}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mutant = importlib.util.module_from_spec(spec)
    sys.modules[name] = mutant
    try:
        exec(compile("".join(source), module.__file__, "exec"), mutant.__dict__)
    finally:
        del sys.modules[name]
    return mutant


#: the ops a :class:`Program` chains
PROGRAM_OPS = {"sin": torch.sin, "exp": torch.exp, "double": lambda h: h.double(),
               "square": torch.square}


class Program(nn.Module):
    """A drawn chain of ops on ``x * w``; ``extra`` more sines (or, with ``extra`` < 0, the
    product alone) when called inside a backward; ``tail_runs`` counts completed calls."""

    def __init__(self, ops: tuple[str, ...], extra: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 3))
        self.ops, self.extra, self.tail_runs = ops, extra, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        again = torch._C._current_graph_task_id() != -1
        h = x * self.w
        if again and self.extra < 0:
            return h
        for name in self.ops:
            h = PROGRAM_OPS[name](h)
        for _ in range(self.extra if again else 0):
            h = h.sin()
        self.tail_runs += 1
        return h


def _outcome(ops: tuple[str, ...], extra: int, **kwargs) -> tuple:
    """What a checkpointed step of :class:`Program` gives: the error's type and first line,
    or the gradients; and the completed runs."""
    module = Program(ops, extra)
    model = checkpoint(module, **kwargs)
    x = torch.linspace(-1.0, 1.0, 6).reshape(2, 3).requires_grad_()
    try:
        model(x).sum().backward()
    except Exception as error:  # the outcome compared between both versions
        return type(error).__name__, str(error).splitlines()[0], module.tail_runs
    return module.w.grad.tolist(), x.grad.tolist(), module.tail_runs


#: frame.py:169 ``==`` to ``>=``: programs (ops, extra saves) and option combinations
PROGRAMS = [(ops, extra) for ops in [(), ("sin",), ("exp", "double", "square")]
            for extra in (-1, 0, 1, 3)] + [(("sin",) * 257, extra) for extra in (-1, 1)]
OPTION_SETS = [dict(early_stop=e, determinism_check=c, debug=d)
               for e, c, d in itertools.product((True, False), ("default", "none"),
                                                (True, False))]


def test_early_stop_count_reaches_the_holders_count_only_by_equality(monkeypatch) -> None:
    """frame.py:169 (``len(seen) == len(self.holders)`` to ``>=``): the test runs after line
    160, which returns or raises whenever ``index >= len(self.holders)``, so there
    ``len(seen) = index + 1 <= len(self.holders)``, where ``>=`` and ``==`` agree (shown on
    every pair up to 300). Both versions, run on programs that save fewer, as many and more
    tensors in the recomputation (two past 256 saves), under every combination of early stop,
    determinism check and debug, give the same gradients, errors and runs."""
    for index, holders in itertools.product(range(300), range(300)):
        if index < holders:
            assert (index + 1 >= holders) == (index + 1 == holders)
    mutant = _mutant(frame_module, "len(seen) == len(self.holders)",
                     "len(seen) >= len(self.holders)", 169)
    short, long = PROGRAMS[:12], PROGRAMS[12:]
    without_debug = [k for k in OPTION_SETS if not k["debug"]]
    for (ops, extra), kwargs in [*itertools.product(short, OPTION_SETS),
                                 *itertools.product(long, without_debug)]:
        original = _outcome(ops, extra, **kwargs)
        monkeypatch.setattr(wrapper, "Frame", mutant.Frame)
        mutated = _outcome(ops, extra, **kwargs)
        monkeypatch.setattr(wrapper, "Frame", Frame)
        assert mutated == original, (ops, extra, kwargs)


def test_input_saver_backward_is_the_same_function_either_way(monkeypatch) -> None:
    """frame.py:66 (``@staticmethod`` removed from ``_SaveInputs.backward``): autograd calls a
    Function's backward through its class (``ctx._forward_cls.backward(ctx, *grads)``), and a
    function read from a class is the plain function, staticmethod or not: both versions'
    ``backward`` is the same code, the only one autograd uses. The checkpoint never
    differentiates the saver's output anyway: both versions give the same outcomes on the
    programs and options of the test above."""
    original_class = frame_module._SaveInputs
    source = inspect.getsource(original_class)
    mutated_source = source.replace("    @staticmethod\n    def backward", "    def backward")
    assert mutated_source.count("@staticmethod") == source.count("@staticmethod") - 1
    namespace = dict(frame_module.__dict__)
    exec(compile(mutated_source, frame_module.__file__, "exec"), namespace)
    mutant_class = namespace["_SaveInputs"]
    assert inspect.isfunction(mutant_class.backward)
    assert inspect.isfunction(original_class.backward)
    assert mutant_class.backward.__code__.co_code == original_class.backward.__code__.co_code
    for (ops, extra), kwargs in itertools.product(PROGRAMS[:12], OPTION_SETS[:4]):
        original = _outcome(ops, extra, **kwargs)
        monkeypatch.setattr(frame_module, "_SaveInputs", mutant_class)
        mutated = _outcome(ops, extra, **kwargs)
        monkeypatch.setattr(frame_module, "_SaveInputs", original_class)
        assert mutated == original, (ops, extra, kwargs)


def _changing_step(preserve: bool) -> None:
    """A step that exercises every use of the options and the version reads: nested
    checkpoints with every option set, dropout, an input changed during the forward (a
    batchnorm's buffers) and a parameter changed after it (the version check raises)."""
    inner = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.BatchNorm1d(3))
    model = nn.Sequential(inner, nn.Linear(3, 3))
    checkpoint(inner, preserve_rng_state=preserve, early_stop=False, debug=True)
    checkpoint(model, preserve_rng_state=preserve, determinism_check="none",
               context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()))
    out = model(torch.ones(4, 3, requires_grad=True)).sum()
    out.backward(retain_graph=True)
    with torch.no_grad():
        model[1].weight.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    assert checkpoint.state(inner).options.debug and model[1].weight.grad is not None


@pytest.mark.parametrize("preserve", [True, False])
def test_options_and_reads_are_never_changed_nor_hashed(monkeypatch, preserve: bool) -> None:
    """options.py:57 and versions.py:39 (``frozen=True`` to ``frozen=False`` on
    ``CheckpointOptions`` and ``Read``): as for the replay state above, ``frozen`` changes
    only assignment and deletion after ``__init__`` and the generated ``__hash__``. With
    recording subclasses in their place, a step that uses every option and every version
    read (nested checkpoints, every option set, buffers written in the forward, a parameter
    changed before a second backward) records none of the three."""
    calls: list[str] = []
    recording_options = recording(options.CheckpointOptions, calls)
    monkeypatch.setattr(wrapper, "CheckpointOptions", recording_options)
    monkeypatch.setattr(versions, "Read", recording(versions.Read, calls))
    _changing_step(preserve)
    probe = checkpoint(nn.Linear(1, 1))
    assert type(checkpoint.state(probe).options) is recording_options
    assert type(versions.Reads.of(probe, (torch.ones(1),), {}).reads[0]).__name__ == "Recording"
    assert calls == []


def test_global_state_is_always_built_with_every_field(monkeypatch) -> None:
    """replay.py:46 (``cuda_was_initialized: bool = False`` to ``= True``): the default is used
    only by a ``GlobalState(...)`` call that leaves the field out. The module's every such
    call passes all four fields (its syntax tree), and at run time, under both
    ``preserve_rng_state`` values and nested checkpoints, every construction passes four
    arguments: the default is never read."""
    tree = ast.parse(inspect.getsource(replay))
    builds = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and getattr(node.func, "id", None) == "GlobalState"]
    assert builds and all(len(b.args) + len(b.keywords) == 4 for b in builds)
    counts: list[int] = []

    class Counting(replay.GlobalState):
        def __init__(self, *args, **kwargs):
            counts.append(len(args) + len(kwargs))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(replay, "GlobalState", Counting)
    for preserve in (True, False):
        _changing_step(preserve)
    assert counts and set(counts) == {4}


def test_the_graph_task_id_outside_a_backward_is_the_cached_minus_one(monkeypatch) -> None:
    """frame.py:78 (``gid == -1`` to ``gid is -1``): ``gid`` is what
    ``torch._C._current_graph_task_id()`` returns, an int made from a C integer; CPython
    hands out one shared object for every int from -5 to 256, so an int equal to -1 is
    that object and ``is`` agrees with ``==``. Shown where the id is read: outside a
    backward (-1: ``is -1`` too) and inside one (a task id: neither), and through
    ``_graph_task_id`` itself, which mints a fresh id outside a backward only."""
    seen: list[int] = []
    outside = torch._C._current_graph_task_id()
    x = torch.ones(2, requires_grad=True)
    x.register_hook(lambda g: seen.append(torch._C._current_graph_task_id()) or g)
    (x * 2).sum().backward()
    minus_one = int("-1")  # made at run time, not a literal: the cached object all the same
    for gid in (outside, *seen):
        assert type(gid) is int and (gid == -1) == (gid is minus_one)
    assert outside == -1 and seen and seen[0] != -1
    assert frame_module._graph_task_id() != frame_module._graph_task_id()  # fresh each time


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))


class _LtToNotEq(ast.NodeTransformer):
    """Every ``<`` in ``explain`` made ``!=`` (debug.py:61 and :62, Lt_NotEq)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        if node.name == "explain":
            for compare in ast.walk(node):
                if isinstance(compare, ast.Compare):
                    self.replaced += sum(isinstance(op, ast.Lt) for op in compare.ops)
                    compare.ops = [ast.NotEq() if isinstance(op, ast.Lt) else op
                                   for op in compare.ops]
        return node

    replaced = 0


def test_the_report_index_is_never_past_either_log() -> None:
    """debug.py:61 and :62 (``i < len(fwd)``, ``i < len(rec)`` to ``!=``): the index
    ``first_difference`` returns is at most the shorter log's length, so ``<`` and ``!=``
    agree on it. Shown on every pair of op logs of up to 4 ops over two names (every
    prefix, extension and replacement), the mutated ``explain`` (compiled from the module's
    own source) giving the same report."""
    from refimpl.checkpointing import debug

    mutation = _LtToNotEq()
    tree = mutation.visit(ast.parse(inspect.getsource(debug)))
    assert mutation.replaced == 2, mutation.replaced  # the two comparisons of lines 61, 62
    mutated: dict = {}
    exec(compile(ast.fix_missing_locations(tree), debug.__file__, "exec"), mutated)
    logs = [list(ops) for n in range(5) for ops in itertools.product(("aten.a", "aten.b"),
                                                                      repeat=n)]
    for fwd, rec in itertools.product(logs, logs):
        i = debug.first_difference(fwd, rec)
        assert i is None or i <= min(len(fwd), len(rec))
        pair = debug.OpLogs(fwd, rec)
        assert mutated["explain"](pair) == debug.explain(pair), (fwd, rec)
