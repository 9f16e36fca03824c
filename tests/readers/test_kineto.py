"""The Kineto trace reader: exact ns times, the synthetic CUDA fixture, the real CPU fixture, errors.

Expected numbers for kineto_cuda_synthetic.json are derived in tests/fixtures/README.md; they are
written here as the same arithmetic. FLOPs come from a fake formula table (`fake_flops`) so these
tests do not depend on analysis/flops/ops.py's counts (one test plugs the shared table in).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.precision import kernel_precisions
from tbd.core.errors import TraceFormatError
from tbd.core.records import StepSpan
from tbd.profilers.kineto.reader import read_trace_file, trace_records

FIXTURES = FIXTURES
CUDA = FIXTURES / "kineto_cuda_synthetic.json"
CPU = FIXTURES / "kineto_cpu_small.json.gz"
PEAK = 1e12  # FLOP/s, the README's stated peak for every precision
US = 1000  # ns per µs


def fake_flops(op):
    """GEMMs from their shapes (2·M·K·N), a few ops by name, everything else: no formula."""
    d = op.input_dims
    if op.name == "aten::addmm":  # (bias, mat1 [M, K], mat2 [K, N], beta, alpha)
        return 2 * d[1][0] * d[1][1] * d[2][1]
    if op.name in ("aten::mm", "aten::matmul"):
        return 2 * d[0][0] * d[0][1] * d[1][1]
    return {"aten::native_batch_norm": 21000.0, "aten::relu": 6000.0, "aten::convolution_backward": 8e6}.get(op.name)


def fake_precision(types, dims=None):
    return "fp32" if types and types[0] == "float" else ""


def _records(path_or_trace, flops_of=fake_flops):
    trace = read_trace_file(path_or_trace) if isinstance(path_or_trace, Path) else path_or_trace
    return trace_records(trace, "test", flops_of=flops_of, precision_of=fake_precision,
                         kernel_precisions=kernel_precisions)


def _write(tmp_path, text: str, name="trace.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _union_ns(start, end) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(start.tolist(), end.tolist())):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


# --- exact nanoseconds ------------------------------------------------------------------------

KERNEL_PAIR = """{"traceEvents": [
 {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 4546152992280.000, "dur": 10},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 4546152992281.5,
  "dur": 1.25, "args": {"correlation": 1}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 4546152992283.001,
  "dur": 1, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 4546152992285.686, "dur": 1.314,
  "args": {"device": 0, "stream": 7, "correlation": 1}},
 {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 4546152992287, "dur": 0.4,
  "args": {"device": 0, "stream": 7, "correlation": 2}}]}"""


def test_fractional_microseconds_become_exact_nanoseconds(tmp_path):
    rec = _records(_write(tmp_path, KERNEL_PAIR))
    assert rec.kernels.start_ns.tolist() == [4546152992285686, 4546152992287000]
    assert rec.kernels.dur_ns.tolist() == [1314, 400]
    assert rec.ops.start_ns.tolist() == [4546152992280000] and rec.ops.end_ns.tolist() == [4546152992290000]
    # Back-to-back kernels stay touching: no false gap, busy = the summed durations.
    assert rec.busy_end_ns[0] == rec.busy_start_ns[1]
    assert _union_ns(rec.busy_start_ns, rec.busy_end_ns) == 1314 + 400
    # The whole trace is the window when there are no ProfilerStep spans.
    assert (rec.window_start_ns, rec.window_end_ns) == (4546152992280000, 4546152992290000)  # aten::relu's end
    assert rec.notes[0] == "no ProfilerStep spans: the whole trace is the window"
    assert rec.kernels.op.tolist() == ["aten::relu", "aten::relu"]
    assert rec.kernels.flops.tolist() == [6000.0 * 1314 / (1314 + 400), 6000.0 * 400 / (1314 + 400)]


def test_end_times_are_exact_where_float_arithmetic_is_not(tmp_path):
    # Why the reader parses decimals: in float64 this kernel's end comes out 1 ns late.
    assert round((6342670099757.738 + 29.605) * 1000) == 6342670099787344
    text = KERNEL_PAIR.replace("4546152992285.686", "6342670099757.738").replace("1.314", "29.605")
    rec = _records(_write(tmp_path, text))
    k1 = rec.kernels.name.tolist().index("k1")
    assert rec.busy_end_ns[k1] == 6342670099757738 + 29605 == 6342670099787343


# --- the synthetic CUDA fixture ---------------------------------------------------------------

@pytest.fixture(scope="module")
def cuda():
    return _records(CUDA)


def test_cuda_kernel_rows(cuda):
    k = cuda.kernels
    assert cuda.device_kind == "cuda"
    assert [n.split("<")[0].split("(")[0] for n in k.name] == [
        "volta_sgemm_64x32_sliced1x4_nn", "void at::native::elementwise_kernel",
        "void at::native::batch_norm_collect_statistics_kernel", "void at::native::vectorized_elementwise_kernel",
        "void at::native::vectorized_elementwise_kernel", "void cudnn::engines_precompiled::wgrad_alg0_engine",
        "void cudnn::cnn::dgrad2d_grouped_direct_kernel", "ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn"]
    assert k.start_ns.tolist() == [1010400, 1011000, 1013700, 1015800, 1109000, 1110000, 1112500, 1178000]
    assert k.dur_ns.tolist() == [3300, 2000, 2100, 1200, 1000, 6000, 3000, 12000]
    assert k.stream.tolist() == [7, 20, 7, 7, 7, 7, 20, 7]
    assert k.device.tolist() == [0] * 8
    assert k.step.tolist() == [1, 1, 1, 1, 2, 2, 2, 2]
    assert k.op.tolist() == ["aten::addmm", "aten::copy_", "aten::native_batch_norm", "aten::relu",
                             "aten::convolution_backward", "aten::convolution_backward",
                             "aten::convolution_backward", "aten::matmul"]
    assert k.precision.tolist() == ["fp32", "", "fp32", "fp32", "fp32", "fp32", "fp32", "tf32"]
    assert k.flop_source.tolist() == ["analytic", "", "analytic", "analytic", "analytic", "analytic",
                                      "analytic", "analytic"]


def test_cuda_flops_split_by_duration(cuda):
    conv = 8e6  # aten::convolution_backward, shared by its 3 kernels (1 + 6 + 3 µs)
    expected = [2 * 33 * 100 * 100, np.nan, 21000, 6000, conv * 1 / 10, conv * 6 / 10, conv * 3 / 10,
                2 * 40 * 100 * 1200]
    np.testing.assert_allclose(cuda.kernels.flops, expected, rtol=1e-12)


def test_cuda_utilization_and_low_util_ranking(cuda):
    k = cuda.kernels
    util_pct = k.flops / (PEAK * k.dur_ns / 1e9) * 100
    expected = [660000 / (PEAK * 3.3e-6) * 100, np.nan, 1.0, 0.5, 80.0, 80.0, 80.0, 80.0]
    np.testing.assert_allclose(util_pct, expected, rtol=1e-9)
    assert expected[0] == pytest.approx(20.0)
    known = np.isfinite(util_pct)
    average = (util_pct[known] * k.dur_ns[known]).sum() / k.dur_ns[known].sum()
    assert average == pytest.approx((20 * 3.3 + 1 * 2.1 + 0.5 * 1.2 + 80 * (1 + 6 + 3 + 12)) / 28.6)
    low = [int(i) for i in np.argsort(-k.dur_ns) if known[i] and util_pct[i] < average]
    assert low == [0, 2, 3]  # sgemm 3.3 µs, batch-norm 2.1 µs, relu 1.2 µs
    busy_ns = _union_ns(cuda.busy_start_ns, cuda.busy_end_ns)
    assert busy_ns == (1017_000 - 1010_400) + (1116_000 - 1109_000) + 12_000  # 25.6 µs
    assert np.nansum(k.flops) / (PEAK * busy_ns / 1e9) == pytest.approx(18_287_000 / (PEAK * 25.6e-6))


def test_cuda_back_to_back_kernels_touch(cuda):
    s, e = cuda.busy_start_ns, cuda.busy_end_ns
    assert e[0] == s[2] and e[2] == s[3]  # sgemm -> batch-norm -> relu on stream 7
    # Rounding each start and duration to whole µs would open a 1 µs gap (1013 -> 1014).
    assert round(1010.4) + round(3.3) < round(1013.7)


def test_cuda_steps_and_window(cuda):
    assert cuda.steps == (StepSpan(1, 1000 * US, 1100 * US, 1100 * US), StepSpan(2, 1100 * US, 1180 * US, 1190 * US))
    assert (cuda.window_start_ns, cuda.window_end_ns) == (1000 * US, 1190 * US)
    assert cuda.notes == ("1 memcpy/memset events not counted as kernels or busy time",
                          "1 kernels run wholly outside the window and are left out")
    # 15 cpu_ops; the warm-up aten::zero_ at 990 µs is outside the window.
    assert len(cuda.ops) == 14 and "ProfilerStep#1" not in cuda.ops.name.tolist()
    assert sorted(set(cuda.ops.tid.tolist())) == [100, 200]


def test_cuda_memory_events(cuda):
    m = cuda.memory
    assert m.ts_ns.tolist() == [1000500, 1002500, 1150000]
    assert m.bytes.tolist() == [4096, 1024, -4096]
    assert m.total_allocated.tolist() == [4096, 4096 + 1024, 4096 + 1024 - 4096]
    assert m.device.tolist() == [0, 0, 0] and m.addr.dtype == np.uint64


def test_outermost_formula_op_wins_and_nan_formula(cuda):
    assert cuda.kernels.op[-1] == "aten::matmul"  # aten::mm inside it also has a formula
    nan_conv = lambda op: float("nan") if op.name == "aten::convolution_backward" else fake_flops(op)  # noqa: E731
    k = _records(CUDA, flops_of=nan_conv).kernels
    conv = k.op == "aten::convolution_backward"
    assert conv.sum() == 3 and np.isnan(k.flops[conv]).all() and set(k.flop_source[conv]) == {""}


# --- the real CPU fixture ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu():
    return _records(CPU)


def test_cpu_self_times_add_up_to_roots(cpu):
    k = cpu.kernels
    assert cpu.device_kind == "cpu" and len(k) == len(cpu.ops) > 0
    assert (k.dur_ns >= 0).all() and set(k.device.tolist()) == {-1}
    assert k.dur_ns.sum() == (cpu.busy_end_ns - cpu.busy_start_ns).sum()
    assert not any(n.startswith(("ProfilerStep", "Optimizer.")) for n in k.name)


def test_cpu_steps_window_and_memory(cpu):
    assert [s.number for s in cpu.steps] == [2, 3]  # schedule(wait=1, warmup=1, active=2)
    assert all(s.end_ns == s.host_end_ns for s in cpu.steps)
    assert (cpu.window_start_ns, cpu.window_end_ns) == (cpu.steps[0].start_ns, cpu.steps[1].end_ns)
    assert set(cpu.kernels.step.tolist()) <= {2, 3}
    raw = gzip.decompress(CPU.read_bytes()).decode()
    assert len(cpu.memory) == raw.count('"name":"[memory]"') == 56
    assert (np.diff(cpu.memory.ts_ns) >= 0).all() and set(cpu.memory.device.tolist()) == {-1}


def test_cpu_flops_shared_by_op_and_descendants(cpu):
    linear = lambda op: 1000.0 if op.name in ("aten::linear", "aten::addmm") else None  # noqa: E731
    k = _records(CPU, flops_of=linear).kernels
    calls = int((k.name == "aten::linear").sum())
    assert calls == 2 * 2  # two Linear layers, two traced steps
    under = k.op == "aten::linear"
    # aten::addmm runs inside aten::linear: the outermost formula op takes every row beneath it.
    assert "aten::addmm" in set(k.name[under]) and "aten::addmm" not in set(k.op)
    assert np.nansum(k.flops) == pytest.approx(1000.0 * calls)
    assert np.isfinite(k.flops[under]).all() and np.isnan(k.flops[~under]).all()


# --- reading files and errors -----------------------------------------------------------------

def test_gzip_and_plain_read_the_same(tmp_path):
    plain = _write(tmp_path, gzip.decompress(CPU.read_bytes()).decode())
    a, b = _records(plain), _records(CPU)
    for col in a.kernels.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(a.kernels, col), getattr(b.kernels, col))
    assert (a.steps, a.window_start_ns, a.window_end_ns) == (b.steps, b.window_start_ns, b.window_end_ns)
    np.testing.assert_array_equal(a.memory.ts_ns, b.memory.ts_ns)


def test_old_traces_with_cpu_op_steps_and_integer_us(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 110, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 160, "dur": 5}]}
    rec = _records(_write(tmp_path, json.dumps(trace)))
    assert rec.steps == (StepSpan(7, 100 * US, 150 * US, 150 * US),)
    assert rec.kernels.name.tolist() == ["aten::add"] and rec.kernels.step.tolist() == [7]


@pytest.mark.parametrize("content, fragment", [
    (b'{"traceEvents": [{"ph": "X", ', "corrupt JSON"),
    (b'{"foo": 1}', "not a Kineto trace"),
    (b"[1, 2]", "not a Kineto trace"),
    (b"\x1f\x8bnot really gzip", "corrupt gzip"),
    (b"\xff\xfe\x00binary", "not a text JSON"),
])
def test_bad_files_raise(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=fragment) as err:
        read_trace_file(path)
    assert str(path) in str(err.value) and "\n" not in err.value.one_line()


def test_gzip_of_several_members_reads_as_their_concatenation(tmp_path):
    # `cat a.gz b.gz` is a valid gzip file; here the trace's text split in two members
    text = gzip.decompress(CPU.read_bytes())
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    assert _records(path).kernels.dur_ns.tolist() == _records(CPU).kernels.dur_ns.tolist()


def test_truncated_gzip_raises(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(CPU.read_bytes()[:2000])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        read_trace_file(path)


def test_missing_file_raises(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot read"):
        read_trace_file(tmp_path / "absent.json")


def test_empty_trace_raises(tmp_path):
    path = _write(tmp_path, '{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0}]}')
    with pytest.raises(TraceFormatError, match=r"no ops or kernels in test: .*categories: none"):
        _records(path)


def test_malformed_event_raises():
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "args": {}}]}
    with pytest.raises(TraceFormatError, match="malformed kernel event"):
        _records(trace)


def test_the_shared_formula_table_plugs_in():
    rec = trace_records(read_trace_file(CUDA), "shared", flops_of=op_flops, precision_of=precision_of)
    assert rec.kernels.flop_source[0] == "analytic" and rec.kernels.flops[0] > 0


def test_the_reader_has_no_formula_table_of_its_own():
    with pytest.raises(TypeError):
        trace_records(read_trace_file(CUDA), "none")
