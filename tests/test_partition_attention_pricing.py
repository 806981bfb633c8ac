"""The brute force prices recomputing attention on CPU, and its reference backward does not
count a dead attention as recompute (refimpl/expect/partition_brute.py).

torch's FLOP table has no entry for ``_scaled_dot_product_flash_attention_for_cpu``, the op
``scaled_dot_product_attention`` runs on CPU (docs/findings.md); priced by the table alone,
recomputing attention looked free, and the recompute property failed refimpl's exact solver
for keeping the attention's outputs rather than two convolutions' (the dev profile's
example, kept as an ``@example`` of
``test_partition_recomputes_the_least_within_the_bound``). The figures below are written
from the definition: attention over ``s`` rows of width ``d`` is two ``s x s x d`` matmuls
forward (``2 x 2 s^2 d`` FLOPs) and five backward (``5 x 2 s^2 d``: the scores again,
``dV``, ``dP``, ``dQ``, ``dK``); a 1-d convolution with one channel and a 3-tap kernel over
``n`` positions is ``2 x 3 n`` FLOPs forward and twice that backward (input and weight
gradients).
"""

from __future__ import annotations

import pytest

from refimpl.expect.partition_brute import ReferenceRun, trace_reference
from refimpl.expect.partition_expect import Expected
from refimpl.strategies.programs import ProgramSpec, Step

ROWS = 5  # s = n: attention runs over the batch rows; d = width = 1


def attention_program() -> ProgramSpec:
    """``cos(conv1d(x)) + cos(sdpa(x, x, x))`` over a ``(5, 1)`` input."""
    steps = (Step("conv", "conv1d", (0,), 1), Step("pointwise", "cos", (1,), 1),
             Step("attention", "sdpa", (0,), 1), Step("pointwise", "cos", (3,), 1))
    return ProgramSpec(ROWS, 1, steps, (2, 4))


@pytest.fixture(scope="module")
def run() -> ReferenceRun:
    spec = attention_program()
    return trace_reference(spec.make(), spec.inputs(0))


def test_the_brute_force_prices_cpu_attention_by_its_matmuls(run):
    priced = {n.name: n.flops for n in run.problem.nodes if n.flops}
    attention = 2 * 2 * ROWS * ROWS * 1
    convolution = 2 * 3 * ROWS
    assert priced == {"convolution": convolution,
                      "_scaled_dot_product_flash_attention_for_cpu": attention}, priced
    # the fewest bytes recompute both; saving the convolution's output spares its FLOPs,
    # saving the attention's output and logsumexp (two 20-byte storages) spares its own
    frontier = Expected.of(run).frontier
    assert [(o.bytes, o.flops) for o in frontier] == [
        (0, attention + convolution), (20, attention), (40, convolution), (60, 0)], frontier


def test_the_reference_backward_runs_no_dead_attention(run):
    """default_partition leaves a dead copy of the forward attention in the backward graph;
    the reference drops it, so its backward FLOPs are the backward's own work only."""
    attention_backward = 5 * 2 * ROWS * ROWS * 1
    convolution_backward = 2 * 2 * 3 * ROWS
    assert run.backward_flops == attention_backward + convolution_backward
