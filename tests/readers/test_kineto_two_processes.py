"""The Kineto reader with a second process (profilers.kineto.decode: a forked child decodes from a
separator near the middle of the text while the caller decodes up to it, and its columns are merged).

The reference is the whole-text decoding (`decode._decode`), column for column, codes included: the
builder numbers names, signatures and threads in one order whatever the batches and the split
(`ColumnBuilder.build`). The threshold is lowered so that every trace here is split, and chunks are
made small so that the split falls between many cuts; a child that fails leaves the reading to the
caller, with the same result or the same error.
"""

from __future__ import annotations

import gzip

import pytest
from test_kineto_chunks import KINETO_TRACES, _same, generated  # noqa: F401 - generated is a fixture

from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto import decode
from tbd.profilers.kineto.reader import read_trace_file
from tbd.profilers.traces import forked
from tbd.profilers.traces.events import read_trace_bytes


@pytest.fixture
def split_always(monkeypatch):
    """Every text is split, and each child started is counted (a test must see the split happen)."""
    monkeypatch.setattr(decode, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(decode, "_CHUNK_BYTES", 4096)
    monkeypatch.setattr(forked, "available", lambda: True)
    started = []

    class Counted(forked.Child):
        def __init__(self, call, *args):
            started.append(call.__name__)
            super().__init__(call, *args)

    monkeypatch.setattr(forked, "Child", Counted)
    return started


@pytest.mark.parametrize("path", KINETO_TRACES, ids=lambda p: p.name)
def test_two_processes_read_what_one_does(path, split_always):
    if not path.exists():
        pytest.skip(f"{path.name} not found (tests/fixtures/README.md)")
    text = read_trace_bytes(path)
    whole = decode._decode(text, str(path), ())
    _same(read_trace_file(path), whole)
    if text.lstrip()[:1] != b"[":  # a bare array of events is read whole, by one process
        assert split_always, "the reading was not split"


def test_a_plain_file_is_split_and_read_from_its_middle(generated, split_always, tmp_path):  # noqa: F811
    path, truth = generated
    trace = read_trace_file(path)
    assert split_always == ["_second_part"]  # the file's second half read by the child, from the file
    _same(trace, decode._decode(path.read_bytes(), str(path), ()))
    assert len(trace.kernels.name) == truth.kernels
    gz = tmp_path / "trace.json.gz"  # a gzip text is inflated once: the child reads it from memory
    gz.write_bytes(gzip.compress(path.read_bytes()))
    _same(read_trace_file(gz), decode._decode(path.read_bytes(), str(gz), ()))
    assert split_always == ["_second_part"] * 2


def test_one_process_when_no_second_core(generated, monkeypatch, split_always):  # noqa: F811
    path, _ = generated
    monkeypatch.setattr(forked, "available", lambda: False)
    _same(read_trace_file(path), decode._decode(path.read_bytes(), str(path), ()))
    assert split_always == []


def test_a_failing_child_leaves_the_reading_to_the_caller(generated, split_always, monkeypatch):  # noqa: F811
    path, _ = generated

    def failing(*_):
        raise MemoryError("no memory in the child")

    monkeypatch.setattr(decode, "_second_part", failing)
    _same(read_trace_file(path), decode._decode(path.read_bytes(), str(path), ()))
    assert split_always == ["failing"]


def test_an_error_in_the_second_half_is_the_one_reader_s(generated, tmp_path, split_always):  # noqa: F811
    """A corrupt event past the middle: the child fails, and the whole-text reading words the error."""
    path, _ = generated
    text = path.read_bytes()
    cut = text.index(b'"ts": ', len(text) * 3 // 4)
    broken = tmp_path / "broken.json"
    broken.write_bytes(text[:cut] + b'"ts": "x' + text[cut + 7:])
    with pytest.raises(TraceFormatError, match=r"traceEvents\[\d+\]|corrupt JSON"):
        read_trace_file(broken)
    assert split_always


def test_the_child_s_result_or_its_failure_comes_back():
    child = forked.Child(divmod, 17, 5)
    assert child.result() == (3, 2)
    failing = forked.Child(divmod, 1, 0)
    with pytest.raises(forked.ChildFailed, match="ZeroDivisionError"):
        failing.result()
