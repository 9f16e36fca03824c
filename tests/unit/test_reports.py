"""Terminal renderers: golden files at 80 and 120 columns, colour off, plus the behaviours they promise.

The Profiles are built by hand here; byte counts, shares and roofline figures are written as
arithmetic so a reader can check them. `GOLDENS` maps each tests/golden/*.txt to the call that
renders it; tools/regen_goldens.py rewrites them from this same table. What the kernel report
promises beyond its goldens (columns that make way, ncu commands a shell runs as they print) is
in test_kernel_report.py.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.analysis.gpu_table import table_rows
from tbd.cli.commands.suite import suite_rows
from tbd.core.errors import UsageError
from tbd.core.profile_result import (
    COMPLETE,
    PARTIAL,
    Bandwidth,
    FlopGap,
    FlopUtil,
    GpuIdle,
    Iterations,
    KernelRow,
    Memory,
    Metrics,
    NoFlopFormula,
    PrecisionWork,
    Profile,
    Recommendation,
    Throughput,
    Value,
)
from tbd.reports.comparison_text import render_comparison
from tbd.reports.console import shorten_middle
from tbd.reports.info_tables import render_gpu_table, render_suite
from tbd.reports.kernels.tables import TABLE_V, render_kernel_detail, render_kernel_report
from tbd.reports.terminal import fmt_bytes, fmt_flops, render_profile

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"  # tools/regen_goldens.py loads this file alone
MiB = 1 << 20
GiB = 1 << 30
WIDTHS = (80, 120)

# A cuDNN-style name as long as the ones CUDA really emits (~300 characters), with both ends distinct.
LONG_RNN_NAME = ("void cudnn::rnn::elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2, "
                 "(cudnnRNNBiasMode_t)2>(int, int, int, int, int, bool, float const*, float const*, "
                 "float const*, float const*, float const*, float const*, float const*, float const*, "
                 "float*, float*, float*, float*, float*, cudnn::reduced_divisor, int, "
                 "cudnnRNNClipMode_t, cudnnNanPropagation_t, float, float, int, int, int, int, int)")
INDEX_SELECT_NAME = ("void (anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>"
                     "(at::cuda::detail::TensorInfo<float, unsigned int>, long)")
#: What analysis/ncu.py collects (DEFAULT_METRICS), written out: FP32/FP16/FP64 add, mul and fma
#: thread instructions, tensor-pipe work, DRAM bytes read and written.
NCU_METRICS = ",".join([*(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "fhd"
                          for op in ("add", "mul", "fma")),
                        r"regex:^sm__inst_executed_pipe_tensor[a-z0-9_]*\.sum$",
                        r"regex:^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$", "dram__bytes_read.sum",
                        "dram__bytes_write.sum"])
#: The `tbd profile` command ncu reruns for cuda_profile's seq2seq run (analysis.assemble.ncu_target):
#: warm-up 14, timing iterations 14-63 (50), trace iterations 64-66 (3).
SEQ2SEQ_RERUN = ["env", "TBD_NO_TRACER=1", "tbd", "profile", "seq2seq", "--framework", "pytorch", "--device",
                 "cuda:0", "--warmup", "14", "--batch", "128", "--iterations", "50",
                 "--repeat", "1", "--window-seconds", "0", "--trace-iterations", "3", "--quiet", "--out", "RUN_DIR-ncu"]


def _row(name, calls, time_s, total_s, flops, util_pct, precision="fp32", source="analytic", note=None):
    # time_share_pct: the group's share of the summed kernel time in the trace window.
    return KernelRow(name=name, calls=calls, time_s=time_s, time_share_pct=time_s / total_s * 100,
                     flops=flops, flop_source=source if flops is not None else None,
                     precision=precision, util_pct=util_pct, util_note=note, mean_s=time_s / calls,
                     flops_per_s=flops / time_s if flops is not None else None)


def _on_roofline(row: KernelRow, nbytes, peak: float, bandwidth: float, **drilldown) -> KernelRow:
    """`row` having moved `nbytes`, placed on the roofline of a device with that peak and bandwidth the way
    analysis/roofline.py does; `drilldown`: its launch, ops, ncu and measured fields as they are."""
    moved = dict(bytes=nbytes, bytes_source=None if nbytes is None else "analytic",
                 bandwidth_util_pct=None if nbytes is None else nbytes / row.time_s / bandwidth * 100)
    if row.flops is None or nbytes is None:
        unknown = " and ".join(what for what, v in (("FLOPs", row.flops), ("bytes", nbytes)) if v is None)
        return replace(row, **moved, roofline_note=f"{unknown} unknown", **drilldown)
    intensity = row.flops / nbytes
    attainable = min(peak, intensity * bandwidth)  # the roof above this intensity
    return replace(row, **moved, intensity=intensity, bound="memory" if intensity < peak / bandwidth else "compute",
                   attainable_flops_per_s=attainable, roofline_pct=row.flops_per_s / attainable * 100, **drilldown)


def _average(rows: list[KernelRow], figure: str) -> float:
    """The busy-time-weighted average of a figure over `rows`: the threshold each ranking is below."""
    return sum(getattr(r, figure) * r.time_s for r in rows) / sum(r.time_s for r in rows)


def _ncu(kernel_regex: str, calls: int, name_base: str = "function") -> dict:
    """The `ncu` field of a ranked seq2seq group: its launches in the last of the 3 traced iterations (ProfilerStep
    66), counted inside tbd's NVTX range, so the first two iterations' launches are skipped."""
    count = calls // 3
    select = ["--kernel-name-base", "demangled", "--rename-kernels", "off"] if name_base == "demangled" else \
        ["--kernel-name-base", "function"]
    argv = ["ncu", "--target-processes", "all", "--nvtx", "--nvtx-push-pop-scope", "process", "--nvtx-include",
            "tbd@tbd.trace_window/", *select, "--kernel-name", f"regex:^{kernel_regex}$", "--launch-skip",
            str(2 * count), "--launch-count", str(count), "--metrics", NCU_METRICS, "--csv", "--page", "raw",
            "--print-units", "base", *SEQ2SEQ_RERUN]
    return {"command": shlex.join(argv), "argv": argv, "launch_skip": 2 * count, "launch_count": count, "step": 66,
            "nvtx_range": "tbd.trace_window", "name_base": name_base,
            "skip_counts_from": "the start of tbd's trace window (the NVTX range)"}


def _torch_cross_check() -> dict:
    """profilers/pytorch/memory.py's shape: torch's categories, each one's own peak and the split at its peak."""
    peak = {"parameter": 211_763_200, "optimizer_state": 2 * 211_763_200, "input": 128 * 25 * 8 * 2,
            "temporary": 288 * MiB, "activation": 3_170_893_824, "gradient": 211_763_200,
            "autograd_detail": 4 * MiB, "unknown": 12 * MiB}
    at_peak = {**peak, "temporary": 96 * MiB, "activation": 2_952_790_016, "gradient": 105_881_600,
               "autograd_detail": 2 * MiB}
    return {"source": "torch.profiler._memory_profiler", "device": "cuda:0", "peak_bytes": peak,
            "at_peak": at_peak, "total_peak_bytes": sum(at_peak.values()),
            "maps_to": {"parameter": "weights", "gradient": "gradients", "activation": "feature_maps",
                        "temporary": "workspace", "optimizer_state": "dynamic", "input": "dynamic",
                        "autograd_detail": "dynamic", "unknown": "unattributed"}}


