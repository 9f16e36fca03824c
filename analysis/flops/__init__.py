"""Analytic FLOP formulas, keyed by ATen op name (ops.py) and grouped by the kind of work."""
