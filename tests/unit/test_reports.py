"""Terminal renderers: golden files at width 100, colour off, plus the behaviours they promise.

The Profiles are built by hand here; byte counts and shares are written as arithmetic so a
reader can check them. `GOLDENS` maps each tests/golden/*.txt to the call that renders it;
tools/regen_goldens.py rewrites them from this same table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tbd.errors import UsageError
from tbd.profile import (
    COMPLETE,
    PARTIAL,
    FlopGap,
    FlopUtil,
    Iterations,
    KernelRow,
    Memory,
    Metrics,
    NoFlopFormula,
    Profile,
    Throughput,
    Value,
)
from tbd.reports.kernels_table import render_kernels, shorten_middle
from tbd.reports.terminal import fmt_bytes, fmt_flops, render_profile

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"  # tools/regen_goldens.py loads this file alone
MiB = 1 << 20
GiB = 1 << 30

# A cuDNN-style name as long as the ones CUDA really emits (~300 characters), with both ends distinct.
LONG_RNN_NAME = ("void cudnn::rnn::elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2, "
                 "(cudnnRNNBiasMode_t)2>(int, int, int, int, int, bool, float const*, float const*, "
                 "float const*, float const*, float const*, float const*, float const*, float const*, "
                 "float*, float*, float*, float*, float*, cudnn::reduced_divisor, int, "
                 "cudnnRNNClipMode_t, cudnnNanPropagation_t, float, float, int, int, int, int, int)")


def _row(name, calls, time_s, total_s, flops, util_pct, precision="fp32", source="analytic", note=None):
    # time_share_pct: the group's share of the summed kernel time in the trace window.
    return KernelRow(name=name, calls=calls, time_s=time_s, time_share_pct=time_s / total_s * 100,
                     flops=flops, flop_source=source if flops is not None else None,
                     precision=precision, util_pct=util_pct, util_note=note)


def _torch_cross_check() -> dict:
    """profilers/pytorch_memory.py's shape: torch's categories, each one's own peak and the split at its peak."""
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


def cuda_profile() -> Profile:
    """seq2seq on an H100: every field measured, a PyTorch memory cross-check present."""
    total = 0.300  # summed kernel time over the 3 traced iterations, seconds
    peak = 132 * 1980e6 * 256  # H100 SXM FP32: SMs x max SM clock x FLOP/clk/SM
    kernels = [
        _row("ampere_sgemm_128x128_tn", 360, 0.096, total, 0.612 * peak * 0.096, 61.2),
        _row(LONG_RNN_NAME, 1440, 0.054, total, 0.021 * peak * 0.054, 2.1),
        _row("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
             "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
             "at::detail::Array<char*, 3>)", 2880, 0.036, total, 0.008 * peak * 0.036, 0.8),
        # A TF32 kernel the precision table did not know, measured against FP32: flagged, not ranked.
        _row("cutlass_90_tensorop_gemm_128x128_32x4_tn_align4", 120, 0.033, total, 1.3 * peak * 0.033, 130.0,
             note="above peak: precision or peak misdetected"),
        _row("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
             "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
             90, 0.030, total, 0.015 * peak * 0.030, 1.5),
        _row("void (anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>"
             "(at::cuda::detail::TensorInfo<float, unsigned int>, long)", 180, 0.024, total, None, None),
        _row("ampere_sgemm_64x32_sliced1x4_nn", 720, 0.021, total, 0.483 * peak * 0.021, 48.3),
        _row("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
             "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
             "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
             270, 0.015, total, 0.004 * peak * 0.015, 0.4),
        _row("void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>> [with T = float]",
             540, 0.009, total, None, None),
    ]
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
        flop_util_pct=FlopUtil(value=21.4, reason=None, source="analytic", peak_flops=peak,
                               peak_source="hardware_model", hardware_peak_flops=peak, hardware_peak_reason=None,
                               measured_ceiling_flops=51.3e12, flops=0.214 * peak * busy_s, busy_s=busy_s,
                               unattributed_busy_pct=(0.024 + 0.009) / busy_s * 100, kernel_average_pct=23.6),
        cpu_util_pct=Value(100 / 16 * 0.99),  # one of 16 cores, 99 % busy launching kernels
        memory_bytes=memory,
        # the two rows without FLOPs: indexSelect (0.024 s, aten::index_select has no formula) and the
        # fill kernel (0.009 s, launched with no op around it), as shares of the 0.300 s summed time
        no_flop_formula=NoFlopFormula(pct=(0.024 + 0.009) / total * 100, causes=[
            FlopGap("no_launch_op", 0.009 / total * 100, "kernels whose launching runtime call, or an op around "
                    "it, is not in the trace", [{"name": "void at::native::unrolled_elementwise_kernel", "pct": 3.0}]),
            FlopGap("no_formula", 0.024 / total * 100, "no FLOP formula for these ops yet",
                    [{"name": "aten::index_select", "pct": 0.024 / total * 100}])]),
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
        low_util_kernels=[k for k in kernels if k.util_pct is not None and k.util_pct < 21.4],
        notes=["2,412 memcpy/memset events excluded from kernels and busy time"],
    )