def _won_back(rows: list[KernelRow], total_s: float) -> list[KernelRow]:
    """The default ranking by hand: each row with a bound and a share within 100 % of its roof, its time x
    (1 - Roof % / 100) saved at the roof, most first."""
    out = [replace(k, recoverable_s=k.time_s * (1 - k.roofline_pct / 100),
                   recoverable_pct=100 * k.time_s * (1 - k.roofline_pct / 100) / total_s)
           for k in rows if k.bound and k.roofline_pct is not None and k.roofline_pct <= 100]
    return sorted(out, key=lambda k: (-k.recoverable_s, k.name))


def cuda_profile() -> Profile:
    """seq2seq on an H100: every field measured, a PyTorch memory cross-check present.

    Roofline: FP32 peak 66.9 TFLOP/s over 3.35 TB/s puts the ridge at about 20 FLOP/B; each row's
    bytes are written as FLOPs / its intensity.
    """
    total = 0.300  # summed kernel time over the 3 traced iterations, seconds
    peak = 132 * 1980e6 * 256  # H100 SXM FP32: SMs x max SM clock x FLOP/clk/SM
    bandwidth = 3.35e12  # H100 SXM5 HBM3, bytes/s (datasheet)

    def on_roofline(row, intensity, **drilldown):
        return _on_roofline(row, row.flops / intensity if intensity else None, peak, bandwidth, **drilldown)

    rnn = _row(LONG_RNN_NAME, 1440, 0.054, total, 0.021 * peak * 0.054, 2.1)
    rnn_per_call = rnn.flops / rnn.calls
    kernels = [
        on_roofline(_row("ampere_sgemm_128x128_tn", 360, 0.096, total, 0.612 * peak * 0.096, 61.2), 85,
                    launch={"grid": [8, 16, 1], "block": [256, 1, 1], "registers_per_thread": 122,
                            "shared_memory_bytes": 32_768, "occupancy_pct": 12.5, "configs": 1, "share_pct": 100.0}),
        # An RNN cell right of the ridge yet at 2.1 %: compute-bound and slow, what Table V is for.
        on_roofline(rnn, 25,
                    launch={"grid": [128, 1, 1], "block": [256, 1, 1], "registers_per_thread": 40,
                            "shared_memory_bytes": 0, "occupancy_pct": 100.0, "configs": 2, "share_pct": 75.0},
                    ops=[{"name": "aten::_cudnn_rnn", "shapes": "25×128×1024, 4096×1024, 4096×1024, 4096 (float)",
                          "stack": "seq2seq/model.py(88): forward < torch/nn/modules/module.py(1501): _call_impl "
                                   "< seq2seq/train.py(41): step", "share_pct": 2 / 3 * 100},
                         {"name": "aten::_cudnn_rnn_backward", "shapes": "", "stack": "", "share_pct": 1 / 3 * 100}],
                    ncu=_ncu("elemWiseRNNcell", 1440),
                    measured={"source": "ncu", "launches": 1440 // 3, "flops": rnn_per_call * 1.031,
                              "analytic_flops": rnn_per_call, "flops_difference_pct": 3.1,
                              "dram_bytes": rnn_per_call / 25 * 1.41, "analytic_bytes": rnn_per_call / 25,
                              "bytes_difference_pct": 41.0}),
        on_roofline(_row("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                         "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
                         "at::detail::Array<char*, 3>)", 2880, 0.036, total, 0.008 * peak * 0.036, 0.8), 0.25),
        # A TF32 kernel the precision table did not know, measured against FP32: flagged, not ranked.
        on_roofline(_row("cutlass_90_tensorop_gemm_128x128_32x4_tn_align4", 120, 0.033, total, 1.3 * peak * 0.033,
                         130.0, note="above peak: precision or peak misdetected"), 200),
        on_roofline(_row("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                         "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
                         90, 0.030, total, 0.015 * peak * 0.030, 1.5), 1.25, ncu=_ncu("cunn_SoftMaxForward", 90)),
        # No FLOP formula for aten::index_select, but its bytes are known: 3,200 rows of 1,024 floats gathered
        # (read and written) and their 3,200 int64 indices read, per call.
        _on_roofline(_row(INDEX_SELECT_NAME, 180, 0.024, total, None, None, note="no FLOP formula for "
                          "aten::index_select"), 180 * (3200 * 1024 * 4 * 2 + 3200 * 8),
                     peak, bandwidth,
                     launch={"grid": [3200, 1, 1], "block": [128, 1, 1], "registers_per_thread": 26,
                             "shared_memory_bytes": 0, "occupancy_pct": 100.0, "configs": 1, "share_pct": 100.0},
                     ops=[{"name": "aten::index_select", "shapes": "32000×1024, 0, 3200 (float, long)", "stack": "",
                           "share_pct": 100.0}]),
        on_roofline(_row("ampere_sgemm_64x32_sliced1x4_nn", 720, 0.021, total, 0.183 * peak * 0.021, 18.3), 40,
                    ncu=_ncu("ampere_sgemm_64x32_sliced1x4_nn", 720, "demangled")),
        on_roofline(_row("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
                         "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
                         "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
                         270, 0.015, total, 0.004 * peak * 0.015, 0.4), 0.25, ncu=_ncu("reduce_kernel", 270)),
        # Launched with no op around it: neither FLOPs nor bytes known.
        _on_roofline(_row("void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>> "
                          "[with T = float]", 540, 0.009, total, None, None, note="no launching op"), None, peak,
                     bandwidth),
    ]
    # The thresholds: groups with FLOPs known and not flagged; memory-bound groups with bytes known.
    flop_average = _average([k for k in kernels if k.util_pct is not None and not k.util_note], "util_pct")
    memory_bound = [k for k in kernels if k.bound == "memory"]
    bandwidth_average = _average(memory_bound, "bandwidth_util_pct")
    busy_s = 0.291  # the union of kernel intervals: overlap across streams makes it < 0.300
    at_peak = {"weights": 211_763_200, "gradients": 105_881_600, "feature_maps": 2_952_790_016,
               "workspace": 134_217_728, "dynamic": 635_289_600}
    allocator_peak = 4_100_000_000
    at_peak["unattributed"] = allocator_peak - sum(at_peak.values())
    memory = Memory(weights=211_763_200, gradients=211_763_200, feature_maps=3 * GiB, workspace=256 * MiB,
                    dynamic=2 * 211_763_200 + 211_763_200, allocator_peak=allocator_peak, at_peak=at_peak,
                    cross_check=_torch_cross_check())
    metrics = Metrics(
        throughput=Throughput(1843.2, "sentences/s", also={"tokens/s": 1843.2 * 25}),
        gpu_busy_pct=Value(87.3),
        gpu_busy_nvml_pct=Value(94.0),
        gpu_busy_traced_pct=Value(41.6),  # the traced iterations' own wall time, which the tracer stretched
        # the trace window less the 0.291 s busy: 0.291 / 0.416 = 0.6995 s window, 0.4085 s idle in 120 gaps:
        # 0.360 s host bound, 0.012 s synchronisation, 0.008 s memcpy, 0.0035 s launch gaps, the rest (0.0250 s) other
        gpu_idle=GpuIdle(window_s=busy_s / 0.416, idle_s=busy_s / 0.416 - busy_s, idle_pct=100 - 41.6, gaps=120,
                         seconds=(idle_seconds := {"host_bound": 0.36, "synchronisation": 0.012, "memcpy": 0.008,
                                                   "launch_gap": 0.0035,
                                                   "other": busy_s / 0.416 - busy_s - 0.36 - 0.012 - 0.008 - 0.0035}),
                         share_pct={k: 100 * v / (busy_s / 0.416 - busy_s) for k, v in idle_seconds.items()},
                         launch_gap_ns=30_000),
        flop_util_pct=FlopUtil(value=21.4, reason=None, source="analytic", peak_flops=peak,
                               peak_source="hardware_model", hardware_peak_flops=peak, hardware_peak_reason=None,
                               measured_ceiling_flops=51.3e12, flops=0.214 * peak * busy_s, busy_s=busy_s,
                               unattributed_busy_pct=(0.024 + 0.009) / busy_s * 100, kernel_average_pct=flop_average,
                               # the tensor-core peaks: SMs x clock x dense FLOP/clk/SM (TF32 2,048, FP16 4,096)
                               peaks_by_precision={"fp32": peak, "tf32": 132 * 1980e6 * 2048,
                                                   "fp16": 132 * 1980e6 * 4096},
                               # every FLOP here is FP32, held to the FP32 peak: 21.4 % of the busy time at peak
                               by_precision=[PrecisionWork("fp32", 0.214 * peak * busy_s, 100.0, peak,
                                                           0.214 * busy_s)],
                               # the cutlass group at 130 % of its peak over 33 ms: capped, 0.3 x 33 ms less at peak
                               above_peak_flops_pct=100 * 1.3 * 0.033 / (0.214 * busy_s),
                               value_capped_pct=21.4 - 100 * 0.3 * 0.033 / busy_s),
        cpu_util_pct=Value(100 / 16 * 0.99),  # one of 16 cores, 99 % busy launching kernels
        memory_bytes=memory,
        # the two rows without FLOPs: indexSelect (0.024 s, aten::index_select has no formula) and the
        # fill kernel (0.009 s, launched with no op around it), as shares of the 0.300 s summed time
        no_flop_formula=NoFlopFormula(pct=(0.024 + 0.009) / total * 100, causes=[
            FlopGap("no_launch_op", 0.009 / total * 100, "kernels whose launching runtime call, or an op around "
                    "it, is not in the trace", [{"name": "void at::native::unrolled_elementwise_kernel", "pct": 3.0}]),
            FlopGap("no_formula", 0.024 / total * 100, "no FLOP formula for these ops yet",
                    [{"name": "aten::index_select", "pct": 0.024 / total * 100}])]),
        memory_bandwidth=Bandwidth(bandwidth, "gpu_table", "NVIDIA H100 SXM5 80GB datasheet",
                                   kernel_average_pct=bandwidth_average),
    )
    return Profile(
        status=COMPLETE,
        spec={"model": "seq2seq", "framework": "pytorch", "batch": 128, "device": "cuda:0", "precision": "fp32"},
        environment={"host": "gpu-node-7", "cpu": {"model": "AMD EPYC 9454 48-Core Processor", "cores_logical": 16},
                     "gpu": {"name": "NVIDIA H100 80GB HBM3", "index": 0, "compute_capability": [9, 0],
                             "sm_count": 132, "max_sm_clock_hz": 1980e6},
                     "versions": {"torch": "2.13.0"}},
        iterations=Iterations(warmup=14, warmup_s=3.87, warmup_detected=True, stable=True, timing_window=[14, 63],
                              trace_window=[64, 66], times_s=[0.0694] * 67),
        metrics=metrics,
        kernels=kernels,
        low_util_kernels=[k for k in kernels if k.bound == "compute" and not k.util_note and k.util_pct < flop_average],
        low_bandwidth_kernels=[k for k in memory_bound if k.bandwidth_util_pct < bandwidth_average],
        bound_unknown_kernels=[k for k in kernels if k.bound is None],  # in neither ranking, listed apart
        recoverable_kernels=_won_back(kernels, total),
        # Rendered as given: what analysis.recommendations says is tested against a real trace.
        recommendations=[Recommendation("start_here", "Start with elemWiseRNNcell: 54 ms (18 % of the kernel time) "
                                        "at 2.1 % of its roof (compute-bound).", ["recoverable_kernels[0].time_s: 0.054"])],
        notes=["2,412 memcpy/memset events excluded from kernels and busy time"],
    )


