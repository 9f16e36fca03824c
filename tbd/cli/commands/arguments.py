"""Argument types for the subcommands: every number checked before any work starts.

argparse calls these on the text given; a value out of range raises ArgumentTypeError, which the
CLI's parser turns into one line ("tbd: error: argument --top: ...") and exit code 2.
"""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def seconds_or_off(text: str) -> float | None:
    """A finite number of seconds > 0, or 0 for "no limit" (None)."""
    if text.strip() in ("0", "0.0"):
        return None
    return positive_float(text)


def memory_gib(text: str) -> float:
    """An address-space cap in GiB: at least 0.25 (the interpreter and a framework need that much
    to start at all) and below 2**30 GiB (what the kernel's limits can express)."""
    value = positive_float(text)
    if not 0.25 <= value < 2**30:
        raise argparse.ArgumentTypeError(f"must be between 0.25 and 2**30 GiB, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
