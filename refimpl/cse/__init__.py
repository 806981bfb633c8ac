"""FX common-subexpression elimination (``refimpl.fx_graph_cse``).

| module       | job |
| ------------ | --- |
| ``eliminate`` | the pass: when two nodes are the same value, and the one-pass rewrite |
| ``effects``   | what a node does besides computing a value (random, mutating, views, ...) |
| ``aliasing``  | storage classes: what may share memory, what is written, what escapes |
| ``keys``      | structural keys for constants (1 vs 1.0 vs True, NaN, -0.0, kwargs order) |

The properties' judge (does a rewritten graph compute the same?) is an expectation, not part
of the pass: :mod:`refimpl.expect.cse_soundness`.
"""

from refimpl.cse.eliminate import fx_graph_cse

__all__ = ["fx_graph_cse"]
