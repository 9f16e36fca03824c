"""What every trace reader checks and converts the same way (Kineto, MXNet and TensorFlow traces).

All three are Chrome-trace JSON: a "traceEvents" list of event objects, iterations marked by spans
named "ProfilerStep#N", times in microseconds (Kineto: decimals or integers; MXNet: integers). This
module holds one copy of the guards over that: the event list, the step names, the exact
microseconds -> integer ns conversion, reading a field of many events with a `TraceFormatError`
naming the event kind, and the step window and per-thread nesting the operator readers share.
"""

from __future__ import annotations

import json
import os
import re
from decimal import Decimal, InvalidOperation

import numpy as np

from tbd.core.errors import TraceFormatError
from tbd.core.records import StepSpan
from tbd.profilers.traces.files import read_trace_bytes
from tbd.profilers.traces.names import quoted

__all__ = ["read_trace_bytes", "read_json_trace", "trace_events", "step_number", "us_to_ns", "event_ns", "column",
           "step_window", "step_numbers", "nesting", "int_value", "TIME_MIN_NS", "TIME_MAX_NS", "DUR_MAX_NS",
           "NO_STEPS_NOTE"]

# At most 18 digits: a step number must fit int64 (and `int` refuses 4,300+ digit strings).
_STEP = re.compile(r"ProfilerStep#(\d{1,18})$")
#: Event times and durations (ns) a trace may hold: within these, a start plus a duration and the
#: difference of any two ends stay inside int64 (2^63), so no end or window length wraps around.
#: 2^62 ns is the year 2116 on the Unix epoch Kineto uses; 2^61 ns are 73 years.
TIME_MIN_NS = -(1 << 60)
TIME_MAX_NS = 1 << 62
DUR_MAX_NS = 1 << 61
NO_STEPS_NOTE = "no ProfilerStep spans: the whole trace is the window"


def read_json_trace(path: str | os.PathLike, what: str, hint: str) -> dict:
    """Load a Chrome-trace JSON file (.json or .json.gz, gzip detected by content) with exact numbers.

    For the MXNet and TensorFlow readers, whose traces are small enough for a dict per event
    (Kineto traces go through the columnar `profilers.kineto.decode`).

    Returns:
        The trace object; non-integer numbers are `decimal.Decimal` (exact), integers stay `int`.
    Raises:
        TraceFormatError: unreadable, truncated or garbage gzip, corrupt JSON, or no "traceEvents"
            list (the message says the file is not `what`).
    """
    name = os.fspath(path)
    raw = read_trace_bytes(path)
    try:
        trace = json.loads(raw, parse_float=Decimal)
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: not a text JSON file", hint=hint) from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{name}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                               hint="the file may be truncated; re-export the trace") from None
    except RecursionError:
        raise TraceFormatError(f"{name}: JSON nested too deeply to be {what}", hint=hint) from None
    except ValueError as exc:  # an integer of 4,300+ digits (Python's int limit)
        raise TraceFormatError(f"{name}: unreadable JSON ({quoted(str(exc), 80)})", hint=hint) from None
    trace_events(trace, name, what, hint)
    return trace


def trace_events(trace, source: str, what: str, hint: str, objects: bool = False) -> list:
    """The trace's "traceEvents" list.

    Raises:
        TraceFormatError: `trace` is not a dict holding a "traceEvents" list (or, with `objects`,
            the list holds a non-object); the message says the source is not `what`.
    """
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or (objects and not all(isinstance(e, dict) for e in events)):
        of = " of objects" if objects else ""
        raise TraceFormatError(f'{source}: not {what} (no "traceEvents" list{of})', hint=hint)
    return events


def step_number(name: str) -> int | None:
    """N of an iteration span named "ProfilerStep#N"; None for every other name."""
    m = _STEP.match(name)
    return None if m is None else int(m.group(1))


def us_to_ns(value) -> int:
    """Microseconds as traces write them (int, Decimal, float) -> exact integer nanoseconds.

    Raises:
        TypeError: not a number. ValueError: NaN, an infinity, or beyond 10^20 µs (a Decimal such
            as 1E+999999999 would otherwise take hours to turn into an int).
    """
    if type(value) is int:  # bool is not a time
        return value * 1000
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite() or value.adjusted() > 20:
            raise ValueError(f"not a time: {value}")
        # scaleb is exact; ties beyond the 3rd decimal round half-even (Kineto writes at most 3).
        return int(value.scaleb(3).to_integral_value())
    raise TypeError(f"not a number: {quoted(value)}")


def int_value(value, low: int = -(1 << 63), high: int = (1 << 63) - 1) -> int | None:
    """An integer JSON value (int, or an integral Decimal/float) within [low, high]; else None.

    Never converts a huge Decimal exponent (see `us_to_ns`); bools are not integers here.
    """
    if type(value) is int:
        return value if low <= value <= high else None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite() or value.adjusted() > 19 or value != value.to_integral_value():
            return None
        return int_value(int(value), low, high)
    return None


def event_ns(value, source: str, what: str) -> int:
    """One event's microsecond time -> integer ns (exact); not a number or out of range -> TraceFormatError."""
    try:
        ns = us_to_ns(value)
    except (TypeError, ValueError, ArithmeticError):  # Decimal("NaN") / "Infinity" raise ValueError
        raise TraceFormatError(f"{source}: malformed {what} event time {quoted(value)}") from None
    if not TIME_MIN_NS <= ns < TIME_MAX_NS:
        raise TraceFormatError(f"{source}: {what} event time {quoted(value)} µs is out of range")
    return ns


def column(events: list, source: str, what: str, get) -> list:
    """`get` applied to every event, malformed events reported as TraceFormatError."""
    try:
        return [get(ev) for ev in events]
    except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
        raise TraceFormatError(f"{source}: malformed {what} event ({type(exc).__name__}: {exc})") from None


def step_window(steps: tuple[StepSpan, ...], start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[int, int, list[str]]:
    """(start, end, notes) of the window: first step start to last step end, else all the rows."""
    if steps:
        return steps[0].start_ns, max(s.end_ns for s in steps), []
    return int(start_ns.min()), int(end_ns.max()), [NO_STEPS_NOTE]


def step_numbers(start_ns: np.ndarray, steps: tuple[StepSpan, ...]) -> np.ndarray:
    """ProfilerStep number holding each start time, -1 outside every step."""
    out = np.full(len(start_ns), -1, dtype=np.int64)
    for s in steps:
        out[(start_ns >= s.start_ns) & (start_ns <= s.end_ns)] = s.number
    return out


def nesting(start: list, end: list, thread: list) -> tuple[list[int], list[int]]:
    """(depth, self time) of intervals sorted by (thread, start, longest first).

    An interval nests in the nearest earlier one on its thread still open at its start; a parent
    keeps only the time its children do not cover.
    """
    depth = [0] * len(start)
    self_ns = [e - s for s, e in zip(start, end)]
    stack: list[int] = []
    for i, (s, e, t) in enumerate(zip(start, end, thread)):
        while stack and (thread[stack[-1]] != t or end[stack[-1]] <= s):
            stack.pop()
        if stack:
            depth[i] = len(stack)
            self_ns[stack[-1]] -= e - s
        stack.append(i)
    return depth, self_ns
