"""Independent expectations: what a correct backend must produce, derived without refimpl's
own answers (a per-layer FLOP derivation, a brute-force partition frontier, a by-hand
checkpoint prediction, an eager channels-last run), plus the accuracy rule and the compared
runs' precision. Properties and the oracle's targets import these; nothing here imports the
oracle, the properties or the fuzz harness."""
