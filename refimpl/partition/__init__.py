"""The memory-budget partitioner: the plain joint graph, its cuts, the exact solver.

| module         | one job |
| -------------- | ------- |
| options.py     | ``PartitionOptions``: the one frozen options object (budget, solver, cse, ...) |
| graph.py       | ``JointGraph``, ``JointNode``: the joint graph as plain data |
| errors.py      | the partitioner's errors, each naming the option to change |
| cost.py        | bytes per value; runtime per node by the FLOP table |
| runtime.py     | the runtime estimators: FLOPs, or timing each node (``profile``) |
| cut.py         | ``Cut``: what a saved set makes the backward read and recompute |
| candidates.py  | bans (never recompute / never save, checkpoint policies), knapsack items |
| exact.py       | the default solver: the optimum, as an integer programme (HiGHS) |
| exhaustive.py  | ``solver="brute"``: every save-set, small graphs |
| knapsack.py    | torch's knapsack formulation on plain lists: dp, ilp, greedy, brute |
| mincut.py      | the flow network and Dinic's max-flow / min-cut |
| partitioner.py | budget semantics: min and max plans, the solver in between -> ``Plan`` |
| plan.py        | ``Plan``: saved, recomputed, bytes, recompute cost |
| fx_edge.py     | the FX edge: joint GraphModule -> ``JointGraph``, CSE stage, ``partition_fn`` |
| trace.py       | former home of the FX glue (re-exports) |
| api.py         | ``compile``, ``explain``, ``explain_many``, ``memory_efficient_fusion`` |
| backend.py     | the dynamo backend ``"refimpl"`` |

Imports go one way: api -> backend -> fx_edge -> partitioner -> solvers -> graph.
"""
