"""Helpers for test suites: Hypothesis profiles, the accuracy rule, assertion helpers."""
