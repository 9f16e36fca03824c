"""A Kineto trace file decoded into columns: only the fields the reader uses, never a dict per event.

Decoding is msgspec's typed JSON decoder straight into small typed structs holding only ph,
cat, name, pid, tid, ts, dur, s and the args the reader reads, batch by batch, each batch turned
into numpy columns before the next. A file is read a few MB at a time and its text cut at the
writer's event separator (Kineto: `},`, a newline and the indent, `{`), every cut proven by decoding
the piece (`_decode_chunks`): memory is the columns plus one block of text and one batch of
structs, whatever the trace's length (a gzip file's text is held whole, once). A layout whose
cuts cannot be proven (a bare array of events, a key written twice) or any error takes the
exact reading of the whole text in two passes (`_decode`): "traceEvents" split into one raw
slice per event, then the same batches; it also words every error. The two give the same
columns (tests/readers/test_kineto_chunks.py). "ts"/"dur" stay JSON number texts until
`profilers.traces.times.us_text_to_ns` turns them into exact integer ns. Names are interned
(one code per distinct name), and an op's shape arguments ("Input Dims", "Input type",
"Concrete Inputs") become one code per distinct (name, shapes, types, values) signature, so a
FLOP formula runs once per signature, not once per call.

What is sorted where (the conventions `profilers.kineto.reader` documents; PyTorch 1.8-1.9's names in
brackets; the structs and the per-batch work live in `profilers.kineto.batches`):
- "X" events of cat "cpu_op" ["Operator"] or "user_annotation" named ProfilerStep#N: the steps;
- other "cpu_op" ["Operator"] "X" events: the ops;
- other "user_annotation" "X" events: annotation columns (name, start, duration, thread), read
  leniently (Gloo's `gloo:all_reduce` spans are annotations: profilers.kineto.comm);
- "cuda_runtime" / "cuda_driver" ["Runtime"] "X" events: launch calls (their args.correlation);
- "kernel" ["Kernel"] "X" events: the kernels; "gpu_memcpy" / "gpu_memset" ["Memcpy", "Memset"]:
  counted only;
- "i" events named "[memory]": allocator events;
- every "X" or thread-scoped "i" event except the profiler's own "Trace" span: the timed extent,
  the window of a trace without steps.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import closing
from functools import partial
from itertools import chain

import msgspec

from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto.batches import EVENTS_DECODER, TRACE_HINT, ColumnBuilder
from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.traces import forked
from tbd.profilers.traces.events import read_trace_bytes
from tbd.profilers.traces.files import trace_blocks

BATCH_EVENTS = 1 << 11  # events turned into columns at a time: their structs (~1 MB) stay in the CPU's cache while
# the per-kind passes touch each struct several times. On 1M events, reading alone: 8,192 was 1.6x faster than
# 65,536, and 2,048 (with 256 KiB pieces of text) ~0.3 s faster than 8,192 (with 2 MiB pieces).
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
_OBJECT = msgspec.json.Decoder(_Top)
#: The key that opens the events, with the text between "[" and the first event (kept: it is what
#: separates events when a writer puts one per line, as Kineto does).
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[(\s*)\{')
_HEAD_MAX_BYTES = 64 << 20  # text before the first event beyond which the chunked reading gives up
#: Text from which a second process reads the second half, where a second core is free (`_decode_chunks`):
#: below it, the fork, the pickled columns and the merge cost more than half the reading saves.
PARALLEL_MIN_BYTES = 64 << 20
_CHUNK_BYTES = 1 << 18  # text decoded into structs at a time by the chunked reading (~750 Kineto events): the
# structs of a batch are then fresh in the cache


def read_trace_file(path: str | os.PathLike) -> KinetoTrace:
    """Read and decode a Kineto trace (.json or .json.gz, gzip detected by content).

    Raises:
        TraceFormatError: unreadable, truncated or garbage gzip, corrupt JSON, not a Kineto
            trace, or an event whose fields have the wrong types.
    """
    source = os.fspath(path)
    try:
        with closing(trace_blocks(path)) as blocks:  # the file closes even when the chunks give up
            return _decode_chunks(blocks, source, reread=partial(_blocks_from, path), size=_size(path),
                                  split=True)
    except (_Unproven, TraceFormatError):
        pass  # the exact reading below decides, and words any error as it always has
    return decode_trace(read_trace_bytes(path), source)


def _blocks_from(path: str | os.PathLike, offset: int) -> Iterator[bytes]:
    return trace_blocks(path, start=offset)


def _size(path: str | os.PathLike) -> int | None:
    """The file's length, or None (trace_blocks then says what is wrong with the path)."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return None


