"""Kineto traces of every PyTorch era, in small hand-written copies of each era's layout.

The layouts follow the real public traces listed in tests/fixtures/README.md ("gpu/"): PyTorch
1.8's bare array with capitalised categories and "stream 7" thread ids, 1.9's "[memory]" events
without "Addr", ROCm's string stream ids, an A100 running TF32 tensor-core GEMMs for fp32 ops.
Each expectation is written out as arithmetic from the events below.
"""

from __future__ import annotations

import json

import pytest

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.utilization import device_busy_ns
from tbd.cli.run_analysis import profile_from_trace
from tbd.profilers.kineto.reader import read_trace_file, trace_records

US = 1000


def _write(tmp_path, events, header=None, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(events if header is None else {**header, "traceEvents": events}))
    return path


def _records(path):
    return trace_records(read_trace_file(path), str(path), flops_of=op_flops, precision_of=precision_of)


# PyTorch 1.8 (late 2020): a bare array; "Operator"/"Runtime"/"Kernel"/"Memset"; host tids as
# strings, kernels on tid "stream 7" with no stream arg; ProfilerStep as an Operator.
PT18 = [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#7", "pid": 13721, "tid": "456", "ts": 100, "dur": 400},
    {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 110, "dur": 50,
     "args": {"Input dims": [[8, 16], [16, 4]], "external id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 10,
     "args": {"correlation": 40348, "external id": 4}},
    {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_32x32_sliced1x4_nn", "pid": 0, "tid": "stream 7",
     "ts": 200, "dur": 30, "args": {"correlation": 40348, "external id": 4, "device": 0}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 13721, "tid": "456", "ts": 170, "dur": 10,
     "args": {"correlation": 40344, "external id": 5}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 240, "dur": 5,
     "args": {"stream": 7, "correlation": 40344, "external id": 5}},
    {"ph": "X", "cat": "Kernel", "name": "void kernel_b", "pid": 0, "tid": "stream 7", "ts": 230, "dur": 20,
     "args": {"correlation": 40349, "device": 0}},
]


def test_pytorch_1_8_bare_array_with_legacy_categories(tmp_path):
    rec = _records(_write(tmp_path, PT18))
    assert rec.device_kind == "cuda" and [s.number for s in rec.steps] == [7]
    k = rec.kernels
    assert k.name.tolist() == ["volta_sgemm_32x32_sliced1x4_nn", "void kernel_b"]
    assert k.stream.tolist() == [7, 7] and k.device.tolist() == [0, 0]  # "stream 7" -> 7
    assert k.op.tolist() == ["aten::mm", ""]  # kernel_b's correlation has no runtime call
    # 1.8 wrote the shapes as "Input dims" (lower-case d): aten::mm's 2·8·16·4 FLOPs are counted.
    assert k.flops[0] == 2 * 8 * 16 * 4 and k.flop_gap.tolist() == ["", "no_launch_op"]
    # window: step host 100-500 µs; kernels 200-230 and 230-250 touch: busy 50 µs
    assert (rec.window_start_ns, rec.window_end_ns) == (100 * US, 500 * US)
    assert device_busy_ns(rec) == (250 - 200) * US
    assert rec.ops.tid.tolist() == [456] and "1 memcpy/memset events not counted as kernels or busy time" in rec.notes


def test_pytorch_1_9_memory_without_addr_leaves_memory_null_not_an_error(tmp_path):
    events = PT18 + [{"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": "456", "ts": 150,
                      "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512}}]
    path = _write(tmp_path, events, {"schemaVersion": 1, "deviceProperties": [
        {"id": 0, "name": "Tesla V100-DGXS-32GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80}]})
    rec = _records(path)
    assert rec.memory is None and device_busy_ns(rec) == 50 * US
    profile = profile_from_trace(path)
    assert any('"[memory]" events without a readable "Addr"' in n for n in profile.notes)
    assert profile.metrics.memory_bytes.allocator_peak is None


def test_rocm_string_streams_and_an_unknown_amd_name(tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 9, "tid": 9, "ts": 10, "dur": 5,
         "args": {"stream": "0x0", "correlation": 117, "kind": "1"}},
        {"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk_SB_MT64x64x16", "pid": 2, "tid": 0, "ts": 20, "dur": 30,
         "args": {"device": 2, "stream": "0x7f00", "correlation": 117}},
    ]
    path = _write(tmp_path, events, {"deviceProperties": [
        {"id": 0, "name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 60,
         "warpSize": 64}]})
    rec = _records(path)
    assert rec.kernels.stream.tolist() == [0x7F00] and device_busy_ns(rec) == 30 * US
    fu = profile_from_trace(path).metrics.flop_util_pct
    # A gfx906 (MI50: 60 CUs) reports compute capability 9.0: never looked up as a Hopper part, and no AMD
    # row has 60 CUs. (104 CUs would be an MI210 / MI250 GCD: tests/unit/test_gpu_table.py.)
    assert fu.value is None and "AMD Radeon Graphics" in fu.reason and "--peak-flops" in fu.reason


def _a100_tf32_trace(tmp_path):
    """aten::addmm on fp32 [512, 1024] x [1024, 1024] running cuBLAS's TF32 tensor-core kernel for 20 µs,
    and aten::mm on fp32 [512, 1024] x [1024, 1024] running a genuine FP32 SGEMM for 200 µs."""
    def op(name, ts, dims, corr):
        return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 30,
                 "args": {"Input Dims": dims, "Input type": ["float"] * len(dims),
                          "Concrete Inputs": [""] * len(dims)}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 5,
                 "dur": 5, "args": {"correlation": corr}}]
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0,
               "dur": 1000}]
    events += op("aten::addmm", 10, [[1024], [512, 1024], [1024, 1024], [], []], 1)
    events += op("aten::mm", 50, [[512, 1024], [1024, 1024]], 2)
    events += [
        {"ph": "X", "cat": "kernel", "name": "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", "pid": 0,
         "tid": 7, "ts": 100, "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 200, "dur": 200,
         "args": {"device": 0, "stream": 7, "correlation": 2}}]
    return _write(tmp_path, events, {"deviceProperties": [
        {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108}]})


def test_a100_tf32_kernels_are_measured_against_the_tf32_peak(tmp_path):
    profile = profile_from_trace(_a100_tf32_trace(tmp_path))
    rows = {r.name: r for r in profile.kernels}
    gemm = 2 * 512 * 1024 * 1024  # 1.07e9 FLOPs each
    tf32 = rows["cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"]
    # The A100 datasheet's dense peaks: TF32 156 TFLOP/s, FP32 19.5 TFLOP/s.
    assert tf32.precision == "tf32" and tf32.util_pct == pytest.approx(100 * gemm / (156e12 * 20e-6))
    assert tf32.util_note is None  # 34 %: against FP32 it would read 275 %
    sgemm = rows["ampere_sgemm_128x64_nn"]
    assert sgemm.precision == "fp32" and sgemm.util_pct == pytest.approx(100 * gemm / (19.5e12 * 200e-6))
    fu = profile.metrics.flop_util_pct
    assert fu.peak_source == "gpu_table" and "A100" in fu.peak_formula
    assert fu.peaks_by_precision["tf32"] == 156e12


def test_a_group_above_its_peak_is_flagged_and_left_out_of_the_threshold(tmp_path):
    # The same trace with the user's FP32 peak set far too low: the SGEMM reads above 100 %.
    profile = profile_from_trace(_a100_tf32_trace(tmp_path), peak_flops=1e12)
    rows = {r.name: r for r in profile.kernels}
    assert rows["ampere_sgemm_128x64_nn"].util_note.startswith("above peak")
    assert profile.metrics.flop_util_pct.peak_source == "user"
    # Only the TF32 group is left for the threshold.
    assert profile.metrics.flop_util_pct.kernel_average_pct == pytest.approx(rows[
        "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"].util_pct)


def test_sm_clock_without_device_properties_is_said_not_ignored(tmp_path):
    profile = profile_from_trace(_write(tmp_path, PT18), sm_clock_mhz=1530)
    assert any("--sm-clock-mhz ignored" in n for n in profile.notes)
    assert "deviceProperties" in profile.metrics.flop_util_pct.reason
