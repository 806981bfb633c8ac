"""A zoo of real historical bugs, re-planted as backends.

Each backend wraps refimpl's own implementation of one component with the one defect that a
public bug report describes (torch's tracker, and the FLOP counters' peers: fvcore, ptflops,
thop, DeepSpeed's flops profiler, fairscale). Every class names the report (``issue``, as
``owner/repo#number``), quotes its title (``title``), says what was wrong, and names the
property that should catch it (``catcher``: ``module::test_name`` under refimpl.properties).

``tests/test_zoo.py`` shows each bug present on a small hand-made input and checks that the
catching property fails on it at 10 examples; ``docs/zoo.md`` is the page users read, and a
test keeps it listing every backend here.
"""

from __future__ import annotations

from tests.zoo import checkpoint, cse, flops, layout, partition

#: component -> the module holding that component's zoo backends.
MODULES = {"cse": cse, "flops": flops, "partition": partition, "checkpoint": checkpoint,
           "layout": layout}


def zoo_backends() -> list[type]:
    """Every zoo backend class, component by component, in definition order."""
    return [cls for module in MODULES.values() for cls in module.ZOO]
