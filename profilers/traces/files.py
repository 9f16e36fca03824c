"""Reading a trace file's bytes without trusting the file: what every trace reader opens through.

A trace path comes from the user and may be anything: a FIFO (an `open` for reading blocks until
a writer appears, so forever), a character device or a symlink to one (/dev/zero never ends), a
directory, a file larger than the machine's memory, or a gzip bomb (6 MB that inflate to 6 GB).
So, before a byte is read:

- the path is resolved through its symlinks and must be a regular file (`os.stat` + `S_ISREG`);
  it is then opened non-blocking and checked again on the open descriptor (a FIFO swapped in
  between the two cannot block the read);
- a plain file above the hard cap is refused (`TBD_MAX_TRACE_BYTES`, default 32 GiB);
- gzip is inflated a megabyte at a time with a bound on each step's output, and refused as soon
  as the expanded text passes max(256 MiB, 200 x the compressed size), or the hard cap. A real
  Kineto trace compresses 10-30x; 200x is only reached by repeated filler. Setting
  `TBD_MAX_TRACE_BYTES` replaces both bounds by the given number of bytes.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator

from tbd.core.errors import TraceFormatError, UsageError

LIMIT_VARIABLE = "TBD_MAX_TRACE_BYTES"
HARD_CAP_BYTES = 32 << 30
#: A gzip member may expand to this many times its compressed size (above the floor below).
MAX_GZIP_RATIO = 200
#: Expansions up to this size are never refused for their ratio.
GZIP_FLOOR_BYTES = 256 << 20
_CHUNK = 1 << 20  # compressed bytes fed to zlib, and expanded bytes taken out, per step


def byte_limit(compressed_bytes: int | None = None) -> int:
    """The most bytes a trace may hold, plain or expanded (module docstring).

    Args:
        compressed_bytes: the gzip file's size, or None for a plain file.
    Raises:
        UsageError: TBD_MAX_TRACE_BYTES is set to something other than a positive integer.
    """
    given = os.environ.get(LIMIT_VARIABLE)
    if given is not None:
        try:
            value = int(given.strip().replace("_", ""))
        except ValueError:
            value = 0
        if value <= 0:
            raise UsageError(f"{LIMIT_VARIABLE}={given[:40]!r} is not a positive number of bytes")
        return value
    if compressed_bytes is None:
        return HARD_CAP_BYTES
    return min(HARD_CAP_BYTES, max(GZIP_FLOOR_BYTES, MAX_GZIP_RATIO * compressed_bytes))


def read_trace_bytes(path: str | os.PathLike) -> bytes:
    """A trace file's text, gunzipped when it is gzip (by content, not name), within the limits above.

    Raises:
        TraceFormatError: not a regular file, unreadable, too large, truncated or garbage gzip,
            or gzip that expands past the limit.
    """
    name = os.fspath(path)
    try:
        raw = _read_regular(name)
        if raw[:2] != b"\x1f\x8b":
            return raw
        limit = byte_limit(len(raw))
        return _gunzip(raw, limit, name)
    except (EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{name}: truncated or corrupt gzip ({exc})", hint="re-export the trace") from None
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None


def trace_blocks(path: str | os.PathLike, block_bytes: int = 1 << 22, start: int = 0) -> Iterator[bytes]:
    """A trace file's text as `read_trace_bytes` gives it, a block of `block_bytes` at a time, so that a
    reader that decodes as it goes never holds a plain file's whole text (a gzip file's text comes whole,
    as one block). Same checks, limits and errors as `read_trace_bytes`, raised when reached.

    start: a plain file's text from this byte on (a second reader of its second half).
    """
    name = os.fspath(path)
    try:
        handle, _, limit = _open_regular(name)
        with handle:
            handle.seek(start)
            block = handle.read(block_bytes)
            if block[:2] == b"\x1f\x8b" and not start:
                raw = block + handle.read()
                _check_size(name, len(raw), limit)
                yield _gunzip(raw, byte_limit(len(raw)), name)
                return
            total = 0
            while block:
                total += len(block)
                _check_size(name, total, limit)  # it grew past the limit since the stat
                yield block
                block = handle.read(block_bytes)
    except (EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{name}: truncated or corrupt gzip ({exc})", hint="re-export the trace") from None
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words (its st_mode)."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _read_regular(name: str) -> bytes:
    """The bytes of a regular file (symlinks followed) no larger than the hard cap; never opens a FIFO."""
    handle, size, limit = _open_regular(name)
    with handle:
        # read(n) allocates n bytes up front: ask for the size the file has, then for any growth.
        data = handle.read(min(size, limit) + 1)
        if len(data) > size:  # it grew since the stat
            data = bytearray(data)
            while len(data) <= limit and (piece := handle.read(_CHUNK)):
                data += piece
    _check_size(name, len(data), limit)
    return data


def _open_regular(name: str):
    """(open binary file, its size, the byte limit) of a regular file (symlinks followed) no larger than the
    hard cap; never opens a FIFO."""
    info = os.stat(name)  # follows symlinks: a link to /dev/zero is a character device
    if not stat.S_ISREG(info.st_mode):
        raise TraceFormatError(f"{name}: {file_kind(info.st_mode)}, not a trace file",
                               hint="give a .json or .json.gz file")
    limit = byte_limit()
    _check_size(name, info.st_size, limit)
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    handle = os.fdopen(fd, "rb")
    again = os.fstat(handle.fileno())
    if not stat.S_ISREG(again.st_mode):  # swapped between the stat and the open
        handle.close()
        raise TraceFormatError(f"{name}: {file_kind(again.st_mode)}, not a trace file")
    return handle, again.st_size, limit


def _check_size(name: str, size: int, limit: int) -> None:
    if size > limit:
        raise TraceFormatError(f"{name}: {size:,} bytes, above the limit of {limit:,} bytes",
                               hint=f"set {LIMIT_VARIABLE} (bytes) to read a larger trace")


def _gunzip(data: bytes, limit: int, name: str) -> bytearray:
    """Decompress gzip (all members) a megabyte at a time into one growing buffer of at most `limit` bytes.

    gzip.decompress keeps its own growing output and then copies it out: at a 368 MB trace that
    is ~300 MB more peak memory than appending each piece to the buffer the decoder then reads.
    Each step's output is bounded (`max_length`), so a bomb is stopped a megabyte past the limit.
    """
    out = bytearray()
    view = memoryview(data)
    start = 0
    while start < len(data):
        inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around deflate
        pos, pending = start, b""
        while not inflate.eof:
            if not pending:
                if pos >= len(data):
                    raise EOFError("compressed file ended before the end-of-stream marker")
                pending = view[pos:pos + _CHUNK]
                pos += _CHUNK
            out += inflate.decompress(pending, _CHUNK)
            pending = inflate.unconsumed_tail
            if len(out) > limit:
                raise TraceFormatError(
                    f"{name}: gzip expands past {limit:,} bytes ({len(data):,} compressed): refused as a likely "
                    "gzip bomb", hint=f"set {LIMIT_VARIABLE} (bytes) to read a larger trace")
        # What this member did not use of the input fed to it starts the next member.
        start = min(pos, len(data)) - len(pending) - len(inflate.unused_data)
        if data[start:start + 1] == b"\0" and not bytes(view[start:]).strip(b"\0"):
            break  # trailing zero padding after the last member, as gzip itself tolerates (checked once)
    return out
