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

What is sorted where (the conventions `profilers.kineto` documents):
- "X" events of cat "cpu_op" or "user_annotation" named ProfilerStep#N: the steps;
- other "cpu_op" "X" events: the ops;
- "cuda_runtime" / "cuda_driver" "X" events: launch calls (their args.correlation);
- "kernel" "X" events: the kernels; "gpu_memcpy" / "gpu_memset": counted only;
- "i" events named "[memory]": allocator events;
- every "X" or thread-scoped "i" event except the profiler's own "Trace" span: the timed extent,
  the window of a trace without steps.
"""

from __future__ import annotations

import os
from operator import attrgetter

import msgspec
import numpy as np

from tbd.errors import TraceFormatError
from tbd.profilers.kineto_columns import (
    KernelColumns,
    KinetoTrace,
    LaunchColumns,
    MemoryColumns,
    OpColumns,
    Signature,
    StepColumns,
)
from tbd.profilers.trace_events import read_trace_bytes, step_number
from tbd.profilers.trace_times import us_text_to_ns

TRACE_HINT = "export it with torch.profiler's export_chrome_trace (or on_trace_ready=tensorboard_trace_handler)"
_BATCH = 1 << 13  # events decoded into structs at a time: ~1 MB of them stays in the CPU's cache while the
# per-kind passes touch each struct several times (measured 1.6x faster than 65,536 on 1M events)
_METADATA = ("schemaVersion", "deviceProperties", "distributedInfo", "host_name", "baseTimeNanoseconds",
             "trace_id", "displayTimeUnit")


_EMPTY = msgspec.Raw()


class _Args(msgspec.Struct, gc=False, frozen=True):
    correlation: int | None = None
    device: int | None = None
    stream: int | None = None
    # Empty when absent, so the three join into a signature key without a check per call.
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_EMPTY)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_EMPTY)
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_EMPTY)
    addr: int | None = msgspec.field(name="Addr", default=None)
    nbytes: int | None = msgspec.field(name="Bytes", default=None)
    total_allocated: int | None = msgspec.field(name="Total Allocated", default=None)
    device_id: int | None = msgspec.field(name="Device Id", default=None)


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = None
    dur: msgspec.Raw = None
    s: str | None = None
    args: _Args | None = _NO_ARGS  # a shared empty one when absent: no None check per event


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
_EVENTS = msgspec.json.Decoder(list[_Event])

# Kinds of "X" events, by cat.
_OP, _ANNOTATION, _LAUNCH, _KERNEL, _COPY, _OTHER = range(6)
_KINDS = {"cpu_op": _OP, "user_annotation": _ANNOTATION, "cuda_runtime": _LAUNCH, "cuda_driver": _LAUNCH,
          "kernel": _KERNEL, "gpu_memcpy": _COPY, "gpu_memset": _COPY}


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
    builder = _ColumnBuilder(source)
    for first in range(0, len(events), _BATCH):
        chunk = events[first:first + _BATCH]
        # One copy of the batch's text: the brackets ride on its first and last events.
        chunk[0] = b"[" + bytes(chunk[0])
        chunk[-1] = bytes(chunk[-1]) + b"]"
        try:
            decoded = _EVENTS.decode(b",".join(chunk))
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


_NAME, _PID, _TID, _TS, _DUR, _ARGS = map(attrgetter, ("name", "pid", "tid", "ts", "dur", "args"))
_DEVICE, _STREAM, _CORRELATION = map(attrgetter, ("device", "stream", "correlation"))

_SHAPES = attrgetter("input_dims", "input_type", "concrete")


class _ColumnBuilder:
    """Columns grown batch by batch (lists of numpy chunks), concatenated once at the end.

    Per-event work is C-level where it can be (attrgetter maps, dict lookups through map); Python
    runs once per distinct name, thread or signature.
    """

    def __init__(self, source: str):
        self.source = source
        self.name_codes: dict = {}
        self.step_of_name: list[int | None] = []  # name code -> N of "ProfilerStep#N", else None
        self.shape_codes: dict = {}  # the three shape arguments' JSON text, joined -> code
        self.signature_codes: dict = {}  # (name code << 32 | shape code) -> signature code
        self.pid_codes: dict = {}
        self.tid_codes: dict = {}
        self.parts: dict[str, list] = {}
        self.copies = 0
        self.timed_start: int | None = None
        self.timed_end: int | None = None

    def _put(self, column: str, values) -> None:
        self.parts.setdefault(column, []).append(values)

    def add(self, events: list[_Event]) -> None:
        buckets = self._buckets(events)
        ops, annotations, launches, kernels, copies, other, memory = buckets
        self.copies += len(copies)
        op_names = self._names(ops)
        step = self._step_numbers(op_names) >= 0
        steps = [ev for ev, s in zip(ops, step.tolist()) if s]
        steps += [ev for ev, s in zip(annotations, (self._step_numbers(self._names(annotations)) >= 0).tolist()) if s]
        if step.any():
            ops, op_names = [ev for ev, s in zip(ops, step.tolist()) if not s], op_names[~step]
        spans = [self._ops(ops, op_names), self._steps(steps), self._launches(launches), self._kernels(kernels),
                 self._memory(memory), self._lenient_spans(annotations + copies + other)]
        starts = [s for s, _ in spans if s.size]
        if starts:
            lo = min(int(s.min()) for s in starts)
            hi = max(int(e.max()) for s, e in spans if e.size)
            self.timed_start = lo if self.timed_start is None else min(self.timed_start, lo)
            self.timed_end = hi if self.timed_end is None else max(self.timed_end, hi)

    @staticmethod
    def _buckets(events: list[_Event]) -> list[list[_Event]]:
        """The events sorted by kind: _OP.._OTHER, then "[memory]" instants (module docstring)."""
        kinds = _KINDS
        buckets: list[list[_Event]] = [[] for _ in range(_OTHER + 2)]
        for ev in events:
            ph = ev.ph
            if ph == "X":
                kind = kinds.get(ev.cat, _OTHER)
                if kind != _OTHER or ev.cat != "Trace":
                    buckets[kind].append(ev)
            elif ph == "i" and ev.s != "g" and ev.cat != "Trace":
                buckets[_OTHER + 1 if ev.name == "[memory]" else _OTHER].append(ev)
        return buckets

    # -- codes --------------------------------------------------------------------------------

    @staticmethod
    def _codes(table: dict, keys: list) -> np.ndarray:
        """One int32 code per key, new distinct keys numbered in order of first appearance."""
        for key in dict.fromkeys(keys):
            if key not in table:
                table[key] = len(table)
        return np.fromiter(map(table.__getitem__, keys), dtype=np.int32, count=len(keys))

    def _names(self, events: list[_Event]) -> np.ndarray:
        codes = self._codes(self.name_codes, list(map(_NAME, events)))
        for name in list(self.name_codes)[len(self.step_of_name):]:
            self.step_of_name.append(step_number(name) if isinstance(name, str) else None)
        return codes

    def _step_numbers(self, name_codes: np.ndarray) -> np.ndarray:
        """N of each "ProfilerStep#N" name, -1 for every other name."""
        table = np.array([-1 if n is None else n for n in self.step_of_name], dtype=np.int64)
        return table[name_codes] if name_codes.size else np.zeros(0, dtype=np.int64)

    def _threads(self, events: list[_Event]) -> np.ndarray:
        """One int64 key per (pid, tid) pair: the pair's codes side by side (pids and tids may be strings)."""
        pid = self._codes(self.pid_codes, list(map(_PID, events))).astype(np.int64)
        tid = self._codes(self.tid_codes, list(map(_TID, events))).astype(np.int64)
        return (pid << 32) | tid

    # -- per kind: each puts its columns and returns its events' (start, end) ns -------------

    def _times(self, events: list[_Event], field: str, what: str) -> np.ndarray:
        texts = list(map(_TS if field == "ts" else _DUR, events))
        if None in texts:
            raise TraceFormatError(f"{self.source}: malformed {what} event (no {field!r})", hint=TRACE_HINT)
        ns, ok = us_text_to_ns(texts)
        if not ok.all():
            bad = bytes(texts[int(np.flatnonzero(~ok)[0])])
            raise TraceFormatError(f"{self.source}: malformed {what} event time {bad[:40]!r}", hint=TRACE_HINT)
        return ns

    def _lenient_spans(self, events: list[_Event]) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of events read only for the timed extent; unreadable times are skipped."""
        events = [ev for ev in events if ev.ts is not None]
        start, ok = us_text_to_ns(list(map(_TS, events)))
        end = start.copy()
        with_dur = [i for i, ev in enumerate(events) if ev.dur is not None and ev.ph == "X"]
        if with_dur:
            dur, dur_ok = us_text_to_ns([events[i].dur for i in with_dur])
            end[with_dur] += np.where(dur_ok, dur, 0)
        return start[ok], end[ok]

    def _ops(self, ops: list[_Event], names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not ops:
            return _NO_SPAN
        tids = list(map(_TID, ops))
        for tid in set(tids):
            if type(tid) is not int:
                raise TraceFormatError(f"{self.source}: malformed cpu_op event (tid {tid!r} is not a number)",
                                       hint=TRACE_HINT)
        start, dur = self._times(ops, "ts", "cpu_op"), self._times(ops, "dur", "cpu_op")
        self._put("op.name", names)
        self._put("op.start", start)
        self._put("op.dur", dur)
        self._put("op.thread", self._threads(ops))
        self._put("op.tid", np.fromiter(tids, dtype=np.int64, count=len(ops)))
        self._put("op.signature", self._signatures(ops, names))
        return start, start + dur

    def _signatures(self, ops: list[_Event], names: np.ndarray) -> np.ndarray:
        """Signature code per op: its name code with the code of its three shape arguments' text."""
        args = list(map(_ARGS, ops))
        if None in args:  # "args": null
            args = [_NO_ARGS if a is None else a for a in args]
        shapes = self._codes(self.shape_codes, list(map(b"\0".join, map(_SHAPES, args)))).astype(np.int64)
        keys, inverse = np.unique((names.astype(np.int64) << 32) | shapes, return_inverse=True)
        table = self.signature_codes
        for key in keys.tolist():
            if key not in table:
                table[key] = len(table)
        return np.array([table[key] for key in keys.tolist()], dtype=np.int32)[inverse.reshape(-1)]

    def _steps(self, steps: list[_Event]) -> tuple[np.ndarray, np.ndarray]:
        if not steps:
            return _NO_SPAN
        start, dur = self._times(steps, "ts", "ProfilerStep"), self._times(steps, "dur", "ProfilerStep")
        self._put("step.number", self._step_numbers(self._names(steps)))
        self._put("step.start", start)
        self._put("step.dur", dur)
        return start, start + dur

    def _launches(self, launches: list[_Event]) -> tuple[np.ndarray, np.ndarray]:
        extent = self._lenient_spans(launches)
        correlation = [None if a is None else a.correlation for a in map(_ARGS, launches)]
        if None in correlation:
            launches = [ev for ev, c in zip(launches, correlation) if c is not None]
            correlation = [c for c in correlation if c is not None]
        if launches:
            self._put("launch.correlation", np.array(correlation, dtype=np.int64))
            self._put("launch.start", self._times(launches, "ts", "runtime"))
            self._put("launch.thread", self._threads(launches))
        return extent

    def _kernels(self, kernels: list[_Event]) -> tuple[np.ndarray, np.ndarray]:
        if not kernels:
            return _NO_SPAN
        n = len(kernels)
        args = list(map(_ARGS, kernels))
        if None in args:
            args = [_NO_ARGS if a is None else a for a in args]
        start, dur = self._times(kernels, "ts", "kernel"), self._times(kernels, "dur", "kernel")
        self._put("kernel.name", self._names(kernels))
        self._put("kernel.start", start)
        self._put("kernel.dur", dur)
        # Older traces lack args.device/stream; Kineto's GPU rows use pid = device, tid = stream.
        self._put("kernel.device", self._ints(list(map(_DEVICE, args)), kernels, _PID, "device"))
        self._put("kernel.stream", self._ints(list(map(_STREAM, args)), kernels, _TID, "stream"))
        correlation = list(map(_CORRELATION, args))
        self._put("kernel.correlation", np.array([-1 if c is None else c for c in correlation] if None in correlation
                                                 else correlation, dtype=np.int64).reshape(n))
        return start, start + dur

    def _ints(self, values: list, events: list[_Event], fallback, what: str) -> np.ndarray:
        """int64 column of `values`, each None replaced by the event's `fallback` field, which must be an int."""
        if None in values:
            values = [fallback(ev) if v is None else v for v, ev in zip(values, events)]
            for v in set(values):
                if type(v) is not int:
                    raise TraceFormatError(f"{self.source}: malformed kernel event ({what} {v!r} is not a number)",
                                           hint=TRACE_HINT)
        return np.array(values, dtype=np.int64).reshape(len(events))

    def _memory(self, memory: list[_Event]) -> tuple[np.ndarray, np.ndarray]:
        if not memory:
            return _NO_SPAN
        args = [ev.args for ev in memory]
        for a in args:
            if type(a) is not _Args or a.addr is None or a.nbytes is None or a.total_allocated is None:
                raise TraceFormatError(f"{self.source}: malformed [memory] event (args without Addr, Bytes or "
                                       "Total Allocated)", hint=TRACE_HINT)
        n = len(memory)
        ts = self._times(memory, "ts", "[memory]")
        self._put("memory.ts", ts)
        self._put("memory.addr", np.fromiter((a.addr for a in args), dtype=np.uint64, count=n))
        self._put("memory.bytes", np.fromiter((a.nbytes for a in args), dtype=np.int64, count=n))
        self._put("memory.total", np.fromiter((a.total_allocated for a in args), dtype=np.int64, count=n))
        self._put("memory.device", np.fromiter((-1 if a.device_id is None else a.device_id for a in args),
                                               dtype=np.int64, count=n))
        return ts, ts

    # -- the whole trace --------------------------------------------------------------------

    def _column(self, name: str, dtype) -> np.ndarray:
        parts = self.parts.get(name)
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)

    def build(self, metadata: dict) -> KinetoTrace:
        c = self._column
        names = np.empty(len(self.name_codes), dtype=object)
        names[:] = ["" if n is None else str(n) for n in self.name_codes]
        shapes = list(self.shape_codes)
        signatures = tuple(Signature(names[key >> 32], *shapes[key & 0xFFFFFFFF].split(b"\0"))
                           for key in self.signature_codes)
        return KinetoTrace(
            source=self.source, metadata=metadata, names=names, signatures=signatures,
            ops=OpColumns(c("op.name", np.int32), c("op.start", np.int64), c("op.dur", np.int64),
                          c("op.thread", np.int64), c("op.tid", np.int64), c("op.signature", np.int32)),
            steps=StepColumns(c("step.number", np.int64), c("step.start", np.int64), c("step.dur", np.int64)),
            launches=LaunchColumns(c("launch.correlation", np.int64), c("launch.start", np.int64),
                                   c("launch.thread", np.int64)),
            kernels=KernelColumns(c("kernel.name", np.int32), c("kernel.start", np.int64), c("kernel.dur", np.int64),
                                  c("kernel.device", np.int64), c("kernel.stream", np.int64),
                                  c("kernel.correlation", np.int64)),
            memory=MemoryColumns(c("memory.ts", np.int64), c("memory.addr", np.uint64), c("memory.bytes", np.int64),
                                 c("memory.total", np.int64), c("memory.device", np.int64)),
            copies=self.copies, timed_start_ns=self.timed_start, timed_end_ns=self.timed_end)


_NO_SPAN = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