def cpu_profile() -> Profile:
    """resnet50 on a CPU-only VM: GPU figures null with reasons, ops play the role of kernels.

    Roofline: the measured GEMM ceiling 120.3 GFLOP/s over a measured copy at 9.8 GB/s puts the
    ridge at about 12 FLOP/B; each op's bytes are written as FLOPs / its intensity.
    """
    total = 6.0  # summed op self time over the traced iterations, seconds
    ceiling = 120.3e9  # measured GEMM FLOP/s: the peak used, since the VM hides the clock
    bandwidth = 9.8e9  # a measured copy, bytes/s

    def on_roofline(row, intensity):
        return _on_roofline(row, row.flops / intensity if row.flops is not None else None, ceiling, bandwidth)

    ops = [
        on_roofline(_row("aten::mkldnn_convolution", 159, 2.10, total, 0.612 * ceiling * 2.10, 61.2), 50),
        on_roofline(_row("aten::convolution_backward", 159, 1.98, total, 0.557 * ceiling * 1.98, 55.7), 45),
        on_roofline(_row("aten::native_batch_norm_backward", 159, 0.54, total, 0.021 * ceiling * 0.54, 2.1), 0.5),
        on_roofline(_row("aten::native_batch_norm", 159, 0.42, total, 0.032 * ceiling * 0.42, 3.2), 0.75),
        on_roofline(_row("aten::threshold_backward", 147, 0.30, total, 0.006 * ceiling * 0.30, 0.6), 0.125),
        on_roofline(_row("aten::add_", 1071, 0.24, total, 0.009 * ceiling * 0.24, 0.9), 0.25),
        on_roofline(_row("aten::clamp_min_", 147, 0.18, total, 0.007 * ceiling * 0.18, 0.7), 0.125),
        on_roofline(_row("aten::max_pool2d_with_indices_backward", 3, 0.09, total, None, None,
                         note="no FLOP formula"), None),
        on_roofline(_row("aten::addmm", 3, 0.06, total, 0.384 * ceiling * 0.06, 38.4), 20),
        on_roofline(_row("aten::_foreach_add_", 6, 0.048, total, 0.0004 * ceiling * 0.048, 0.04), 1 / 12),
        # A copy does no arithmetic: 0 FLOPs, judged by bandwidth alone (80 % of it).
        replace(_row("aten::copy_", 12, 0.03, total, 0.0, 0.0), bytes=0.8 * bandwidth * 0.03, bytes_source="analytic",
                intensity=0.0, bound="memory", attainable_flops_per_s=0.0, roofline_pct=80.0,
                bandwidth_util_pct=80.0),
    ]
    flop_average = _average([k for k in ops if k.util_pct is not None], "util_pct")
    memory_bound = [k for k in ops if k.bound == "memory"]
    bandwidth_average = _average(memory_bound, "bandwidth_util_pct")
    busy_s = total  # CPU: op self times never overlap, so busy time is their sum
    at_peak = {"weights": 102_228_128, "gradients": 102_228_128, "feature_maps": 1_487_405_056,
               "workspace": None, "dynamic": 102_228_128 + 8 * 3 * 224 * 224 * 4}
    allocator_peak = 1_900_000_000
    at_peak["unattributed"] = allocator_peak - sum(v for v in at_peak.values() if v is not None)
    memory = Memory(weights=102_228_128, gradients=102_228_128, feature_maps=1_487_405_056, workspace=None,
                    dynamic=102_228_128 + 8 * 3 * 224 * 224 * 4, allocator_peak=allocator_peak, at_peak=at_peak,
                    reasons={"workspace": "no op-scoped allocator events in the trace",
                             "at_peak": "96.4 MiB allocated before the trace window is not attributed"},
                    cross_check={"value": None, "reason": "torch's memory profiler raised KeyError('Input Dims')"})
    metrics = Metrics(
        throughput=Throughput(5.43, "images/s"),
        gpu_busy_pct=Value.null("no CUDA device"),
        gpu_busy_nvml_pct=Value.null("no CUDA device (NVML: driver not loaded)"),
        flop_util_pct=FlopUtil(value=38.5, reason=None, source="analytic", peak_flops=ceiling,
                               peak_source="measured_gemm", hardware_peak_flops=None,
                               hardware_peak_reason="CPU clock hidden by the VM", measured_ceiling_flops=ceiling,
                               flops=0.385 * ceiling * busy_s, busy_s=busy_s,
                               unattributed_busy_pct=0.09 / total * 100, kernel_average_pct=flop_average,
                               peaks_by_precision={"fp32": ceiling}),
        cpu_util_pct=Value(97.1),
        memory_bytes=memory,
        memory_bandwidth=Bandwidth(bandwidth, "measured_copy", "a 256 MiB tensor copy, best of 5",
                                   kernel_average_pct=bandwidth_average),
    )
    return Profile(
        status=COMPLETE,
        spec={"model": "resnet50", "framework": "pytorch", "batch": 8, "device": "cpu", "precision": "fp32"},
        environment={"host": "laptop", "cpu": {"model": "Intel(R) Xeon(R) Processor @ 2.90GHz", "cores_logical": 2},
                     "gpu": None, "versions": {"torch": "2.13.0"}},
        iterations=Iterations(warmup=3, warmup_s=4.41, warmup_detected=True, stable=True, timing_window=[3, 12],
                              trace_window=[13, 15], times_s=[1.47] * 16),
        metrics=metrics,
        kernels=ops,
        low_util_kernels=[k for k in ops if k.bound == "compute" and k.util_pct < flop_average],
        low_bandwidth_kernels=[k for k in memory_bound if k.bandwidth_util_pct < bandwidth_average],
        bound_unknown_kernels=[k for k in ops if k.bound is None],  # in neither ranking, listed apart
        recoverable_kernels=_won_back(ops, total),
        notes=["CPU run: ops play the role of kernels; busy time is the sum of op self times"],
    )


