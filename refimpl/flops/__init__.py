"""FLOPs: the formula table and FlopCounterMode.

| module            | job |
| ----------------- | --- |
| formulas/         | the table: one module per op family, registration, ``count_flops`` |
| counter.py        | FlopCounterMode (drop-in for torch.utils.flop_counter's), uncounted_ops() |
| free_ops.py       | the ops declared free by convention (all others are counted or reported) |
| module_tracker.py | which modules are running, forward and backward |
| table.py          | the per-module table FlopCounterMode prints |
| cli.py            | ``refimpl flops MODEL``: its arguments and their one-line errors |
| models.py         | the MODELs it builds: refimpl's, torchvision:, hf:, a user's module:factory |
| summary.py        | one counted run (forward, a training step's backward) and its formats |

Public names (also on ``refimpl``): ``FlopCounterMode`` (``refimpl.flops.counter``),
``flop_formulas``, ``register_flop_formula``, ``count_flops`` (``refimpl.flops.formulas``).
"""
