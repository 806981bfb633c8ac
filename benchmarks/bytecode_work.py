"""Work counted in executed bytecodes: a measure of an algorithm's cost that no cache, no
other process and no clock changes.

:func:`bytecodes` runs a function under a trace hook that counts every bytecode instruction
executed in Python frames (``sys.settrace`` with ``f_trace_opcodes``). Calls into C (a dict
lookup, a list append) count as the one instruction that makes them, which is right for
constant-time operations; a Python algorithm with a superlinear loop shows it as a count that
grows faster than its input. Wall-clock time per element grows too on real hardware once the
working set leaves the CPU's caches, and that growth says nothing about the algorithm: the
two together tell the algorithm's cost from the machine's (``benchmarks/bench_cse.py``).

Invariant: the count is deterministic for deterministic code (hash randomisation aside,
which changes the order of set iteration, not the number of steps of a linear pass).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def bytecodes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Bytecode instructions executed by ``fn(*args, **kwargs)`` in Python frames."""
    count = 0

    def on_event(frame, event, arg):
        nonlocal count
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        if event == "opcode":
            count += 1
        return on_event

    previous = sys.gettrace()
    sys.settrace(on_event)
    try:
        fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return count