def partial_profile() -> Profile:
    """seq2seq on an A100 that never settled and ran out of memory in the trace window."""
    peak = 108 * 1410e6 * 128  # A100 FP32: SMs x max SM clock x FLOP/clk/SM
    no_trace = "no traced iteration completed"
    memory = Memory(weights=None, gradients=None, feature_maps=None, workspace=None, dynamic=None,
                    allocator_peak=40 * GiB - 512 * MiB, at_peak={},
                    reasons={c: no_trace for c in ("weights", "gradients", "feature_maps", "workspace", "dynamic")})
    metrics = Metrics(
        throughput=Throughput(2211.0, "sentences/s", also={"tokens/s": 2211.0 * 25}),
        gpu_busy_pct=Value.null(no_trace),
        gpu_busy_nvml_pct=Value(97.0),
        flop_util_pct=FlopUtil(value=None, reason=no_trace, source="analytic", peak_flops=peak,
                               peak_source="hardware_model", hardware_peak_flops=peak, hardware_peak_reason=None,
                               measured_ceiling_flops=None, flops=None, busy_s=None, unattributed_busy_pct=None,
                               peaks_by_precision={"fp32": peak}),
        cpu_util_pct=Value(6.4),
        memory_bytes=memory,
        memory_bandwidth=Bandwidth(1.555e12, "gpu_table", "NVIDIA A100 SXM4 40GB datasheet"),
    )
    return Profile(
        status=PARTIAL,
        spec={"model": "seq2seq", "framework": "pytorch", "batch": 512, "device": "cuda:0", "precision": "fp32"},
        environment={"host": "a100-box", "cpu": {"model": "AMD EPYC 7742 64-Core Processor"},
                     "gpu": {"name": "NVIDIA A100-SXM4-40GB"}, "versions": {}},
        iterations=Iterations(warmup=200, warmup_s=61.2, warmup_detected=False, stable=False,
                              timing_window=[200, 219], trace_window=None, times_s=[0.231] * 220),
        metrics=metrics,
        kernels=[],
        low_util_kernels=[],
        notes=["out of memory in trace iteration 1 (CUDA out of memory: tried to allocate 2.00 GiB)",
               "warm-up did not settle within 200 iterations: coefficient of variation stayed above 0.05"],
    )


