"""Loosely typed Kineto argument values read into columns: ids and sizes however a writer spells
them, launch dimensions, percentages. One odd value leaves that field unknown, never the trace
unreadable (profilers.kineto.batches decodes these fields as Any).
"""

from __future__ import annotations

import re
from itertools import chain

import numpy as np

_TRAILING_NUMBER = re.compile(r"(?<!\d)(\d{1,19})\s*$")
INT64 = (-(1 << 63), (1 << 63) - 1)
UINT64 = (0, (1 << 64) - 1)


def as_int(value, bounds: tuple[int, int] = INT64) -> int | None:
    """An id or size as writers spell it: 7, "7", "0x7f00", "stream 7" (trailing digits); else None.

    None too outside `bounds` (int64 by default), and for text longer than 64 characters
    (no id is; a 100,000-digit string would only cost time to parse).
    """
    if type(value) is int:
        return value if bounds[0] <= value <= bounds[1] else None
    if isinstance(value, float) and value.is_integer():
        return as_int(int(value), bounds)
    if isinstance(value, str) and len(value) <= 64:
        try:
            return as_int(int(value.strip(), 0), bounds)
        except ValueError:
            found = _TRAILING_NUMBER.search(value)
            return as_int(int(found.group(1)), bounds) if found else None
    return None


_NO_DIM3 = (-1, -1, -1)
_DIM_MAX = 1 << 31  # CUDA's largest grid dimension is 2^31 - 1


def dim3_column(values: list) -> np.ndarray:
    """(n, 3) int64 of [x, y, z] lists; a row that is not three sizes below 2^31 is -1s (unknown)."""
    n = len(values)
    # Fast path, C-level checks only (no Python per kernel): every value a list of 3 ints.
    if n and set(map(type, values)) == _LIST and set(map(len, values)) == _THREE:
        flat = list(chain.from_iterable(values))
        if set(map(type, flat)) == _INT:
            try:
                rows = np.fromiter(flat, dtype=np.int64, count=3 * n).reshape(n, 3)
            except OverflowError:  # a size beyond int64: row by row below
                pass
            else:
                rows[((rows < 0) | (rows >= _DIM_MAX)).any(axis=1)] = -1
                return rows
    rows = [v if type(v) is list and len(v) == 3 and all(type(d) is int and 0 <= d < _DIM_MAX for d in v) else _NO_DIM3
            for v in values]
    return np.array(rows, dtype=np.int64).reshape(n, 3)


def percent_column(values: list) -> np.ndarray:
    """float64 of numbers in [0, 100]; anything else NaN."""
    if set(map(type, values)) <= _NUMBER_OR_NONE:  # numpy reads None as NaN: no Python per value
        out = np.array(values, dtype=np.float64).reshape(len(values))
    else:
        out = np.array([v if type(v) in (int, float) else np.nan for v in values], dtype=np.float64)
    return np.where((out >= 0) & (out <= 100), out, np.nan)


_LIST, _THREE, _INT = {list}, {3}, {int}
_NUMBER_OR_NONE = {int, float, type(None)}
