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
import zlib
from decimal import Decimal, InvalidOperation

import numpy as np

from tbd.errors import TraceFormatError
from tbd.records import StepSpan

_STEP = re.compile(r"ProfilerStep#(\d+)$")
NO_STEPS_NOTE = "no ProfilerStep spans: the whole trace is the window"


def read_trace_bytes(path: str | os.PathLike) -> bytes:
    """A trace file's text, gunzipped when it is gzip (by content, not name).

    Raises:
        TraceFormatError: unreadable, or truncated or garbage gzip.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
        return _gunzip(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{name}: truncated or corrupt gzip ({exc})", hint="re-export the trace") from None
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None


def _gunzip(data: bytes, chunk: int = 1 << 20) -> bytearray:
    """Decompress gzip (all members) a megabyte of input at a time into one growing buffer.

    gzip.decompress keeps its own growing output and then copies it out: at a 368 MB trace that
    is ~300 MB more peak memory than appending each piece to the buffer the decoder then reads.
    """
    out = bytearray()
    start = 0
    while start < len(data):
        inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around deflate
        pos = start
        while not inflate.eof:
            if pos >= len(data):
                raise EOFError("compressed file ended before the end-of-stream marker")
            out += inflate.decompress(data[pos:pos + chunk])
            pos += chunk
        start = len(data) - len(inflate.unused_data)
        if not data[start:].strip(b"\0"):
            break  # trailing zero padding after the last member, as gzip itself tolerates
    return out


def read_json_trace(path: str | os.PathLike, what: str, hint: str) -> dict:
    """Load a Chrome-trace JSON file (.json or .json.gz, gzip detected by content) with exact numbers.

    For the MXNet and TensorFlow readers, whose traces are small enough for a dict per event
    (Kineto traces go through the columnar `profilers.kineto_decode`).

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
    """Microseconds as traces write them (int, Decimal, float) -> exact integer nanoseconds."""
    if type(value) is int:
        return value * 1000
    if isinstance(value, Decimal):
        # scaleb is exact; ties beyond the 3rd decimal round half-even (Kineto writes at most 3).
        return int(value.scaleb(3).to_integral_value())
    if isinstance(value, float):
        return int(Decimal(repr(value)).scaleb(3).to_integral_value())
    raise TypeError(f"not a number: {value!r}")


def event_ns(value, source: str, what: str) -> int:
    """One event's microsecond time -> integer ns (exact); not a number -> TraceFormatError."""
    try:
        return us_to_ns(value)
    except TypeError:
        raise TraceFormatError(f"{source}: malformed {what} event time {value!r}") from None


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
