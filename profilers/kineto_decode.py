"""A Kineto trace file decoded into columns: only the fields the reader uses, never a dict per event.

Decoding is msgspec's typed JSON decoder in two passes over the text: the first splits
"traceEvents" into one raw slice per event (and decodes the few top-level fields kept as
metadata); the second decodes the events batch by batch into small typed structs holding only
ph, cat, name, pid, tid, ts, dur, s and the args the reader reads, and turns each batch into
numpy columns before the next. Memory is the file's text plus the columns plus one batch of
structs, whatever the trace's length. "ts"/"dur" stay JSON number texts until
`profilers.trace_times.us_text_to_ns` turns them into exact integer ns. Names are interned
(one code per distinct name), and an op's shape arguments ("Input Dims", "Input type",
"Concrete Inputs") become one code per distinct (name, shapes, types, values) signature, so a
FLOP formula runs once per signature, not once per call.

What is sorted where (the conventions `profilers.kineto` documents; PyTorch 1.8-1.9's names in
brackets; the structs and the per-batch work live in `profilers.kineto_batches`):
- "X" events of cat "cpu_op" ["Operator"] or "user_annotation" named ProfilerStep#N: the steps;
- other "cpu_op" ["Operator"] "X" events: the ops;
- "cuda_runtime" / "cuda_driver" ["Runtime"] "X" events: launch calls (their args.correlation);
- "kernel" ["Kernel"] "X" events: the kernels; "gpu_memcpy" / "gpu_memset" ["Memcpy", "Memset"]:
  counted only;
- "i" events named "[memory]": allocator events;
- every "X" or thread-scoped "i" event except the profiler's own "Trace" span: the timed extent,
  the window of a trace without steps.
"""

from __future__ import annotations

import os

import msgspec

from tbd.errors import TraceFormatError
from tbd.profilers.kineto_batches import EVENTS_DECODER, TRACE_HINT, ColumnBuilder
from tbd.profilers.kineto_columns import KinetoTrace
from tbd.profilers.trace_events import read_trace_bytes

BATCH_EVENTS = 1 << 13  # events decoded into structs at a time: ~1 MB of them stays in the CPU's cache while the
# per-kind passes touch each struct several times (measured 1.6x faster than 65,536 on 1M events)
_METADATA = ("schemaVersion", "deviceProperties", "distributedInfo", "host_name", "baseTimeNanoseconds",
             "trace_id", "displayTimeUnit")


class _Top(msgspec.Struct, gc=False):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815 - the trace's own key
    schemaVersion: msgspec.Raw = None  # noqa: N815
    deviceProperties: msgspec.Raw = None  # noqa: N815
    distributedInfo: msgspec.Raw = None  # noqa: N815
    host_name: msgspec.Raw = None
    baseTimeNanoseconds: msgspec.Raw = None  # noqa: N815
    trace_id: msgspec.Raw = None
    displayTimeUnit: msgspec.Raw = None  # noqa: N815


_TOP = msgspec.json.Decoder(_Top | list[msgspec.Raw])


def read_trace_file(path: str | os.PathLike) -> KinetoTrace:
    """Read and decode a Kineto trace (.json or .json.gz, gzip detected by content).

    Raises:
        TraceFormatError: unreadable, truncated or garbage gzip, corrupt JSON, not a Kineto
            trace, or an event whose fields have the wrong types.
    """
    return decode_trace(read_trace_bytes(path), os.fspath(path))


def decode_trace(data: bytes, source: str) -> KinetoTrace:
    """Decode a Kineto trace's JSON text into columns (see the module docstring)."""
    try:
        top = _TOP.decode(data)
    except msgspec.ValidationError:
        raise TraceFormatError(f'{source}: not a Kineto trace (no "traceEvents" list)', hint=TRACE_HINT) from None
    except msgspec.DecodeError as exc:
        raise _decode_error(data, source, exc) from None
    if isinstance(top, list):  # late-2020 torch wrote a bare array of events
        events, metadata = top, {}
    else:
        if top.traceEvents is None:
            raise TraceFormatError(f'{source}: not a Kineto trace (no "traceEvents" list)', hint=TRACE_HINT)
        events = top.traceEvents
        metadata = {k: msgspec.json.decode(getattr(top, k)) for k in _METADATA if getattr(top, k) is not None}
    builder = ColumnBuilder(source)
    for first in range(0, len(events), BATCH_EVENTS):
        chunk = events[first:first + BATCH_EVENTS]
        # One copy of the batch's text: the brackets ride on its first and last events.
        chunk[0] = b"[" + bytes(chunk[0])
        chunk[-1] = bytes(chunk[-1]) + b"]"
        try:
            decoded = EVENTS_DECODER.decode(b",".join(chunk))
        except msgspec.ValidationError as exc:
            where = _event_path(exc, first)
            if where.startswith("Expected `object`") and where.endswith("]`"):  # the event itself
                raise TraceFormatError(f"{source}: not a Kineto trace ({where.split(' - at ')[-1].strip('`')} is "
                                       "not an event object)", hint=TRACE_HINT) from None
            raise TraceFormatError(f"{source}: malformed event ({where})", hint=TRACE_HINT) from None
        builder.add(decoded)
    return builder.build(metadata)


def _decode_error(data: bytes, source: str, exc: Exception) -> TraceFormatError:
    """One line for text that is not JSON: where it broke, as a line and column."""
    message = str(exc)
    if data[:3] != b"\xef\xbb\xbf" and not _is_text(data):
        return TraceFormatError(f"{source}: not a text JSON file", hint=TRACE_HINT)
    at = message.rsplit("byte ", 1)
    if len(at) == 2 and at[1].isdigit():
        offset = int(at[1])
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        message = f"{at[0].rstrip(' -')} at line {line} column {column}"
    return TraceFormatError(f"{source}: corrupt JSON: {message}", hint="the file may be truncated; re-export the trace")


def _is_text(data: bytes) -> bool:
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > 4090  # a multi-byte character cut at the sample's end is still text
    return True


def _event_path(exc: msgspec.ValidationError, first: int) -> str:
    """msgspec's message with the batch-relative `$[i]` turned into the trace's event index."""
    message = str(exc)
    head, sep, rest = message.partition("$[")
    index, close, tail = rest.partition("]")
    if sep and close and index.isdigit():
        return f"{head}traceEvents[{first + int(index)}]{tail}"
    return message