#: The suite goldens' machine: MXNet missing, so the table shows all three kinds of cell.
SUITE_INSTALLED = {"pytorch": True, "tensorflow": True, "mxnet": False}


def detail_rows(profile: Profile) -> list[KernelRow]:
    """What `tbd kernels --kernel 'elemWiseRNNcell|indexSelect'` shows: a ranked group with every drill-down
    field, and one with no FLOPs, no ncu command and no measured counters."""
    return [k for k in profile.kernels if "elemWiseRNNcell" in k.name or "indexSelect" in k.name]


def _committed_runs_compared():
    """The two committed CPU runs (threads 1 and 2) compared: the same workload, one timing window each."""
    runs = [FIXTURES / "runs" / f"resnet50-test-cpu-b8-threads{n}" for n in (1, 2)]
    return compare_profiles([Side(f"runs/{r.name}", Profile.from_dict(json.loads((r / "profile.json").read_text())))
                             for r in runs])


def _unlike_runs_compared():
    """Two different workloads (seq2seq on an H100, resnet50 on a CPU): no speed ratio, no gap attribution."""
    return compare_profiles([Side("runs/seq2seq", cuda_profile()), Side("runs/resnet50", cpu_profile())])


GOLDENS = {
    **{f"profile_cuda_{w}.txt": (lambda w=w: render_profile(cuda_profile(), width=w, top=6)) for w in WIDTHS},
    **{f"profile_cpu_{w}.txt": (lambda w=w: render_profile(cpu_profile(), width=w)) for w in WIDTHS},
    "profile_partial_80.txt": lambda: render_profile(partial_profile(), width=80),
    **{f"kernels_cuda_{w}.txt": (lambda w=w: render_kernel_report(cuda_profile(), width=w)) for w in WIDTHS},
    # The paper's Table V, kept as a view (`--ranking table-v`).
    **{f"kernels_cuda_table_v_{w}.txt": (lambda w=w: render_kernel_report(cuda_profile(), width=w, ranking=TABLE_V))
       for w in WIDTHS},
    **{f"kernels_cpu_{w}.txt": (lambda w=w: render_kernel_report(cpu_profile(), top=5, width=w)) for w in WIDTHS},
    **{f"kernel_detail_{w}.txt": (lambda w=w: render_kernel_detail(detail_rows(cuda_profile()), cuda_profile(),
                                                                    width=w)) for w in WIDTHS},
    **{f"suite_{w}.txt": (lambda w=w: render_suite(suite_rows(installed=SUITE_INSTALLED), width=w)) for w in WIDTHS},
    # `tbd gpus`: the columns dropped at 80 and 120 (issue 28: headers one letter per line at 80).
    **{f"gpus_{w}.txt": (lambda w=w: render_gpu_table(table_rows(), width=w, color=False)) for w in WIDTHS},
    # `tbd compare`: like runs (ratios with their interval, or why none) and unlike ones (issue 28).
    **{f"compare_runs_{w}.txt": (lambda w=w: render_comparison(_committed_runs_compared(), width=w, color=False))
       for w in WIDTHS},
    **{f"compare_unlike_{w}.txt": (lambda w=w: render_comparison(_unlike_runs_compared(), width=w, color=False))
       for w in WIDTHS},
}
#: Every renderer, as (profile builder, width) -> text, for the width checks.
RENDERERS = {
    "profile": lambda build, width: render_profile(build(), width=width),
    "kernels": lambda build, width: render_kernel_report(build(), width=width),
    "detail": lambda build, width: render_kernel_detail(build().kernels, build(), width=width),
}


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_golden(name):
    expected = (GOLDEN_DIR / name).read_text(encoding="utf-8")
    assert GOLDENS[name]() == expected, f"{name} changed; review, then run: .venv/bin/python tools/regen_goldens.py"


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
@pytest.mark.parametrize("build", [cuda_profile, cpu_profile, partial_profile])
@pytest.mark.parametrize("width", [60, 80, 120, 160])
def test_no_line_exceeds_width(renderer, build, width):
    text = RENDERERS[renderer](build, width)
    assert max((len(line) for line in text.splitlines()), default=0) <= width


