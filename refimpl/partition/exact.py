"""The exact solver: the optimum of docs/design.md's partition problem, as a 0/1 integer programme.

Method: mixed-integer linear programming, solved by ``scipy.optimize.milp`` (HiGHS: presolve,
then branch and cut, run to a zero optimality gap). Why this method: the problem is a
*closure* problem (what is recomputed must have its inputs saved or recomputed) with one
knapsack constraint (the byte bound); one storage is counted once (views share their base's).
Without the bound it is a minimum cut; with it, a Lagrangian or parametric min-cut is exact
only at the corners of the convex hull, and a knapsack over pre-chosen items (torch's
formulation) cannot see that saving a small value spares recomputing the expensive one it is
computed from. An integer programme states the problem exactly as written below, a reader can
check each row against the definition, and HiGHS proves optimality (or says it could not).

Formulation, over the forward-side nodes ``N`` the backward needs
(``cut.needed_by_backward``; primals are always available and cost nothing, so they get no
variable). A view of a savable activation is never saved itself (its base is, at the same
bytes, and the view is recomputed for free; ``mincut.saves_itself`` is that rule), so no
two savable values share a storage and bytes add up:

    a_v ∈ [0,1]  v is available in the backward (saved or recomputed)
    r_v ∈ [0,1]  v is recomputed in the backward; integral where c_v > 0
    (saved: s_v = a_v − r_v)

    minimise    Σ_v c_v · r_v        c_v = runtime(v) if the forward outputs need v, else 0
    subject to  a_v − r_v  ≥ 0       (= 0 where v may not be saved: tuples, marked recompute)
                a_u − r_v  ≥ 0       u → v an edge, u and v in N (a recomputed node's inputs)
                a_v        = 1       v read directly by the backward
                r_v        = 0       v banned (random, mutating, must-save)
                Σ_v bytes(v) · (a_v − r_v) ≤ bound

then a second programme, with ``Σ c_v r_v ≤ optimum`` added, minimises the bytes: among the
optimal plans, the least memory (the plan torch's seeds expect). Last, a minimum cut
(:func:`refimpl.partition.mincut.save_set`) with the costly nodes the programme does not
recompute banned turns the solution into a saved set.

Why only the costly nodes are integral: once the ``r_v`` with ``c_v > 0`` are fixed to 0/1,
every remaining row is a difference of two variables or a bound, a totally unimodular system
with integral right-hand sides, and the objective no longer depends on the continuous part;
the least bytes over that polytope (a minimum cut) is attained at an integral point. So the
programme with the other variables continuous has the same optimum as the pure 0/1 one,
and HiGHS branches only on the few costly nodes (matmuls, attention, convolutions): on a
192-block transformer's joint graph (31k nodes, 1.2k costly) both solves take seconds.

Invariant: the final cut recomputes only nodes the programme allowed (cost <= optimum) and
is a minimum cut for them (bytes <= the programme's bytes <= bound); so it is optimal in cost
and, among optimal plans, in bytes. Conversely every valid plan is a feasible solution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from refimpl.partition.cut import Cut, cut_of, needed_by_backward
from refimpl.partition.errors import InfeasibleBudget, PartitionError, SolverTimeLimit
from refimpl.partition.graph import JointGraph
from refimpl.partition.mincut import save_set, saves_itself
from refimpl.partition.options import PartitionOptions
from refimpl.partition.problem import Problem


@dataclass
class Programme:
    """The integer programme over ``names``: column i is a_v, column n + i is r_v;
    ``rows[k]`` is ``{column: coefficient}`` with ``lower[k] <= row <= upper[k]``."""

    names: list[str]
    costs: list[float]  # c_v
    sizes: list[int]  # bytes(v) where v may be saved, else 0
    rows: list[dict[int, float]]
    lower: list[float]
    upper: list[float]
    a_lower: list[int]  # 1 where the backward reads v directly
    r_upper: list[int]  # 0 where v is banned


def build(graph: JointGraph, banned: set[str], unsavable: set[str]) -> Programme:
    """The rows of the module docstring for ``graph``."""

    needed = needed_by_backward(graph)
    nodes = [n for n in graph.forward_side() if n.name in needed and n.role == "forward"]
    col = {n.name: i for i, n in enumerate(nodes)}
    n = len(nodes)
    savable = [saves_itself(graph, v, banned, unsavable) for v in nodes]
    rows, lower, upper = [], [], []
    for i, v in enumerate(nodes):
        rows.append({i: 1.0, n + i: -1.0})  # a_v - r_v in [0, 1] or [0, 0]
        lower.append(0.0)
        upper.append(1.0 if savable[i] else 0.0)
        for u in dict.fromkeys(v.inputs):
            if u in col:  # a_u - r_v >= 0; inputs outside N are primals
                rows.append({col[u]: 1.0, n + i: -1.0})
                lower.append(0.0)
                upper.append(1.0)
    reads = set(graph.read_by_backward())
    return Programme(
        names=[v.name for v in nodes],
        costs=[v.runtime if v.fw_required else 0.0 for v in nodes],
        sizes=[v.bytes if ok else 0 for v, ok in zip(nodes, savable)],
        rows=rows, lower=lower, upper=upper,
        a_lower=[1 if v.name in reads else 0 for v in nodes],
        r_upper=[0 if v.name in banned else 1 for v in nodes])


def solve(problem: Problem, options: PartitionOptions) -> Cut:
    """An optimal plan within ``problem.bound`` bytes (least bytes among optima).

    Raises :class:`InfeasibleBudget` when no plan fits and :class:`SolverTimeLimit` when
    HiGHS does not prove the optimum within ``options.solver_time_limit`` seconds."""
    graph, banned, unsavable = problem.graph, problem.bans.hard, problem.bans.unsavable
    return cut_of(graph, optimal_saves(graph, problem.bound, banned, unsavable,
                                       options.solver_time_limit))


def optimal_saves(graph: JointGraph, bound: int, banned: set[str], unsavable: set[str],
                  time_limit: float) -> set[str]:
    """The saved set of :func:`solve`'s plan (the two MILPs of the module docstring)."""
    problem = build(graph, banned, unsavable)
    n = len(problem.names)
    if n == 0:
        return set()
    costs = [0.0] * n + problem.costs
    memory = [float(b) for b in problem.sizes] + [-float(b) for b in problem.sizes]
    first = _milp(problem, costs, [(memory, bound)], time_limit)
    optimum = sum(c * x for c, x in zip(costs, first))
    keep = optimum + 1e-9 * max(1.0, abs(optimum))
    second = _milp(problem, memory, [(memory, bound), (costs, keep)], time_limit)
    allowed = {name for i, name in enumerate(problem.names) if second[n + i] > 0.5}
    costly = {name for name, c in zip(problem.names, problem.costs) if c > 0}
    return set(save_set(graph, banned | (costly - allowed), unsavable))


