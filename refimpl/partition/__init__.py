"""The memory-budget partitioner: trace, cost, candidates, knapsack, min-cut, plan.

| module         | one job |
| -------------- | ------- |
| options.py     | ``PartitionOptions``: the one frozen options object (budget, estimator, solver) |
| trace.py       | the joint graph from AOTAutograd, as plain ``JointGraph`` data |
| cost.py        | bytes per value; runtime per node (FLOP table or profiling) |
| candidates.py  | what may not be recomputed (bans) and the knapsack's items |
| knapsack.py    | solvers on plain lists: dp, ilp (exact), greedy, brute |
| mincut.py      | the flow network and Dinic's max-flow / min-cut |
| partitioner.py | budget semantics: max plan, min plan, knapsack in between -> ``Plan`` |
| plan.py        | ``Plan``: saved, recomputed, bytes, recompute cost |
| api.py         | ``partition_fn``, ``compile``, ``explain``, ``memory_efficient_fusion`` |
| backend.py     | the dynamo backend ``"refimpl"`` |
| pareto.py      | the ``refimpl pareto`` command |
"""