def test_shorten_middle_keeps_both_ends():
    assert shorten_middle("abcdefghij", 7) == "abcd" + "…" + "ij"  # 7 - 1 = 6 kept: 6 - 6 // 3 = 4 head, 2 tail
    assert shorten_middle("abcdefghij", 6) == "abcd" + "…" + "j"  # 5 kept: 5 // 3 = 1 tail, 4 head
    assert shorten_middle("abcdefghij", 10) == "abcdefghij"
    assert shorten_middle("abcdefghij", 3) == "ab" + "…"  # 2 // 3 = 0: no tail
    assert shorten_middle("abcdefghij", 1) == "…"
    with pytest.raises(UsageError):
        shorten_middle("abc", 0)


def test_long_kernel_name_shortened_to_fit():
    text = render_kernel_report(cuda_profile(), width=100)
    rows = [line for line in text.splitlines() if "elemWiseRNNcell<" in line and not line.startswith("#")]
    assert len(rows) == 2  # the time table and the compute-bound ranking
    assert all(len(line) <= 100 for line in rows) and LONG_RNN_NAME not in text
    assert LONG_RNN_NAME in render_kernel_detail(detail_rows(cuda_profile()), cuda_profile(), width=400)


def test_null_metric_prints_na_with_reason():
    text = render_profile(cpu_profile(), width=160)  # wide enough that no reason wraps
    assert "n/a — no CUDA device" in text
    assert "n/a — no CUDA device (NVML: driver not loaded)" in text
    assert "workspace: n/a — no op-scoped allocator events in the trace" in text
    assert "at allocator peak: 96.4 MiB allocated before" in text  # a reason beside a figure that exists: no "n/a"
    assert "hardware model n/a — CPU clock hidden by the VM" in text


