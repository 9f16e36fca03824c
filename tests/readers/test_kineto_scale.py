"""The columnar Kineto reader on generated traces larger than one decode batch, against the
generator's own ground truth (bench/synthetic_kineto.py counts every interval it writes).

Times sit on an epoch-sized origin (1.7e15 µs), where float64 would move ends by up to 128 ns,
so busy time matching to the nanosecond shows the exact path end to end.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from testpaths import load_bench

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.ranking import factorize
from tbd.analysis.utilization import device_busy_ns
from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto import decode as kineto_decode
from tbd.profilers.kineto.reader import read_trace_file, trace_records

synthetic = load_bench("synthetic_kineto")
EVENTS = 30_000  # several decode batches (kineto_decode.BATCH_EVENTS events each)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "trace.json.gz"
    truth = synthetic.write_trace(path, events=EVENTS, steps=4)
    return path, truth


@pytest.fixture(scope="module")
def records(generated):
    path, _ = generated
    return trace_records(read_trace_file(path), str(path), flops_of=op_flops, precision_of=precision_of)


def test_the_trace_spans_several_batches(generated):
    _, truth = generated
    assert truth.events > 3 * kineto_decode.BATCH_EVENTS


def test_busy_time_and_window_are_exact(generated, records):
    _, truth = generated
    assert device_busy_ns(records) == truth.busy_ns
    assert (records.window_start_ns, records.window_end_ns) == (truth.window_start_ns, truth.window_end_ns)
    assert truth.window_start_ns > 2**53  # beyond float64's exact integers, in ns


def test_every_kernel_name_has_its_calls_and_time(generated, records):
    _, truth = generated
    k = records.kernels
    assert len(k) == truth.kernels
    codes, names = factorize(k.name)
    got = {n: [int(c), int(t)] for n, c, t in zip(names, np.bincount(codes), np.bincount(codes, weights=k.dur_ns))}
    assert got == truth.kernel_totals


def test_conv_and_gemm_flops_add_up(generated, records):
    _, truth = generated
    k = records.kernels
    mine = np.isin(k.op, ["aten::convolution", "aten::convolution_backward", "aten::addmm", "aten::mm"])
    assert np.nansum(k.flops[mine]) == pytest.approx(truth.conv_gemm_flops, rel=1e-12)


def test_ops_steps_and_memory_are_all_read(generated, records):
    _, truth = generated
    assert [s.number for s in records.steps] == [1, 2, 3, 4]
    assert len(records.ops) == truth.cpu_ops
    assert len(records.memory) == truth.memory_events
    assert f"{truth.copies} memcpy/memset events not counted as kernels or busy time" in records.notes


def test_a_formula_runs_once_per_distinct_signature(generated):
    path, truth = generated
    calls = []

    def counting(op):
        calls.append((op.name, op.input_dims, op.input_types, op.concrete_inputs))
        return op_flops(op)

    trace = read_trace_file(path)
    trace_records(trace, "x", flops_of=counting, precision_of=precision_of)
    assert len(calls) == len(set(calls)) == len(trace.signatures) < truth.cpu_ops / 50


def test_a_malformed_event_is_named_by_its_index_in_the_trace(generated, tmp_path):
    path, _ = generated
    trace = json.loads(gzip.decompress(path.read_bytes()))
    index = 3 * kineto_decode.BATCH_EVENTS + 5  # in the fourth batch
    trace["traceEvents"][index]["args"] = ["not", "an", "object"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(trace))
    with pytest.raises(TraceFormatError, match=rf"traceEvents\[{index}\]\.args"):
        read_trace_file(bad)


def test_bare_event_arrays_and_metadata(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))  # late-2020 torch wrote a bare array
    assert read_trace_file(bare).ops.start_ns.tolist() == [10_000]
    full = tmp_path / "full.json"
    full.write_text(json.dumps({"traceEvents": events, "host_name": "h", "deviceProperties": [{"id": 0}],
                                "unknownTopLevel": {"big": list(range(10))}}))
    assert read_trace_file(full).metadata == {"host_name": "h", "deviceProperties": [{"id": 0}]}
