"""Analytic bytes each op moves (the roofline's x axis), keyed by ATen op name (ops.py)."""
