"""Kernels that cross the trace window's edge count for their time inside it (issue 27, item 7), and a run's GPU
busy is its kernels' time per traced iteration over the untraced iteration time.

The window-edge case is a real V100 trace (PyTorch 1.9, ResNet-50) whose ProfilerStep#7 is made to start halfway
through one of its kernels: that kernel crosses the new start, as the kernels of an untraced step do when the
tracer starts mid-run. The expected busy time comes from tests/fixtures/gpu/recompute.py, the stdlib
recompute that knows nothing of tbd.
"""

from __future__ import annotations

import gzip
import importlib.util
import json

import numpy as np
import pytest
from testpaths import FIXTURES, real_trace

from tbd.analysis.assemble import gpu_busy_of_run
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.precision import kernel_precisions
from tbd.analysis.utilization import device_busy_ns
from tbd.core.records import IterationLog, KernelTable, OpTable, StepSpan, TraceRecords
from tbd.profilers.kineto.reader import read_trace_file, trace_records

NAME = "pt19_resnet50_v100.json.gz"
V100 = real_trace(f"gpu/{NAME}")


def _recompute():
    spec = importlib.util.spec_from_file_location("gpu_recompute", FIXTURES / "gpu" / "recompute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not V100.exists(), reason=f"{NAME} not in tests/fixtures/gpu or shared/traces/gpu")
def test_kernels_crossing_the_window_start_count_for_their_time_inside_it(tmp_path):
    trace = json.loads(gzip.decompress(V100.read_bytes()))
    step = next(e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7" and e.get("ph") == "X")
    # The step now starts halfway through the longest kernel of the GPU's first 50 ms (µs, as the trace writes them).
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "Kernel"]
    first = min(e["ts"] for e in kernels)
    kernels = [e for e in kernels if e["ts"] < first + 50_000]
    longest = max(kernels, key=lambda e: e["dur"])
    shift = longest["ts"] + longest["dur"] // 2 - step["ts"]
    step["ts"] += shift
    step["dur"] -= shift
    shifted = tmp_path / NAME  # the recompute knows the trace by its name
    shifted.write_bytes(gzip.compress(json.dumps(trace).encode()))
    want = _recompute().analyse(shifted)
    assert want["kernels_cut_at_window_start"] > 0  # the case under test is there

    rec = trace_records(read_trace_file(shifted), NAME, flops_of=op_flops, precision_of=precision_of,
                        kernel_precisions=kernel_precisions)
    assert (rec.window_start_ns, rec.window_end_ns) == (want["window_start_ns"], want["window_end_ns"])
    assert device_busy_ns(rec) == want["busy_ns"]
    assert len(rec.kernels) == want["kernels_in_window"]
    # Every row lies inside the window, and the rows' own time is the cut time.
    assert rec.kernels.start_ns.min() >= rec.window_start_ns
    assert (rec.kernels.start_ns + rec.kernels.dur_ns).max() <= rec.window_end_ns
    assert any(f"{want['kernels_cut_at_window_start']} kernels cross the window's edge" in n for n in rec.notes)


def _one_kernel_per_iteration(kernel_ns: int, iteration_ns: int, iterations: int) -> TraceRecords:
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    n = iterations
    starts = np.arange(n, dtype=np.int64) * iteration_ns
    k = KernelTable(obj(["k"] * n), starts, np.full(n, kernel_ns, np.int64), np.zeros(n, np.int64),
                    np.zeros(n, np.int64), obj([""] * n), np.full(n, np.nan), obj([""] * n), obj([""] * n),
                    np.zeros(n, np.int64))
    ops = OpTable(np.array([], object), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    steps = tuple(StepSpan(i, i * iteration_ns, (i + 1) * iteration_ns, (i + 1) * iteration_ns) for i in range(n))
    return TraceRecords("t", "cuda", k, k.start_ns, k.start_ns + k.dur_ns, steps, 0, n * iteration_ns, ops, None)


def _log(timing_ms: float) -> IterationLog:
    # 10 timed iterations of `timing_ms` each (iterations 5-14), then 3 traced ones (15-17) the tracer stretched
    times = np.array([timing_ms * 1e6] * 15 + [90e6] * 3, dtype=np.int64)
    return IterationLog(times, 5, True, True, (5, 14), (15, 17), int(10 * timing_ms * 1e6))


def test_a_runs_gpu_busy_is_kernel_time_per_traced_iteration_over_the_untraced_iteration():
    # H100 ResNet-50 in numbers: 36.3 ms of kernels per iteration, 90 ms traced, 37.6 ms untraced.
    trace = _one_kernel_per_iteration(36_300_000, 90_000_000, 3)
    busy, traced, notes = gpu_busy_of_run(trace, _log(37.6), "no GPU")
    assert busy.value == pytest.approx(100 * 36.3 / 37.6)  # 96.5 %
    assert traced.value == pytest.approx(100 * 36.3 / 90)  # 40.3 %: what the trace window alone says
    assert notes == []


def test_kernels_longer_than_an_untraced_iteration_read_100_with_a_note():
    busy, _, notes = gpu_busy_of_run(_one_kernel_per_iteration(40_000_000, 90_000_000, 3), _log(37.6), "no GPU")
    assert busy.value == 100.0 and "6.4 % more than an untraced iteration took (37.60 ms)" in notes[0]


def test_a_trace_alone_keeps_the_trace_windows_figure():
    trace = _one_kernel_per_iteration(36_300_000, 90_000_000, 3)
    log = IterationLog(np.array([90e6] * 3, dtype=np.int64), 0, False, True, (0, 2), (0, 2), int(270e6),
                       from_trace=True)
    busy, traced, _ = gpu_busy_of_run(trace, log, "no GPU")
    assert busy.value == pytest.approx(100 * 36.3 / 90) and traced is None
