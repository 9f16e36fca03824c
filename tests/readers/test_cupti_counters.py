"""Counters of Kineto's CUPTI range profiler in a PyTorch trace: ranges, measured work, hostile traces.

The fixture kineto_cupti_counters.json is hand-written to the layout Kineto writes
(tests/fixtures/COUNTERS.md); its counters are those of the ncu fixture's kernels, so the arithmetic
below is the same as in test_ncu_csv.py.
"""

from __future__ import annotations

import gzip
import json

import pytest
from testpaths import FIXTURES

from tbd.core.errors import TraceFormatError
from tbd.profilers.cupti_counters import (
    RECORD_HINT,
    decode_cupti_counters,
    measured_launches,
    range_work,
    read_cupti_counters,
)

TRACE = FIXTURES / "kineto_cupti_counters.json"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"


def _trace(*ranges: dict, extra: list | None = None) -> bytes:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "args": {}}]
    events += [{"ph": "X", "cat": "cuda_profiler_range", "pid": 0, "tid": 0, **r} for r in ranges]
    return json.dumps({"schemaVersion": 1, "traceEvents": events + (extra or [])}).encode()


def _refused(data: bytes, match: str) -> TraceFormatError:
    with pytest.raises(TraceFormatError, match=match) as caught:
        decode_cupti_counters(data, "t.json")
    assert "\n" not in caught.value.one_line()
    return caught.value


def test_the_fixture_has_five_ranges_in_launch_order():
    ranges = read_cupti_counters(TRACE).ranges
    assert [r.index for r in ranges] == [0, 1, 2, 3, 4]
    assert ranges[0].name == "ampere_sgemm_128x64_nn"
    # Kineto's demangler: "1024", "false", "float const*" (ncu prints "(int)1024", "(bool)0", "const T1 *").
    assert ranges[1].name.startswith("void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, "
                                     "false, false, true>(int, int, int, float const*,")
    assert ranges[4].name == "__missing__"
    assert {r.device for r in ranges} == {0}
    # Kineto splits the session's span evenly: 1,000 µs apart and long, from 1700000000100050 µs.
    assert [r.ts_ns for r in ranges] == [(1_700_000_000_100_050 + 1000 * k) * 1000 for k in range(5)]
    assert {r.dur_ns for r in ranges} == {1_000_000}
    assert ranges[0].metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == 61.25
    assert len(ranges[0].metrics) == 9 + 1 + 2 + 1  # core-flops alias, tensor insts, DRAM r/w, throughput


def test_measured_work_of_each_range():
    sgemm, conv, add, hgemm, missing = (range_work(r) for r in read_cupti_counters(TRACE).ranges)
    # FP32 = fadd + fmul + 2 ffma; M=512 N=1024 K=256
    assert sgemm.fp32_flops == 0 + 512 * 1024 + 2 * 512 * 1024 * 256 == 268_959_744
    assert (sgemm.fp16_flops, sgemm.fp64_flops, sgemm.tensor_instructions) == (0, 0, 0)
    assert sgemm.dram_bytes == (512 * 256 + 256 * 1024) * 4 + 512 * 1024 * 4
    assert conv.fp32_flops == 1_605_632 + 2 * 1_605_632 * 576
    assert add.fp32_flops == 2 * 1_048_576 and add.dram_write_bytes == 4 * 1_048_576
    # FP16 = 2 hadd + 2 hmul + 4 hfma; tensor work as instructions only: no sm__ops_path counter collected
    assert hgemm.fp16_flops == 4 * 524_288 and hgemm.fp32_flops == 0
    assert hgemm.tensor_instructions == 1024**3 // 2048
    assert hgemm.tensor_ops is None  # not collected: unknown, never 0
    assert missing.fp32_flops == sgemm.fp32_flops and missing.dram_read_bytes == 1_576_960


