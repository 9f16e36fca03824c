"""Kineto trace events sorted by kind, and the number parsing every Kineto reader step shares.

`_classify` splits a trace's event list into ops, ProfilerStep spans, runtime launch calls,
kernels and "[memory]" instants; `_ns` turns Kineto's microsecond numbers into exact integer
nanoseconds and `_column` reads one field of many events, reporting a malformed event as a
`TraceFormatError`. The conventions are those of `profilers.kineto`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np

from tbd.errors import TraceFormatError

_STEP = re.compile(r"ProfilerStep#(\d+)$")
_LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
_COPY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
_MARKER_CATS = frozenset({"cpu_op", "user_annotation"})


def _ns(value) -> int:
    """Microseconds as Kineto writes them (int, Decimal, float) -> exact integer nanoseconds."""
    if type(value) is int:
        return value * 1000
    if isinstance(value, Decimal):
        # scaleb is exact; ties beyond the 3rd decimal round half-even (Kineto writes at most 3).
        return int(value.scaleb(3).to_integral_value())
    if isinstance(value, float):
        return int(Decimal(repr(value)).scaleb(3).to_integral_value())
    raise TypeError(f"not a number: {value!r}")


@dataclass(frozen=True)
class _Raw:
    """Events of one trace sorted into the categories the reader uses (plain lists of dicts)."""

    events: list
    ops: list
    steps: list
    launches: list
    kernels: list
    copies: int
    memory: list


def _classify(events: list, source: str) -> _Raw:
    ops, steps, launches, kernels, memory = [], [], [], [], []
    copies = 0
    for ev in events:
        if not isinstance(ev, dict):
            raise TraceFormatError(f"{source}: traceEvents holds a non-object entry {ev!r:.60}")
        ph = ev.get("ph")
        if ph == "X":
            cat = ev.get("cat")
            if cat == "kernel":
                kernels.append(ev)
            elif cat in _MARKER_CATS:
                if _STEP.match(str(ev.get("name", ""))):
                    steps.append(ev)
                elif cat == "cpu_op":
                    ops.append(ev)
            elif cat in _LAUNCH_CATS:
                launches.append(ev)
            elif cat in _COPY_CATS:
                copies += 1
        elif ph == "i" and ev.get("name") == "[memory]":
            memory.append(ev)
    return _Raw(events, ops, steps, launches, kernels, copies, memory)


def _column(events: list, source: str, what: str, get) -> list:
    """`get` applied to every event, malformed events reported as TraceFormatError."""
    try:
        return [get(ev) for ev in events]
    except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
        raise TraceFormatError(f"{source}: malformed {what} event ({type(exc).__name__}: {exc})") from None


def _thread_codes(events: list, codes: dict) -> np.ndarray:
    """One small integer per (pid, tid) pair (added to `codes`), so threads compare as numbers."""
    return np.array([codes.setdefault((ev.get("pid"), ev.get("tid")), len(codes)) for ev in events],
                    dtype=np.int64)