def decode_trace(data: bytes, source: str) -> KinetoTrace:
    """Decode a Kineto trace's JSON text into columns (see the module docstring).

    Text that is not valid UTF-8, or holds lone UTF-16 surrogate escapes ("\\ud800"), is
    repaired once (each bad byte or escape becomes U+FFFD) and decoded again, with a note.
    """
    try:
        return _decode_chunks(iter((data,)), source)
    except (_Unproven, TraceFormatError):
        pass
    try:
        return _decode(data, source, ())
    except _Unrepaired as bad:
        fixed, note = _repaired(data, bad.error)
        if fixed is None:
            raise bad.failure(data, source) from None
    try:
        return _decode(fixed, source, (note,))
    except _Unrepaired as still:
        raise still.failure(fixed, source) from None


class _Unrepaired(Exception):
    """msgspec refused the text for its encoding: `_repaired` may fix it.

    first: index of the first event of the batch that failed, None when the whole file did (then
    msgspec's byte offset is the file's, and the message gives its line and column).
    """

    def __init__(self, error: Exception, first: int | None = None):
        super().__init__(str(error))
        self.error, self.first = error, first

    def failure(self, data: bytes, source: str) -> TraceFormatError:
        if self.first is None:
            return _decode_error(data, source, self.error)
        message = str(self.error).split(" (byte ")[0]
        return TraceFormatError(f"{source}: corrupt JSON in the events from traceEvents[{self.first}] on: {message}",
                                hint="the file may be truncated; re-export the trace")


def _decode(data: bytes, source: str, notes: tuple[str, ...]) -> KinetoTrace:
    try:
        top = _TOP.decode(data)
    except msgspec.ValidationError:
        raise TraceFormatError(f'{source}: not a Kineto trace (no "traceEvents" list)', hint=TRACE_HINT) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _Unrepaired(exc) from None
    except RecursionError:
        raise _too_deep(source) from None
    if isinstance(top, list):  # late-2020 torch wrote a bare array of events
        events, metadata = top, {}
    else:
        if top.traceEvents is None:
            raise TraceFormatError(f'{source}: not a Kineto trace (no "traceEvents" list)', hint=TRACE_HINT)
        events = top.traceEvents
        metadata = _metadata(top)
    builder = ColumnBuilder(source)
    for first in range(0, len(events), BATCH_EVENTS):
        builder.add(_batch(events[first:first + BATCH_EVENTS], first, source))
    return builder.build(metadata, notes)


class _Unproven(Exception):
    """The chunked reading could not prove where the events split (or met any error): read the whole text."""


