"""Factories of the built-in targets other than refimpl and torch, one module each.

The registry that names them is :mod:`refimpl.oracle.registry`.
"""