def _milp(problem: Programme, objective: list[float], caps: list[tuple[list[float], float]],
          time_limit: float) -> list[float]:
    """One HiGHS solve: minimise ``objective`` over the rows, with each ``(row, cap)`` of
    ``caps`` as ``row · x <= cap``; the solution vector."""

    n = len(problem.names)
    data, ri, ci = [], [], []
    for k, row in enumerate(problem.rows):
        for c, a in row.items():
            ri.append(k)
            ci.append(c)
            data.append(a)
    matrix = coo_matrix((data, (ri, ci)), shape=(len(problem.rows), 2 * n)).tocsr()
    constraints = [LinearConstraint(matrix, np.array(problem.lower), np.array(problem.upper))]
    constraints += [LinearConstraint(np.array([row]), -np.inf, cap) for row, cap in caps]
    bounds = Bounds(np.array(problem.a_lower + [0] * n, dtype=float),
                    np.array([1] * n + problem.r_upper, dtype=float))
    integral = np.array([0] * n + [1 if c > 0 else 0 for c in problem.costs])
    result = milp(np.array(objective), constraints=constraints, bounds=bounds,
                  integrality=integral,
                  options={"time_limit": time_limit, "mip_rel_gap": 0.0})
    if result.status == 1:
        raise SolverTimeLimit(
            f"solver='exact' did not prove the optimum within solver_time_limit="
            f"{time_limit}s ({n} nodes); raise PartitionOptions.solver_time_limit, or pick "
            "a heuristic solver ('dp', 'greedy', 'ilp')")
    if result.status == 2:
        raise InfeasibleBudget(
            f"no plan fits the bound of {caps[0][1]:.0f} bytes: the bans (random, "
            "mutating, must-save ops) keep more alive; raise memory_budget")
    if result.status != 0 or result.x is None:
        raise PartitionError(f"solver='exact': HiGHS failed ({result.message})")
    return list(result.x)