def cpu_profile() -> Profile:
    """resnet50 on a CPU-only VM: GPU figures null with reasons, ops play the role of kernels."""
    total = 6.0  # summed op self time over the traced iterations, seconds
    ceiling = 120.3e9  # measured GEMM FLOP/s: the peak used, since the VM hides the clock
    ops = [
        _row("aten::mkldnn_convolution", 159, 2.10, total, 0.612 * ceiling * 2.10, 61.2),
        _row("aten::convolution_backward", 159, 1.98, total, 0.557 * ceiling * 1.98, 55.7),
        _row("aten::native_batch_norm_backward", 159, 0.54, total, 0.021 * ceiling * 0.54, 2.1),
        _row("aten::native_batch_norm", 159, 0.42, total, 0.032 * ceiling * 0.42, 3.2),
        _row("aten::threshold_backward", 147, 0.30, total, 0.006 * ceiling * 0.30, 0.6),
        _row("aten::add_", 1071, 0.24, total, 0.009 * ceiling * 0.24, 0.9),
        _row("aten::clamp_min_", 147, 0.18, total, 0.007 * ceiling * 0.18, 0.7),
        _row("aten::max_pool2d_with_indices_backward", 3, 0.09, total, None, None),
        _row("aten::addmm", 3, 0.06, total, 0.384 * ceiling * 0.06, 38.4),
        _row("aten::_foreach_add_", 6, 0.048, total, 0.0004 * ceiling * 0.048, 0.04),
        _row("aten::copy_", 12, 0.03, total, None, None),
    ]
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
                               unattributed_busy_pct=(0.09 + 0.03) / total * 100, kernel_average_pct=41.0),
        cpu_util_pct=Value(97.1),
        memory_bytes=memory,
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
        low_util_kernels=[k for k in ops if k.util_pct is not None and k.util_pct < 38.5],
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
                               measured_ceiling_flops=None, flops=None, busy_s=None, unattributed_busy_pct=None),
        cpu_util_pct=Value(6.4),
        memory_bytes=memory,
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


GOLDENS = {
    "profile_cuda.txt": lambda: render_profile(cuda_profile(), width=100, top=6),
    "profile_cpu.txt": lambda: render_profile(cpu_profile(), width=100),
    "profile_partial.txt": lambda: render_profile(partial_profile(), width=100),
    "kernels_cuda.txt": lambda: render_kernels(cuda_profile(), width=100),
    "kernels_cpu.txt": lambda: render_kernels(cpu_profile(), top=5, width=100),
}


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_golden(name):
    expected = (GOLDEN_DIR / name).read_text(encoding="utf-8")
    assert GOLDENS[name]() == expected, f"{name} changed; review, then run: .venv/bin/python tools/regen_goldens.py"


@pytest.mark.parametrize("build", [cuda_profile, cpu_profile, partial_profile])
@pytest.mark.parametrize("width", [60, 100, 160])
def test_no_line_exceeds_width(build, width):
    text = render_profile(build(), width=width) + render_kernels(build(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width


def test_shorten_middle_keeps_both_ends():
    assert shorten_middle("abcdefghij", 7) == "abcd" + "…" + "ij"  # 7 - 1 = 6 kept: 6 - 6 // 3 = 4 head, 2 tail
    assert shorten_middle("abcdefghij", 6) == "abcd" + "…" + "j"  # 5 kept: 5 // 3 = 1 tail, 4 head
    assert shorten_middle("abcdefghij", 10) == "abcdefghij"
    assert shorten_middle("abcdefghij", 3) == "ab" + "…"  # 2 // 3 = 0: no tail
    assert shorten_middle("abcdefghij", 1) == "…"
    with pytest.raises(UsageError):
        shorten_middle("abc", 0)


def test_long_kernel_name_shortened_in_the_middle_to_fit():
    text = render_kernels(cuda_profile(), width=100)
    line = next(line for line in text.splitlines() if "elemWiseRNNcell" in line)
    assert len(line) == 100  # the name takes exactly what the other columns leave
    assert "void cudnn::rnn::elemWiseRNNcell" in line  # the head: two thirds of the room
    assert line.endswith(", int, int, int, int)")  # the tail: the last third
    assert "…" in line and LONG_RNN_NAME not in text


def test_null_metric_prints_na_with_reason():
    text = render_profile(cpu_profile(), width=160)  # wide enough that no reason wraps
    assert "n/a — no CUDA device" in text
    assert "n/a — no CUDA device (NVML: driver not loaded)" in text
    assert "workspace: n/a — no op-scoped allocator events in the trace" in text
    assert "at peak: 96.4 MiB allocated before" in text  # a reason beside a figure that exists: no "n/a"
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
        render_kernels(cuda_profile(), top=0)


def test_color_none_is_plain_when_stdout_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    assert render_profile(partial_profile(), color=None) == render_profile(partial_profile())


def test_render_kernels_is_reachable_from_terminal():
    from tbd.reports import terminal
    assert terminal.render_kernels is render_kernels