def _decode_chunks(blocks: Iterator[bytes], source: str, reread: Callable[[int], Iterator[bytes]] | None = None,
                   size: int | None = None, split: bool = False) -> KinetoTrace:
    """The trace from its text's blocks, decoded as they come, without the whole text or a slice per event.

    Writers put one event per line (Kineto: `},`, a newline and the indent, `{`), and a minifier
    puts `},{`: the text is cut at the separator the first event shows (`_EVENTS_KEY`) about
    every _CHUNK_BYTES and each piece decoded straight into `Event` structs, then handed to the
    builder in BATCH_EVENTS batches (`_add_events`). A cut is only a guess, proven by decoding: a
    piece that starts at an event and ends inside a string, an object or an array is not valid
    JSON, so every piece decoding as a list of events proves every cut. The text before the first
    event, and from the last cut to the end, are decoded as the top-level object (around no
    events, and around the events after the last cut). Anything unproven raises _Unproven (an
    error of the builder's is raised as it is); the caller then reads the whole text the exact
    way (`_decode`), which words every error.

    With `split`, a text of PARALLEL_MIN_BYTES or more is read by two processes where a second core is free
    (`profilers.traces.forked`): a forked child decodes from a separator near the middle to the
    end (the text in memory, or `reread(offset)`, the file's blocks from an offset; `size`: the
    file's length) while this process decodes up to it, and the child's columns are merged in
    (`ColumnBuilder.absorb`). Codes are numbered the same whichever way (`ColumnBuilder.build`),
    and a child that fails only costs the time: its half is then read here, from the start.
    """
    buf = next(blocks, b"")
    while (found := _EVENTS_KEY.search(buf)) is None:
        block = next(blocks, None)
        if block is None or len(buf) > _HEAD_MAX_BYTES:
            raise _Unproven
        buf = bytearray(buf) + block
    gap = found.group(1)
    head = bytes(buf[:found.start(1)]) + b"]}"
    if head.count(b'"traceEvents"') != 1:
        raise _Unproven
    top = _proven(_OBJECT.decode, head)
    separator = b"}," + gap + b"{"
    start = found.end() - 1  # the first event's "{"
    builder = ColumnBuilder(source)
    if split and forked.available():
        blocks, second = _second_half(buf, blocks, start, separator, reread, size, source)
    else:
        second = None
    try:
        pending, rest = _add_events(builder, blocks, buf, start, separator, second and second[0])
        del buf
        if second is None:
            tail, tail_events = _tail(rest)
            pending += tail_events
        else:
            try:
                state, tail = second[1].result()
            except forked.ChildFailed:
                raise _Unproven from None
    finally:
        if second is not None:
            second[1].close()
    for first in range(0, len(pending), BATCH_EVENTS):
        builder.add(pending[first:first + BATCH_EVENTS])
    if second is not None:
        builder.absorb(state)
    # A key written twice keeps its last value, as when the whole object is decoded.
    both = _Top(**{key: getattr(top, key) if getattr(tail, key) is None else getattr(tail, key) for key in _METADATA})
    return builder.build(_metadata(both), ())


def _add_events(builder: ColumnBuilder, blocks: Iterator[bytes], buf: bytes | bytearray, start: int,
                separator: bytes, stop: int | None) -> tuple[list, bytes | None]:
    """Decode the events of the text from `buf[start]` (an event's "{") on, cut about every _CHUNK_BYTES at
    `separator`, into `builder` a whole batch at a time; `blocks` give the text after `buf`.

    stop: where to end, the offset (in the text `buf` starts) of a separator: the events before it.
    Returns the decoded events not yet added (under a batch) and, without `stop`, the text after
    the last cut (the last events and the end of the top-level object).
    """
    pending: list = []
    base = 0  # the offset of buf[0] in the text
    while True:
        cut = buf.find(separator, start + _CHUNK_BYTES)
        ends_here = stop is not None and (cut < 0 or base + cut >= stop)
        if ends_here and base + len(buf) >= stop + len(separator):  # the last piece: up to the stop
            pending += _proven(EVENTS_DECODER.decode, b"".join((b"[", memoryview(buf)[start:stop - base + 1], b"]")))
            return pending, None
        if cut < 0 or ends_here:
            block = next(blocks, None)
            if block is None:
                if stop is not None:
                    raise _Unproven  # the text ended before the stop: changed while read
                return pending, bytes(memoryview(buf)[start:])
            base += start
            if type(buf) is bytearray:
                del buf[:start]  # one buffer throughout: it drops its head without a copy and grows in place (a
                # new buffer per block cost ~20,000 page faults more on 1M events)
            else:
                buf = bytearray(memoryview(buf)[start:])
            buf += block
            start = 0
            continue
        pending += _proven(EVENTS_DECODER.decode, b"".join((b"[", memoryview(buf)[start:cut + 1], b"]")))
        start = cut + len(separator) - 1
        while len(pending) >= BATCH_EVENTS:
            builder.add(pending[:BATCH_EVENTS])
            del pending[:BATCH_EVENTS]


