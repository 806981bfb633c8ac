"""The memory-budget partitioner: the plain joint graph, its cuts, the solvers.

| module         | one job |
| -------------- | ------- |
| options.py     | ``PartitionOptions``: the one frozen options object (budget, solver, cse, ...) |
| graph.py       | ``JointGraph``, ``JointNode``: the joint graph as plain data |
| errors.py      | the partitioner's errors, each naming the option to change |
| cost.py        | bytes per value; runtime per node by the FLOP table |
| runtime.py     | the runtime estimators: FLOPs, or timing each node (``profile``) |
| cut.py         | ``Cut``: what a saved set makes the backward read and recompute |
| mutation.py    | which inputs a graph writes in place (no recompute may read them) |
| region.py      | region budgets (``region_activation_memory_budget``): the budget a graph gets |
| candidates.py  | bans (never recompute / never save, checkpoint policies), knapsack items |
| problem.py     | ``Problem``: what every solver takes (graph, bans, byte bound) |
| mincut.py      | the flow network and Dinic's max-flow / min-cut |
| exact.py       | the default solver: the optimum, as an integer programme (HiGHS) |
| exhaustive.py  | ``solver="brute"``: every save-set, small graphs |
| knapsack.py    | torch's knapsack formulation on plain lists: ``solver`` dp, ilp, greedy |
| partitioner.py | budget semantics: min and max plans, the solver in between -> ``Plan`` |
| plan.py        | ``Plan``: saved, recomputed, bytes, recompute cost |
| fx_edge.py     | the FX edge: joint GraphModule -> ``JointGraph``, CSE stage, ``partition_fn`` |
| backend.py     | the dynamo backend ``"refimpl"`` |
| api.py         | ``compile``, ``explain``, ``explain_many``, ``memory_efficient_fusion`` |

Imports go one way: api -> backend -> fx_edge -> partitioner -> solvers -> graph.
"""