def test_partial_banner_and_not_stable_are_loud():
    text = render_profile(partial_profile())
    assert "!! PARTIAL RUN: out of memory in trace iteration 1" in text
    assert "NOT STABLE" in text
    assert "PARTIAL" not in render_profile(cuda_profile())


def test_partial_banner_prefers_the_partial_note():
    profile = partial_profile()
    notes = ["2 memcpy events excluded", "partial: workload exited with code 137, log at run/child.log"]
    text = render_profile(Profile(**{**profile.__dict__, "notes": notes}))
    assert "!! PARTIAL RUN: workload exited with code 137, log at run/child.log." in text


def test_kernel_names_are_not_markup():
    row = KernelRow(name="k[bold]x[/bold]<[with T = float]>", calls=1, time_s=1.0, time_share_pct=100.0,
                    flops=1.0, flop_source="analytic", precision="fp32", util_pct=1.0)
    profile = Profile(**{**cuda_profile().__dict__, "kernels": [row], "low_util_kernels": [row]})
    assert "k[bold]x[/bold]<[with T = float]>" in render_profile(profile)


def test_same_text_after_json_round_trip():
    profile = cuda_profile()
    assert render_profile(Profile.from_dict(profile.to_dict())) == render_profile(profile)


def test_color_adds_ansi_styles_only_when_asked():
    assert "\x1b[" in render_profile(partial_profile(), color=True)
    assert "\x1b[" not in render_profile(partial_profile())


def test_units():
    assert fmt_bytes(3 * GiB) == "3.00 GiB"
    assert fmt_bytes(256 * MiB) == "256.0 MiB"
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(12) == "12 B"
    assert fmt_flops(132 * 1980e6 * 256) == "66.9 TFLOP/s"  # 66.908... x 1e12
    assert fmt_flops(120.3e9) == "120.3 GFLOP/s"


def test_top_below_one_is_a_usage_error():
    with pytest.raises(UsageError):
        render_kernel_report(cuda_profile(), top=0)
    with pytest.raises(UsageError):
        render_profile(cuda_profile(), top=0)


def test_color_none_is_plain_when_stdout_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    assert render_profile(partial_profile(), color=None) == render_profile(partial_profile())


# --- what a newcomer could not read (issue 15) --------------------------------------------------------------


def _with_memory(memory: Memory) -> Profile:
    profile = cpu_profile()
    return Profile(**{**profile.__dict__, "metrics": replace(profile.metrics, memory_bytes=memory)})


def _memory_section(text: str) -> str:
    """The lines from the memory title to the next section (a blank line)."""
    start = text.index("\nMemory:")
    return text[start:text.index("\n\n", start)]


#: The reasons a static_alloc MXNet run's profile.json held when a newcomer read them (issue 15), word for word.
UNSPLIT = ("MXNet 1.9's profiler records per-device storage totals without addresses or operator tags, so tensors "
           "kept for backward, operators' transient buffers and other temporaries cannot be told apart; their sum "
           "is in at_peak['unattributed']")
STATIC_ALLOC = ("1 hybridized block(s) use static_alloc: their feature maps and workspace live in buffers allocated "
                "at the first iteration, before tracing, which MXNet's storage counter does not see, so "
                "allocator_peak leaves them out")


def _mxnet_memory() -> Memory:
    """A static_alloc MXNet run: an exact 310.9 MiB baseline, a 543.2 MiB storage-counter rise."""
    weights = optimizer = 102_228_128
    dynamic = optimizer + 19_267_584
    baseline, rise = weights * 2 + dynamic, 569_569_536
    at_peak = {"weights": weights, "gradients": weights, "feature_maps": None, "workspace": None, "dynamic": dynamic,
               "unattributed": rise}
    reasons = {"feature_maps": UNSPLIT, "workspace": UNSPLIT,
               "dynamic": "optimizer state + inputs only: other in-iteration allocations are in "
                          "at_peak['unattributed']",
               "at_peak": f"weights, gradients, optimizer state and inputs are held from before tracing (exact array "
                          f"sizes, {baseline} B) and added to allocator_peak; unattributed = the storage counter's "
                          f"peak rise in the window (feature maps, workspace, temporaries); {STATIC_ALLOC}",
               "allocator_peak": STATIC_ALLOC}
    return Memory(weights, weights, None, None, dynamic, baseline + rise, at_peak, reasons)


def test_memory_reasons_read_as_english_with_sizes_in_binary_units():
    memory = _mxnet_memory()
    for width in WIDTHS:
        section = _memory_section(render_profile(_with_memory(memory), width=width))
        assert "at_peak" not in section and "allocator_peak" not in section  # no Python, no field names
        assert not re.search(r"\d{4,} B\b", section), section  # no raw byte counts
        flat = " ".join(section.split())
        assert "their sum is in unattributed at the allocator's peak" in flat
        assert "unattributed is the storage counter's peak rise" in flat
        assert "exact array sizes, 310.9 MiB) and added to the allocator peak" in flat
        assert "543.2 MiB" in flat  # the counter's rise, in the table
        # One cause, one line: the unsplit counter explains feature maps and workspace alike, and the hook's
        # static_alloc caveat is both the allocator peak's whole reason and the end of the split's.
        assert flat.count("per-device storage totals") == 1
        assert "feature maps, workspace: n/a — MXNet 1.9's profiler" in flat
        assert flat.count("static_alloc") == 1
        assert "at allocator peak, allocator peak: 1 hybridized block(s)" in flat
    # profile.json keeps the exact figures: ints, and the reasons as analysis wrote them.
    saved = _with_memory(memory).to_dict()["metrics"]["memory_bytes"]
    assert saved["at_peak"]["unattributed"] == 569_569_536 and saved["allocator_peak"] == 325_951_968 + 569_569_536
    assert "(exact array sizes, 325951968 B)" in saved["reasons"]["at_peak"]


