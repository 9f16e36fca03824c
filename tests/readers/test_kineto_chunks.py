"""The Kineto reader's chunked decoding (profilers.kineto.decode: the text cut at the writer's event
separator as it is read, every cut proven by decoding the piece) against the whole-text decoding and
the generator's ground truth; and every layout where a cut cannot be proven falls back to the whole text.

The whole-text decoding (`decode._decode`: one pass splitting "traceEvents" into per-event slices,
then batches) is the reference here: the two paths share the column builder but not the splitting,
which is what these tests check. Blocks and chunks are made tiny so that events straddle every
boundary.
"""

from __future__ import annotations

import dataclasses
import gzip
import json

import numpy as np
import pytest
from testpaths import FIXTURES, TRACE_FOLDERS, load_bench

from tbd.analysis.utilization import device_busy_ns
from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto import decode
from tbd.profilers.kineto.reader import read_trace_file, trace_records
from tbd.profilers.traces.events import read_trace_bytes
from tbd.profilers.traces.files import trace_blocks

synthetic = load_bench("synthetic_kineto")

KINETO_TRACES = sorted({p.name: p for base in reversed(TRACE_FOLDERS) for p in (base / "gpu").glob("pt*.json*")}
                       .values()) + [FIXTURES / "kineto_cpu_small.json.gz", FIXTURES / "kineto_cuda_synthetic.json"]


def _same(a, b, where: str = "trace") -> None:
    """Every field equal: arrays by dtype, shape and value (NaN equal to NaN)."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    else:
        assert a == b, where


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(decode, "_CHUNK_BYTES", 2048)


@pytest.mark.parametrize("path", KINETO_TRACES, ids=lambda p: p.name)
def test_chunked_decoding_equals_the_whole_text(path, tiny_chunks):
    if not path.exists():
        pytest.skip(f"{path.name} not found (tests/fixtures/README.md)")
    whole = decode._decode(read_trace_bytes(path), str(path), ())
    if read_trace_bytes(path).lstrip()[:1] == b"[":  # a bare array of events (late-2020 torch): whole text only
        with pytest.raises(decode._Unproven):
            decode._decode_chunks(trace_blocks(path, 4096), str(path))
    else:
        _same(decode._decode_chunks(trace_blocks(path, 4096), str(path)), whole)
    _same(read_trace_file(path), whole)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "trace.json"  # plain: read a block at a time
    return path, synthetic.write_trace(path, events=20_000, steps=3)


def test_chunked_reading_of_a_plain_file_is_exact(generated, monkeypatch):
    path, truth = generated
    monkeypatch.setattr(decode, "_CHUNK_BYTES", 50_000)
    blocks = list(trace_blocks(path, 65_536))
    assert len(blocks) > 50 and b"".join(blocks) == path.read_bytes()
    trace = decode._decode_chunks(iter(blocks), str(path))
    _same(trace, decode._decode(path.read_bytes(), str(path), ()))
    records = trace_records(trace, str(path), flops_of=lambda *_: None, precision_of=lambda *_: "")
    assert device_busy_ns(records) == truth.busy_ns
    assert (records.window_start_ns, records.window_end_ns) == (truth.window_start_ns, truth.window_end_ns)
    assert len(records.kernels) == truth.kernels
    assert (trace.kernels.grid >= 0).all() and (trace.kernels.registers == 72).all()  # the writer's config


def _kineto_text(events: list[dict], indent: int | None = 2, **top) -> bytes:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events, "traceName": "t"}, indent=indent,
                      separators=(",", ":") if indent is None else None).encode()


def _events(n: int) -> list[dict]:
    return [{"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 1000 + 10 * i, "dur": 5,
             "args": {"device": 0, "stream": 7, "correlation": i, "grid": [i + 1, 1, 1], "block": [128, 1, 1]}}
            for i in range(n)]


@pytest.mark.parametrize("text", [
    _kineto_text(_events(40)),  # one event per line, as Kineto writes
    _kineto_text(_events(40), indent=None),  # minified: the separator has no newline
    _kineto_text(_events(40), host_name="h", trace_id="x"),  # top-level fields before and after the events
    _kineto_text(_events(1)),  # a single event: no separator at all
], ids=["indented", "minified", "metadata", "one-event"])
def test_layouts_the_chunks_read(text, tiny_chunks):
    trace = decode._decode_chunks(iter((text,)), "t")
    _same(trace, decode._decode(text, "t", ()))


@pytest.mark.parametrize("text", [
    json.dumps(_events(30), indent=2).encode(),  # a bare array (late-2020 torch)
    _kineto_text(_events(30), distributedInfo={"traceEvents": [{"a": 1}]}),  # the key twice, nested first
    _kineto_text(_events(30)) + b" garbage",  # text after the top-level object
    _kineto_text(_events(30), indent=None).replace(b'"name":"k1"', b'"name":"k1},{"'),  # separator in a string
    _kineto_text([{"ph": "X", "args": {"nested": [{"a": 1}, {"b": 2}]}, "ts": 1, "dur": 1, "cat": "x"}] * 30,
                 indent=2).replace(b"},\n          {", b"},\n    {"),  # a list of objects inside an event, laid
    # out as the events are: the event separator appears inside an event
    _kineto_text(_events(30)).replace(b'"dur": 5', b'"dur": "5"', 1),  # a field of the wrong type
], ids=["bare-array", "key-nested-first", "trailing-garbage", "separator-in-string", "nested-cut", "bad-type"])
def test_unprovable_cuts_fall_back_to_the_whole_text(text, monkeypatch, tmp_path):
    monkeypatch.setattr(decode, "_CHUNK_BYTES", 1)  # a cut at every separator the text holds, false ones too
    with pytest.raises((decode._Unproven, TraceFormatError)):  # the builder's own error: the caller falls back too
        decode._decode_chunks(iter((text,)), "t")
    path = tmp_path / "trace.json"
    path.write_bytes(text)
    try:
        expected = decode._decode(text, str(path), ())
    except (TraceFormatError, decode._Unrepaired) as exc:  # the whole text decides the error too
        with pytest.raises(TraceFormatError) as got:
            read_trace_file(path)
        if isinstance(exc, TraceFormatError):
            assert str(got.value) == str(exc)
        return
    _same(read_trace_file(path), expected)


def test_an_error_is_worded_by_the_whole_text(generated, tmp_path, tiny_chunks):
    """A corrupt event deep in the file: the message the whole-text reading gives (with the event's index)."""
    path, _ = generated
    text = path.read_bytes()
    cut = text.rindex(b'"ts": ', 0, len(text) // 2)
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(text[:cut] + b'"ts": "x' + text[cut + 7:]))
    with pytest.raises(TraceFormatError, match=r"traceEvents\[\d+\]|corrupt JSON"):
        read_trace_file(broken)