def test_ranges_are_ordered_by_device_then_start_and_keys_that_are_not_metrics_are_ignored():
    data = _trace({"name": "b", "ts": 20, "dur": 10, "args": {FFMA: 2}},
                  {"name": "a", "ts": 10, "dur": 10, "args": {FFMA: 1, "note": "x", "Ev Idx": 3}},
                  {"name": "c", "pid": 1, "ts": 5, "dur": 10, "args": {FFMA: 3.5}})
    ranges = decode_cupti_counters(data, "t.json").ranges
    assert [(r.device, r.index, r.name) for r in ranges] == [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    assert dict(ranges[0].metrics) == {FFMA: 1}
    assert ranges[2].metrics[FFMA] == 3.5
    assert range_work(ranges[0]).fp32_flops is None  # fadd and fmul not collected


def test_fractional_times_and_a_bare_event_list_are_read():
    # Kineto's fixed-point µs, read exactly (a float would round the ns: 1712195495505583000)
    text = b'[{"ph": "X", "cat": "cuda_profiler_range", "name": "k", "pid": 0, "ts": 1712195495505582.988, "dur": 0.5}]'
    only = decode_cupti_counters(text, "t.json").ranges[0]
    assert (only.ts_ns, only.dur_ns) == (1_712_195_495_505_582_988, 500)
    assert dict(only.metrics) == {}


def test_a_gzipped_trace_reads_the_same(tmp_path):
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(TRACE.read_bytes()))
    assert read_cupti_counters(packed).ranges == read_cupti_counters(TRACE).ranges


def test_a_trace_without_counters_says_how_to_record_them():
    error = _refused(_trace(), "no cuda_profiler_range events")
    assert error.hint == RECORD_HINT
    assert "profiler_measure_per_kernel=True" in error.hint and "2.14" in error.hint


def test_values_that_are_not_numbers_are_refused_naming_the_metric():
    for bad in ("n/a", None, True, [1], 10**400):
        _refused(_trace({"name": "k", "ts": 1, "dur": 1, "args": {FFMA: bad}}), f"{FFMA} is .*, not a number")
    _refused(_trace({"name": "k", "ts": 1, "dur": 1, "args": [1, 2]}), "args is not an object")
    _refused(_trace({"name": "k", "pid": "GPU 0", "ts": 1, "dur": 1, "args": {}}), "pid 'GPU 0' is not a device")


def test_files_that_are_not_traces_are_refused(tmp_path):
    _refused(b"ID,Kernel Name\n", "not JSON")
    _refused(b'{"traceEvents": 3}', "not a PyTorch profiler trace")
    _refused(b'{"traceEvents": [1, 2]}', "not a PyTorch profiler trace")
    _refused(b'{"schemaVersion": 1}', 'no "traceEvents"')
    with pytest.raises(TraceFormatError, match="a directory, not a trace file") as caught:
        read_cupti_counters(tmp_path)
    assert caught.value.hint == RECORD_HINT


def test_measured_launches_of_any_trace(tmp_path):
    launches = measured_launches(TRACE)
    assert [x.name for x in launches][3:] == ["ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
                                              "__missing__"]
    assert launches[0].flops == 268_959_744 + 0 + 0 and launches[0].dram_bytes == 1_572_864 + 2_097_152
    assert launches[3].tensor_ops is None
    # a trace without ranges (every ordinary trace) has none, and is not an error here
    plain = tmp_path / "plain.json"
    plain.write_bytes(_trace())
    assert measured_launches(plain) == []
    assert read_cupti_counters(plain, required=False).ranges == ()
    with pytest.raises(TraceFormatError, match="no cuda_profiler_range events"):
        read_cupti_counters(plain)


def test_bytes_that_are_not_utf8_in_a_name_are_replaced_and_an_oversized_number_refused():
    data = _trace({"name": "k_NAME", "ts": 1, "dur": 1, "args": {FFMA: 1}}).replace(b"_NAME", b"\xff")
    assert decode_cupti_counters(data, "t.json").ranges[0].name == "k\ufffd"
    data = _trace({"name": "k", "ts": 1, "dur": 1, "args": {FFMA: 1}}).replace(b": 1}", b": 1e999}")
    _refused(data, "args is not JSON")