@pytest.mark.parametrize("framework", ["mxnet", "tensorflow"])
def test_memory_reasons_from_analysis_print_each_clause_once(framework):
    """Whatever the framework's analysis writes, the terminal says each clause once, in words and units."""
    from importlib import import_module

    analysis = import_module(f"tbd.analysis.memory.{framework}")
    its = [{"step": 1, "weights_bytes": 102_000_000, "non_trainable_bytes": 212_992, "gradients_bytes": 102_000_000,
            "optimizer_state_bytes": 102_000_000, "input_bytes": 19_267_584}]
    if framework == "mxnet":
        its[0].pop("non_trainable_bytes")
    records = {"schema": analysis.RECORDS_SCHEMA, "device_index": -1, "iterations": its, "reasons": {}}
    memory = analysis.memory_breakdown(records, None)
    section = _memory_section(render_profile(_with_memory(memory), width=80))
    assert "at_peak" not in section and "allocator_peak" not in section
    assert not re.search(r"\d{4,} B\b", section), section
    reasons = section[section.index("unattributed:"):].split("\n", 2)[2]  # after the legend
    clauses = [c for line in " ".join(reasons.split()).split(": n/a — ") for c in line.split("; ")]
    assert len(clauses) == len(set(clauses)), reasons


def test_memory_legend_under_the_table_and_reasons_wrap_under_themselves():
    text = render_profile(cpu_profile(), width=80)
    lines = text.splitlines()
    peak = next(i for i, line in enumerate(lines) if line.startswith("allocator peak"))
    assert [line.split(":")[0] for line in lines[peak + 1:peak + 4]] == ["Own peak", "At allocator peak",
                                                                         "unattributed"]
    reasons = lines[peak + 4:lines.index("", peak)]
    assert reasons and all(line.startswith("  ") for line in reasons)  # a wrapped reason never starts at column 0


def test_notes_give_byte_counts_in_binary_units():
    profile = Profile(**{**cpu_profile().__dict__, "notes": ["cannot cap the address space: 912680550 B asked"]})
    assert "cannot cap the address space: 870.4 MiB asked" in render_profile(profile, width=120)


def test_time_share_legend_names_the_papers_term():
    for text in (render_profile(cuda_profile(), width=80), render_kernel_report(cpu_profile(), width=80)):
        flat = " ".join(text.split())
        assert "Time %: the group's share of the summed" in flat and "calls it Duration %" in flat


def test_kernel_detail_gives_bytes_in_units():
    text = render_kernel_detail(detail_rows(cuda_profile()), cuda_profile(), width=120)
    # 3,034,954,137.6 B / 2**30 = 2.8265: bytes are binary everywhere (issue 28)
    assert "bytes moved                    2.83 GiB (analytic)" in text
    assert not re.search(r"\d{1,3}(,\d{3})+ B\b", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_suite_fits_without_splitting_words(width):
    text = render_suite(suite_rows(installed=SUITE_INSTALLED), width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    header = next(line for line in lines if line.startswith("Model "))
    assert header.split() == ["Model", "pytorch", "tensorflow", "mxnet", "Batch", "CPU", "Throughput", "Dominant",
                              "layer"]
    assert len(lines) <= 35  # one screen: it took 85 lines at 120 columns with a row per model x framework
    cells = {}
    for line in lines[lines.index(header) + 2:lines.index("")]:  # the first table: models and their frameworks
        cells.setdefault(line.split()[0], line.split()[1:4])
    assert cells["resnet50"] == ["yes", "yes", "no"]  # the MXNet port exists, MXNet is missing
    assert cells["resnet101"] == ["yes", "—", "—"]  # no TensorFlow or MXNet port
    batches = {line.split()[0]: line.split()[4:6] for line in lines[lines.index(header) + 2:lines.index("")]
               if line.split()[0] in ("resnet50", "seq2seq")}
    assert batches == {"resnet50": ["32", "4"], "seq2seq": ["64", "64"]}  # the registry's batch, and on the CPU
    words = {w for r in suite_rows(installed=SUITE_INSTALLED)
             for w in " ".join([r["application"], r["dataset"], r["unit"], r["dominant_layer"]]).split()}
    printed = set(text.split())
    assert words <= printed, words - printed  # every word whole: none folded across lines


def test_byte_counts_in_words_rewrites_only_byte_counts():
    from tbd.reports.numbers import byte_counts_in_words

    assert byte_counts_in_words("held (569569536 B, exact); -2048 B; 12 B") == "held (543.2 MiB, exact); -2.0 KiB; 12 B"
    assert byte_counts_in_words("24.1 GB/s, 3 B/s, 128 Bytes, v1.5 B, 12 BF16") == "24.1 GB/s, 3 B/s, 128 Bytes, v1.5 B, 12 BF16"
