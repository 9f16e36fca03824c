"""Opening a trace file without trusting it: FIFOs, devices, directories, size caps, gzip bombs.

Every reader opens its file through `profilers.traces.files.read_trace_bytes`; each case here was a
hang or a memory blow-up before (a FIFO blocked `open` for ever; /dev/zero and a 6 MB gzip bomb
grew a buffer until the machine ran out of memory).
"""

from __future__ import annotations

import gzip
import os
import zlib

import pytest

from tbd.core.errors import TraceFormatError, UsageError
from tbd.profilers.kineto.reader import read_trace_file
from tbd.profilers.mxnet import trace as mxnet_trace
from tbd.profilers.tensorflow import trace as tensorflow_trace
from tbd.profilers.traces.files import GZIP_FLOOR_BYTES, LIMIT_VARIABLE, byte_limit, read_trace_bytes


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)  # no writer: an open() for reading would block for ever
    with pytest.raises(TraceFormatError, match="a FIFO .named pipe., not a trace file"):
        read_trace_file(fifo)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_symlink_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "trace.json.gz"
    link.symlink_to("/dev/zero")
    for read in (read_trace_file, mxnet_trace.read_trace_file, tensorflow_trace.read_trace_file):
        with pytest.raises(TraceFormatError, match="a character device, not a trace file"):
            read(link)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(TraceFormatError, match="a directory, not a trace file"):
        read_trace_bytes(tmp_path)


def _bomb(expanded: int) -> bytes:
    """gzip of `expanded` spaces (valid JSON whitespace): a few hundred KB per 256 MiB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(expanded >> 20)) + packer.flush()


def test_a_gzip_bomb_is_refused_a_megabyte_past_the_limit(tmp_path):
    path = tmp_path / "trace.json.gz"
    data = _bomb(GZIP_FLOOR_BYTES + (8 << 20))  # 264 MiB from ~260 KB: ratio ~1000
    path.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        read_trace_file(path)
    line = err.value.one_line()
    assert f"gzip expands past {GZIP_FLOOR_BYTES:,} bytes ({len(data):,} compressed)" in line
    assert LIMIT_VARIABLE in line and "\n" not in line


def test_the_limit_variable_replaces_both_bounds(tmp_path, monkeypatch):
    path = tmp_path / "trace.json.gz"
    text = b'{"traceEvents": []}' + b" " * 5000
    path.write_bytes(gzip.compress(text))  # ratio ~100: under the default bounds
    assert read_trace_bytes(path) == text
    monkeypatch.setenv(LIMIT_VARIABLE, "4096")
    with pytest.raises(TraceFormatError, match="gzip expands past 4,096 bytes"):
        read_trace_bytes(path)
    plain = tmp_path / "trace.json"
    plain.write_bytes(text)
    with pytest.raises(TraceFormatError, match=f"{len(text):,} bytes, above the limit of 4,096 bytes"):
        read_trace_bytes(plain)
    monkeypatch.setenv(LIMIT_VARIABLE, "lots")
    with pytest.raises(UsageError, match="TBD_MAX_TRACE_BYTES='lots' is not a positive number of bytes"):
        read_trace_bytes(plain)


def test_the_default_gzip_bound_is_200x_above_a_256_mib_floor(monkeypatch):
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)
    assert byte_limit(1000) == 256 << 20
    assert byte_limit(10 << 20) == 200 * (10 << 20)
    assert byte_limit(1 << 30) == 32 << 30  # the hard cap
    assert byte_limit() == 32 << 30


def test_gzip_members_are_found_past_the_first_megabyte(tmp_path):
    """The next member starts where the last one's input ended, not at len(data) - unused (an old bug
    that lost or garbled the second member of a multi-member file larger than one chunk)."""
    first = os.urandom(3 << 20).hex().encode()  # incompressible: the first member alone is > 1 MB
    second = b"second member"
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress(first) + gzip.compress(second) + b"\0" * 512)
    assert read_trace_bytes(path) == first + second