def _tail(rest: bytes) -> tuple[_Top, list]:
    """The top-level object around the events after the last cut, and those events decoded."""
    if b'"traceEvents"' in rest:
        raise _Unproven
    tail = _proven(_OBJECT.decode, b'{"traceEvents": [' + rest)
    events = _proven(EVENTS_DECODER.decode, b"[" + b",".join(tail.traceEvents) + b"]") if tail.traceEvents else []
    return tail, events


def _second_half(buf: bytes | bytearray, blocks: Iterator[bytes], start: int, separator: bytes,
                 reread: Callable[[int], Iterator[bytes]] | None, size: int | None,
                 source: str) -> tuple[Iterator[bytes], tuple[int, forked.Child] | None]:
    """A child decoding the text from a separator near its middle, and that separator's offset; None
    when the text is under PARALLEL_MIN_BYTES or no separator is found there. Also the blocks, to be
    read on from where they were (the next one is looked at: is `buf` the whole text?)."""
    following = next(blocks, None)
    if following is not None:
        blocks = chain((following,), blocks)
    if following is None and len(buf) >= PARALLEL_MIN_BYTES:  # the whole text is in memory (gzip): shared
        split = buf.find(separator, max(start, len(buf) // 2))
        if split < 0:
            return blocks, None
        return blocks, (split, forked.Child(_second_part, buf, split, None, separator, source))
    if following is None or reread is None or size is None or size < PARALLEL_MIN_BYTES:
        return blocks, None
    with closing(reread(size // 2)) as middle:
        window = next(middle, b"")
    at = window.find(separator)
    if at < 0 or size // 2 + at <= start:
        return blocks, None
    split = size // 2 + at
    return blocks, (split, forked.Child(_second_part, None, split, reread, separator, source))


def _second_part(text: bytes | bytearray | None, split: int, reread: Callable[[int], Iterator[bytes]] | None,
                 separator: bytes, source: str) -> tuple[dict, _Top]:
    """(the builder's state, the top-level object's tail) of the events after the separator at `split`
    (run in the child: `_second_half`): from `text` in memory, else from the file's blocks from there."""
    blocks: Iterator[bytes] = iter(())
    if text is None:
        blocks = reread(split)
        text, split = next(blocks, b""), 0
    if text[split:split + len(separator)] != separator:
        raise _Unproven
    builder = ColumnBuilder(source)
    pending, rest = _add_events(builder, blocks, text, split + len(separator) - 1, separator, None)
    tail, tail_events = _tail(rest)
    pending += tail_events
    for first in range(0, len(pending), BATCH_EVENTS):
        builder.add(pending[first:first + BATCH_EVENTS])
    return builder.state(), tail


def _proven(decode, text: bytes):
    try:
        return decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # ValidationError subclasses DecodeError
        raise _Unproven from None


def _metadata(top: _Top) -> dict:
    """The top-level fields kept, decoded; one that cannot be decoded (too deep, invalid text) is left out."""
    out = {}
    for key in _METADATA:
        raw = getattr(top, key)
        if raw is not None:
            try:
                out[key] = msgspec.json.decode(raw)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                continue
    return out


def _batch(chunk: list, first: int, source: str) -> list:
    """One batch of raw events decoded into `Event` structs (`first`: the index of its first event)."""
    # One copy of the batch's text: the brackets ride on its first and last events.
    chunk[0] = b"[" + bytes(chunk[0])
    chunk[-1] = bytes(chunk[-1]) + b"]"
    try:
        return EVENTS_DECODER.decode(b",".join(chunk))
    except RecursionError:
        raise _too_deep(source) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # msgspec.ValidationError subclasses DecodeError
        if isinstance(exc, msgspec.ValidationError):
            raise _malformed(exc, first, source) from None
        raise _Unrepaired(exc, first) from None


def _malformed(exc: msgspec.ValidationError, first: int, source: str) -> TraceFormatError:
    where = _event_path(exc, first)
    if where.startswith("Expected `object`") and where.endswith("]`"):  # the event itself
        return TraceFormatError(f"{source}: not a Kineto trace ({where.split(' - at ')[-1].strip('`')} is "
                                "not an event object)", hint=TRACE_HINT)
    return TraceFormatError(f"{source}: malformed event ({where})", hint=TRACE_HINT)


def _too_deep(source: str) -> TraceFormatError:
    return TraceFormatError(f"{source}: JSON nested too deeply to be a Kineto trace", hint=TRACE_HINT)


# A lone UTF-16 surrogate escape: a high one not followed by a low one, or a low one on its own.
# Escaped backslashes are consumed first so that "\\\\ud800" (a backslash, then text) is left alone.
_ESCAPES = re.compile(rb"\\\\|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _repaired(data: bytes, error: Exception) -> tuple[bytes | None, str]:
    """The text with invalid UTF-8 or lone surrogate escapes replaced by U+FFFD, and a note; None if neither."""
    if isinstance(error, UnicodeDecodeError):
        if data[:3] != b"\xef\xbb\xbf" and not _is_text(data):
            return None, ""
        return (data.decode("utf-8", "replace").encode("utf-8"),
                "the trace is not valid UTF-8: undecodable bytes were read as U+FFFD")
    lone = 0

    def swap(m: re.Match) -> bytes:
        nonlocal lone
        if m.group(0) == b"\\\\" or m.group(1):
            return m.group(0)
        lone += 1
        return b"\\ufffd"

    fixed = _ESCAPES.sub(swap, data) if b"\\u" in data else data
    if not lone:
        return None, ""
    return fixed, f"the trace holds {lone} lone UTF-16 surrogate escapes (invalid text): read as U+FFFD"


def _decode_error(data: bytes, source: str, exc: Exception) -> TraceFormatError:
    """One line for text that is not JSON: where it broke, as a line and column."""
    message = str(exc)
    if data[:3] != b"\xef\xbb\xbf" and not _is_text(data):
        return TraceFormatError(f"{source}: not a text JSON file", hint=TRACE_HINT)
    at = message.rsplit("byte ", 1)
    digits = at[1].rstrip(")") if len(at) == 2 else ""  # "... - byte 12" or "... (byte 12)"
    if digits.isdigit():
        offset = int(digits)
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        message = f"{at[0].rstrip(' -(')} at line {line} column {column}"
    return TraceFormatError(f"{source}: corrupt JSON: {message}", hint="the file may be truncated; re-export the trace")


def _is_text(data: bytes) -> bool:
    """Whether the file starts as text: its first 4 KiB hold no NUL and at most a few bytes that are
    not UTF-8 (a text trace with a corrupt name is repaired; a binary file is not a trace)."""
    sample = data[:4096]
    if b"\0" in sample:
        return False
    bad = sample.decode("utf-8", "replace").count("\ufffd")
    return bad <= 8 + len(sample) // 100


def _event_path(exc: msgspec.ValidationError, first: int) -> str:
    """msgspec's message with the batch-relative `$[i]` turned into the trace's event index."""
    message = str(exc)
    head, sep, rest = message.partition("$[")
    index, close, tail = rest.partition("]")
    if sep and close and index.isdigit():
        return f"{head}traceEvents[{first + int(index)}]{tail}"
    return message


