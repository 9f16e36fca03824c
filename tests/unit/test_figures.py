"""Figures (reports/figures*.py): the data each figure draws, checked against the record it was given.

The Profiles come from test_reports.py (cuda_profile, cpu_profile, partial_profile); the Sweep and
the Comparison are built here by hand (`sample_sweep`, `cpu_sweep`, `sample_comparison`), with figures
written as arithmetic where one follows from another. test_html.py and tests/browser reuse them.
Assertions read the artists back (line data, bar heights, span edges, scatter offsets, texts), so
they test what is drawn, not how it looks; the browser tests' screenshots cover the look.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from test_reports import GiB, MiB, cpu_profile, cuda_profile, partial_profile
from testpaths import ROOT

from tbd.core.comparison import ComparedRun, Comparison, Gap, MetricComparison, OpComparison
from tbd.core.profile_result import MEMORY_CATEGORIES, Iterations, Profile
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.reports.figures import saving as figures
from tbd.reports.figures.canvas import byte_unit
from tbd.reports.numbers import fmt_pct

OOM_REASON = "CUDA out of memory: tried to allocate 6.00 GiB (GPU 0; 79.1 GiB total)"


def _point(batch, throughput, busy, flop, cpu, feature_maps, status="ok", reason=None, **extra) -> SweepPoint:
    """A ResNet-50 point on an H100: weights and gradients fixed (25.6 M parameters x 4 bytes), optimizer
    state (momentum) in dynamic, feature maps growing with the batch, workspace fixed."""
    weights = 25_557_032 * 4
    memory = {"weights": weights, "gradients": weights, "feature_maps": feature_maps, "workspace": 256 * MiB,
              "dynamic": weights + batch * 3 * 224 * 224 * 4}
    memory["allocator_peak"] = sum(memory.values()) - 128 * MiB  # own peaks need not coincide
    # At the allocator's peak half the workspace is live: the split adds up to the peak.
    at_peak = {**{c: memory[c] for c in MEMORY_CATEGORIES}, "workspace": 128 * MiB, "unattributed": 0}
    return SweepPoint(batch=batch, status=status, reason=reason, run_dir=f"b{batch}", throughput=throughput,
                      throughput_unit="images/s", iteration_s=batch / throughput, gpu_busy_pct=busy,
                      flop_util_pct=flop, cpu_util_pct=cpu, stable=True, memory_bytes=memory,
                      memory_at_peak=at_peak, **extra)


def _failed_point(batch, status, reason) -> SweepPoint:
    nulls = {k: reason for k in ("throughput", "gpu_busy_pct", "flop_util_pct", "cpu_util_pct")}
    return SweepPoint(batch=batch, status=status, reason=reason, run_dir=f"b{batch}", throughput=None,
                      throughput_unit=None, iteration_s=None, gpu_busy_pct=None, flop_util_pct=None,
                      cpu_util_pct=None, stable=None, memory_bytes={}, reasons=nulls)


def sample_sweep() -> Sweep:
    """ResNet-50 on an H100, batch 16 to 512 doubling: 256 cut short (partial), 512 out of memory."""
    points = [
        _point(16, 1210.0, 71.5, 28.1, 6.3, 16 * 98 * MiB),
        _point(32, 1820.0, 84.0, 39.6, 6.1, 32 * 98 * MiB),
        _point(64, 2205.0, 91.2, 46.8, 5.9, 64 * 98 * MiB),
        _point(128, 2390.0, 95.7, 50.2, 5.8, 128 * 98 * MiB),
        _point(256, 2410.0, 96.1, 50.9, 5.8, 256 * 98 * MiB, status="partial",
               reason="interrupted (SIGINT) in the timing window after 7 of 20 iterations"),
        _failed_point(512, "oom", OOM_REASON),
    ]
    return Sweep(model="resnet50", framework="pytorch", device="cuda:0", device_name="NVIDIA H100 80GB HBM3",
                 size="full", mode="max", points=points, largest_fitting_batch=256, smallest_failing_batch=512,
                 notes=["batch 512 ran out of memory; the largest batch that fits lies between 256 and 512"])


def cpu_sweep() -> Sweep:
    """ResNet-50 on a CPU at test size: no GPU figures (null with the reason), workspace unknown, one crash."""
    no_gpu = "no CUDA device"
    reasons = {"gpu_busy_pct": no_gpu, "memory.workspace": "no op-scoped allocator events in the trace"}
    points = [replace(_point(b, t, None, f, 97.0, b * 98 * MiB, reasons=reasons), iteration_s=b / t)
              for b, t, f in ((2, 3.1, 31.0), (4, 4.9, 35.2), (8, 5.43, 38.5))]
    points = [replace(p, memory_bytes={**p.memory_bytes, "workspace": None}) for p in points]
    points.append(_failed_point(16, "failed", "workload exited with code 1: RuntimeError in the data loader"))
    return Sweep(model="resnet50", framework="pytorch", device="cpu", device_name="Intel(R) Xeon(R) @ 2.90GHz",
                 size="test", mode="list", points=points, largest_fitting_batch=8, smallest_failing_batch=None)


def _metric(key, label, unit, values, higher, reasons=None) -> MetricComparison:
    """A metric across the runs with each run's ratio to the first, as analysis writes it (null where either is)."""
    first = values[0]
    ratios = [None if v is None or not first else v / first for v in values]
    return MetricComparison(key=key, label=label, unit=unit, values=values,
                            reasons=reasons or [None] * len(values), ratios=ratios, higher_is_better=higher)


def sample_comparison() -> Comparison:
    """ResNet-50 at batch 64 on a V100 (A) and an H100 (B): B has 67 / 15.7 = 4.27x the FP32 peak and ran
    2,205 / 1,050 = 2.10x faster; convolution_backward holds 60 % of the kernel-time gap."""
    runs = [ComparedRun("A", "runs/rn50-v100", "complete", "resnet50", "pytorch", 64, "cuda:0",
                        "Tesla V100-SXM2-16GB", 15.7e12, "gpu_table", 0.9e12, 3,
                        name="resnet50 · Tesla V100-SXM2-16GB · batch 64"),
            ComparedRun("B", "runs/rn50-h100", "complete", "resnet50", "pytorch", 64, "cuda:0",
                        "NVIDIA H100 80GB HBM3", 67e12, "gpu_table", 3.35e12, 3,
                        name="resnet50 · H100 80GB HBM3 · batch 64")]
    weights = 25_557_032 * 4
    no_nvml = "NVML not sampled (--no-nvml)"
    metrics = [
        _metric("throughput", "Throughput", "images/s", [1050.0, 2205.0], True),
        _metric("iteration_s", "Iteration time", "s", [64 / 1050.0, 64 / 2205.0], False),
        _metric("gpu_busy_pct", "GPU busy", "%", [93.5, 91.2], True),
        _metric("gpu_busy_nvml_pct", "NVML utilization.gpu", "%", [None, 97.0], True, reasons=[no_nvml, None]),
        _metric("flop_util_pct", "FLOP utilization", "%", [52.4, 46.8], True),
        _metric("cpu_util_pct", "CPU utilization", "%", [6.2, 5.9], None),
        _metric("memory.weights", "Weights", "bytes", [weights, weights], None),
        _metric("memory.gradients", "Gradients", "bytes", [weights, weights], None),
        _metric("memory.feature_maps", "Feature maps", "bytes", [64 * 98 * MiB, 64 * 96 * MiB], None),
        _metric("memory.workspace", "Workspace", "bytes", [None, 512 * MiB], None,
                reasons=["no op-scoped allocator events in the trace", None]),
        _metric("memory.dynamic", "Dynamic", "bytes", [weights + 64 * 602_112, weights + 64 * 602_112], None),
        _metric("memory.allocator_peak", "Allocator peak", "bytes", [int(6.8 * GiB), int(7.3 * GiB)], None),
    ]
    # Kernel time per iteration (s): A 0.0570, B 0.0270; the 0.0300 s gap shared out by op.
    ops = [_op("aten::convolution_backward", 0.0310, 0.0130, 55.0, 41.0, -0.0300),
           _op("aten::convolution", 0.0150, 0.0075, 58.0, 44.0, -0.0300),
           _op("aten::native_batch_norm_backward", 0.0045, 0.0020, 3.1, 2.2, -0.0300),
           _op("aten::add_", 0.0025, 0.0015, 1.1, 0.6, -0.0300),
           _op("aten::cudnn_convolution_add_relu", None, 0.0010, None, 12.0, -0.0300)]
    gap = Gap(label="B", peak_ratio=67e12 / 15.7e12, speed_ratio=2205.0 / 1050.0, speed_basis="throughput",
              speed_reason=None, kernel_time_delta_s=0.0270 - 0.0570, top_op="aten::convolution_backward",
              top_op_delta_s=0.0130 - 0.0310,
              top_op_share_pct=(0.0130 - 0.0310) / (0.0270 - 0.0570) * 100)
    return Comparison(runs=runs, metrics=metrics, ops=ops, gaps=[gap], differences=[],
                      notes=["B fused 16 convolutions with their ReLU (aten::cudnn_convolution_add_relu)"])


def _op(name, a, b, util_a, util_b, total_delta) -> OpComparison:
    """One op in runs A and B (None: absent there); its delta and share of the total kernel-time delta."""
    delta = (b or 0.0) - (a or 0.0)
    return OpComparison(op=name, time_per_iteration_s=[a, b], util_pct=[util_a, util_b], delta_s=[0.0, delta],
                        gap_share_pct=[0.0, delta / total_delta * 100])


def _texts(fig) -> list[str]:
    """Every text drawn on the figure: titles, labels, annotations, legend entries, caption."""
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _bars(ax) -> list[Rectangle]:
    """The bars drawn on `ax` (not the legend's patches, not the frame)."""
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0 and p.get_height() != 0]


# -- run figures ------------------------------------------------------------------------------------


def test_iteration_time_draws_every_iteration_in_ms():
    profile = cpu_profile()
    times = [1.9, 1.6, 1.5, *([1.47] * 13)]
    profile = replace(profile, iterations=replace(profile.iterations, times_s=times))
    ax = figures.iteration_time_figure(profile).axes[0]
    line = ax.lines[0]
    assert list(line.get_xdata()) == list(range(16))
    np.testing.assert_allclose(line.get_ydata(), np.array(times) * 1000)
    assert ax.get_ylabel() == "iteration time (ms)"


def test_iteration_time_shades_exactly_the_window_indices():
    profile = cuda_profile()  # warm-up 14, timing 14-63, trace 64-66
    ax = figures.iteration_time_figure(profile).axes[0]
    spans = {p.get_label().split(":")[0]: (p.get_x(), p.get_x() + p.get_width()) for p in ax.patches}
    assert spans == {"warm-up": (-0.5, 13.5), "timing window": (13.5, 63.5), "trace window": (63.5, 66.5)}
    labels = [p.get_label() for p in ax.patches]
    assert "timing window: iterations 14–63" in labels and "trace window: iterations 64–66" in labels
    # The terminal's words: warmup_run is absent (an older profile), so the 14 iterations' 3.87 s.
    assert "warm-up: 14 iterations run in 3.87 s" in labels


def test_iteration_time_shades_the_warm_up_run_and_marks_where_the_stable_phase_starts():
    # The run: 20 warm-up iterations run, the stable phase found from iteration 1. The page said
    # "Warm-up 1 iterations"; the figure shades the 20 run, labelled as the terminal says, with a line at 1.
    times = [0.9, *([0.1] * 19), *([0.1] * 10)]
    it = replace(cuda_profile().iterations, warmup=1, warmup_s=0.9, warmup_run=20, timing_window=[20, 29],
                 trace_window=None, times_s=times)
    ax = figures.iteration_time_figure(replace(cuda_profile(), iterations=it)).axes[0]
    warm = next(p for p in ax.patches if p.get_label().startswith("warm-up"))
    assert (warm.get_x(), warm.get_x() + warm.get_width()) == (-0.5, 19.5)
    assert warm.get_label() == f"warm-up: 20 iterations run in {0.9 + 19 * 0.1:.2f} s"  # 2.80 s
    stable = next(line for line in ax.lines if line.get_label().startswith("stable"))
    assert stable.get_label() == "stable from iteration 1 (detected)" and list(stable.get_xdata()) == [0.5, 0.5]


def test_iteration_time_of_a_trace_has_steps_and_no_windows():
    it = Iterations(warmup=0, warmup_s=0.0, warmup_detected=False, stable=None, timing_window=None,
                    trace_window=None, times_s=[0.21, 0.2, 0.2], source="trace", step_numbers=[7, 8, 9])
    fig = figures.iteration_time_figure(replace(cuda_profile(), iterations=it))
    ax = fig.axes[0]
    assert not ax.patches and list(ax.lines[0].get_xdata()) == [7, 8, 9]
    assert ax.get_xlabel() == "ProfilerStep"
    assert any("3 ProfilerSteps read from a trace" in t for t in _texts(fig))


def test_iteration_time_flags_not_stable_and_says_when_nothing_was_recorded():
    fig = figures.iteration_time_figure(partial_profile())
    assert any("NOT STABLE" in t for t in _texts(fig)) and "PARTIAL" in fig.axes[0].get_title(loc="left")
    assert any("trace window n/a: none recorded" in t for t in _texts(fig))
    empty = figures.iteration_time_figure(replace(cuda_profile(), iterations=None))
    assert "n/a — no iteration was recorded" in _texts(empty)


def test_memory_bars_are_the_category_bytes_in_the_chosen_unit():
    profile = cuda_profile()  # allocator peak 4.1e9 bytes: drawn in GiB
    mem = profile.metrics.memory_bytes
    fig = figures.memory_figure(profile)
    own, split = fig.axes[:2]
    assert own.get_ylabel() == "bytes (GiB)"
    heights = {bars.get_label(): bars.patches[0].get_height() for bars in own.containers}
    assert heights == pytest.approx({c.replace("_", " "): getattr(mem, c) / GiB for c in MEMORY_CATEGORIES})
    stacked = [(p.get_y(), p.get_height()) for p in _bars(split)]
    parts = [mem.at_peak[c] / GiB for c in (*MEMORY_CATEGORIES, "unattributed")]
    assert [h for _, h in stacked] == pytest.approx(parts)
    assert [y for y, _ in stacked] == pytest.approx(list(np.cumsum([0, *parts[:-1]])))  # stacked, in order
    assert own.get_lines()[0].get_ydata()[0] == pytest.approx(mem.allocator_peak / GiB)
    assert "3.00 GiB" in _texts(fig)  # feature maps' bar label


def test_memory_null_category_is_labelled_not_drawn_as_zero():
    fig = figures.memory_figure(cpu_profile())  # workspace null, with a reason
    own = fig.axes[0]
    assert "workspace" not in {bars.get_label() for bars in own.containers} and len(_bars(own)) == 4
    assert [t.get_position()[0] for t in own.texts if t.get_text() == "n/a"] == [MEMORY_CATEGORIES.index("workspace")]
    texts = "\n".join(_texts(fig))
    assert "workspace: n/a — no op-scoped allocator events in the trace" in texts
    assert "workspace: n/a" in texts  # its legend entry in the split at peak
    assert "at peak: 96.4 MiB allocated before the trace window is not attributed" in texts  # a qualifier, not n/a


def test_memory_with_no_split_and_no_categories():
    fig = figures.memory_figure(partial_profile())  # only the allocator peak is known
    own, split = fig.axes[:2]
    assert not _bars(own) and not _bars(split)
    assert [t.get_text() for t in split.texts] == ["n/a"] and len([t for t in own.texts if t.get_text() == "n/a"]) == 5
    assert own.get_lines()[0].get_ydata()[0] == pytest.approx((40 * GiB - 512 * MiB) / GiB)


def test_kernel_scatter_leaves_null_util_out_and_counts_it():
    profile = cuda_profile()
    fig = figures.kernel_utilization_figure(profile)
    ax = fig.axes[0]
    drawn = {tuple(xy) for c in ax.collections if isinstance(c, PathCollection) for xy in c.get_offsets()}
    expected = {(k.time_s, k.util_pct) for k in profile.kernels if k.util_pct is not None}
    assert drawn == expected and len(drawn) == len(profile.kernels) - 2
    assert ax.get_xscale() == "log"
    assert any("2 of 9 groups have no utilization and are not drawn" in t for t in _texts(fig))


def test_kernel_scatter_marks_above_peak_and_draws_both_lines():
    profile = cuda_profile()
    ax = figures.kernel_utilization_figure(profile).axes[0]
    series = {c.get_label(): [tuple(xy) for xy in c.get_offsets()] for c in ax.collections}
    flagged = next(k for k in profile.kernels if k.name.startswith("cutlass_90"))
    assert series["above peak ⚠ (not ranked) (1)"] == [(flagged.time_s, flagged.util_pct)]
    ranked = next(label for label in series if label.startswith("ranked"))
    assert sorted(series[ranked]) == sorted((k.time_s, k.util_pct) for k in profile.low_util_kernels)
    flop = profile.metrics.flop_util_pct
    lines = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()}
    assert lines == {"run's FLOP utilization 21.4 %": flop.value,
                     f"ranking threshold {fmt_pct(flop.kernel_average_pct)}": flop.kernel_average_pct}


def test_kernel_scatter_without_kernels_says_so():
    assert "n/a — no kernels in the trace window" in _texts(figures.kernel_utilization_figure(partial_profile()))


# -- sweep figures ----------------------------------------------------------------------------------


def test_sweep_throughput_skips_the_oom_point_and_labels_it():
    sweep = sample_sweep()
    fig = figures.sweep_throughput_figure(sweep)
    ax = fig.axes[0]
    line = ax.lines[0]
    assert list(line.get_xdata()) == [16, 32, 64, 128, 256]
    assert list(line.get_ydata()) == [p.throughput for p in sweep.points[:5]]
    assert [(t.get_text(), t.get_position()[0]) for t in ax.texts] == [("OOM", 512)]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "32", "64", "128", "256", "512"]
    assert any("OOM at batch 512: ran out of memory" in t for t in _texts(fig))
    hollow = next(line for line in ax.lines if line.get_label() == "partial run")
    assert list(hollow.get_xdata()) == [256]


def test_sweep_utilization_names_a_null_series_and_why():
    fig = figures.sweep_utilization_figure(cpu_sweep())
    ax = fig.axes[0]
    by_label = {line.get_label(): line for line in ax.lines}
    assert len(by_label["GPU busy %: n/a"].get_xdata()) == 0
    assert list(by_label["FLOP utilization %"].get_ydata()) == [31.0, 35.2, 38.5]
    assert list(by_label["CPU utilization %"].get_xdata()) == [2, 4, 8]
    assert [t.get_text() for t in ax.texts] == ["failed"]
    assert "GPU busy %: n/a" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("GPU busy %: n/a — no CUDA device" in t for t in _texts(fig))  # the reason, in the caption


def test_sweep_memory_stacks_the_split_at_peak_and_draws_own_peaks_apart():
    """Issue 28: the stack was each category's own peak, above the allocator's peak; now the stack is the
    split at the allocator's peak (it adds up to the peak) and the own peaks are lines in a panel below."""
    sweep = sample_sweep()
    fig = figures.sweep_memory_figure(sweep)
    ax, own = fig.axes[0], fig.axes[1]
    unit, name = byte_unit(v for p in sweep.points for v in p.memory_bytes.values())
    assert name == "GiB" and ax.get_ylabel() == "at the allocator's peak (GiB)"
    bars = _bars(ax)
    assert len(bars) == 5 * len(MEMORY_CATEGORIES)  # five points ran, the OOM one has no bar; unattributed 0
    first = sorted((p for p in bars if p.get_x() < 0.5), key=lambda p: p.get_y())
    split = sweep.points[0].memory_at_peak
    assert [p.get_height() for p in first] == pytest.approx([split[c] / GiB for c in MEMORY_CATEGORIES])
    top = first[-1].get_y() + first[-1].get_height()  # the stack reaches the allocator's peak, no higher
    assert top == pytest.approx(sweep.points[0].memory_bytes["allocator_peak"] / GiB)
    workspace = next(line for line in own.lines if line.get_label() == "_workspace")
    assert list(workspace.get_ydata()) == pytest.approx([256 * MiB / GiB] * 5)  # its own peak, 256 MiB
    peaks = next(line for line in ax.lines if line.get_label() == "allocator peak")
    assert list(peaks.get_xdata()) == [0, 1, 2, 3, 4]
    assert list(peaks.get_ydata()) == pytest.approx([p.memory_bytes["allocator_peak"] / GiB for p in sweep.points[:5]])
    assert [(t.get_text(), t.get_position()[0]) for t in ax.texts if t.get_text() == "OOM"] == [("OOM", 5)]
    assert "peak 1.95 GiB" in [t.get_text() for t in ax.texts]  # batch 16's allocator peak, labelled


def test_sweep_memory_names_null_categories():
    texts = "\n".join(_texts(figures.sweep_memory_figure(cpu_sweep())))
    assert "workspace n/a at batch 2, 4, 8 — no op-scoped allocator events in the trace" in texts
    assert "batch 16: failed — workload exited with code 1" in texts


# -- comparison figures -----------------------------------------------------------------------------


def test_compare_metrics_bars_are_the_ratios_labelled_with_values():
    comparison = sample_comparison()
    fig = figures.compare_metrics_figure(comparison)
    ax = fig.axes[0]
    shown = [m for m in comparison.metrics if not m.key.startswith("memory.")]
    assert [t.get_text().split("\n")[0] for t in ax.get_yticklabels()] == [m.label for m in shown]
    widths = sorted(p.get_width() for p in _bars(ax))
    assert widths == pytest.approx(sorted(r for m in shown for r in m.ratios if r is not None))
    texts = _texts(fig)
    assert "2,205 images/s (2.10x)" in texts and "1,050 images/s (1.00x)" in texts
    assert any("NVML utilization.gpu, run A: n/a — NVML not sampled (--no-nvml)" in t for t in texts)


def test_compare_ops_draws_time_per_iteration_in_ms():
    comparison = sample_comparison()
    ax = figures.compare_ops_figure(comparison).axes[0]
    widths = sorted(p.get_width() for p in _bars(ax))
    expected = sorted(t * 1000 for op in comparison.ops for t in op.time_per_iteration_s if t is not None)
    assert widths == pytest.approx(expected)
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "aten::convolution_backward"
    absent = [t for t in ax.texts if t.get_text().strip() == "absent"]
    assert len(absent) == 1 and absent[0].get_position()[1] < 4  # the fused op A lacks: A's half of the last row
    assert "31.0 ms" in [t.get_text() for t in ax.texts]  # each bar labelled with its time


def test_compare_memory_stacks_the_memory_metrics():
    comparison = sample_comparison()
    fig = figures.compare_memory_figure(comparison)
    ax = fig.axes[0]
    by_key = {m.key: m for m in comparison.metrics}
    b_bars = sorted((p for p in _bars(ax) if p.get_x() > 0.5), key=lambda p: p.get_y())
    assert [p.get_height() for p in b_bars] == pytest.approx([by_key[f"memory.{c}"].values[1] / GiB
                                                              for c in MEMORY_CATEGORIES])
    assert len(_bars(ax)) == 2 * len(MEMORY_CATEGORIES) - 1  # A's workspace is null
    assert any("run A: workspace n/a — no op-scoped allocator events" in t for t in _texts(fig))


# -- the sets, saving, determinism, no pyplot -------------------------------------------------------


def test_figure_sets_are_keyed_by_file_stem():
    assert list(figures.run_figures(cuda_profile())) == ["iteration_time", "memory", "kernel_utilization"]
    assert list(figures.sweep_figures(sample_sweep())) == ["sweep_throughput", "sweep_utilization", "sweep_memory"]
    assert list(figures.comparison_figures(sample_comparison())) == ["compare_metrics", "compare_ops",
                                                                     "compare_memory"]


def test_save_writes_svg_and_png_deterministically(tmp_path):
    written = figures.save_figures(figures.run_figures(cpu_profile()), tmp_path / "a")
    assert [p.name for p in written] == ["iteration_time.svg", "iteration_time.png", "memory.svg", "memory.png",
                                         "kernel_utilization.svg", "kernel_utilization.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written if p.suffix == ".png")
    again = figures.save_figures(figures.run_figures(cpu_profile()), tmp_path / "b")
    for first, second in zip(written, again):
        assert first.read_bytes() == second.read_bytes(), f"{first.name} differs between two saves"
    svg = written[0].read_text(encoding="utf-8")
    assert "<dc:date>" not in svg and svg.lstrip().startswith("<?xml")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(p.name for p in written)  # no temp left


def test_figure_modules_never_import_pyplot(tmp_path):
    modules = sorted((ROOT / "reports" / "figures").glob("*.py")) + sorted((ROOT / "reports" / "html").glob("*.py"))
    assert len(modules) >= 5
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
            assert not any("pyplot" in n or n == "pylab" for n in names), f"{path.name} imports {names}"
    # And at run time: rendering and saving every figure, and a page, leaves pyplot unimported.
    code = ("import sys; sys.path.insert(0, '..'); import test_reports; from tbd.reports.figures import saving; from tbd.reports.html import run_page; "
            "saving.save_figures(saving.run_figures(test_reports.cuda_profile()), sys.argv[1]); "
            "run_page.profile_html(test_reports.cuda_profile()); "
            "print('matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                         cwd=Path(__file__).parent, check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_byte_unit_follows_the_largest_known_value():
    assert byte_unit([None, 512, 3 * MiB]) == (MiB, "MiB")
    assert byte_unit([4_100_000_000]) == (GiB, "GiB")
    assert byte_unit([None]) == (1, "B") and byte_unit([]) == (1, "B")


def test_profile_builders_stay_valid_records():
    # The figures are drawn from records as profile.json would load them.
    for build in (cuda_profile, cpu_profile, partial_profile):
        assert Profile.from_dict(build().to_dict()) == build()
    assert Sweep.from_dict(sample_sweep().to_dict()) == sample_sweep()
    assert Comparison.from_dict(sample_comparison().to_dict()) == sample_comparison()


def test_a_bisection_labels_powers_of_two_and_the_edge_and_one_oom_per_run():
    """A max search ends in crowded batches (416, 420, 421, 422, ...): labelled are the powers of two
    and the largest batch that ran, less a power of two within 1.3x of it (512 beside 420: the two labels
    would overlap); a run of neighbouring OOM points carries one label."""
    ran = [_point(b, 10.0 * b, 50.0, 20.0, None, b * MiB) for b in (8, 16, 256, 416, 420)]
    oom = [SweepPoint(b, "oom", f"batch {b} ran out of memory on cpu", None, None, None, None, None, None, None,
                      None) for b in (421, 422, 424, 512)]
    sweep = Sweep("resnet50", "pytorch", "cpu", None, "test", "max", ran + oom, 420, 421)
    fig = figures.sweep_throughput_figure(sweep)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "256", "420"]
    # every batch has a tick (matplotlib leaves out a minor tick where a major one is)
    assert sorted({*ax.get_xticks(), *ax.get_xticks(minor=True)}) == [8, 16, 256, 416, 420, 421, 422, 424, 512]
    assert [t.get_text() for t in ax.texts] == ["OOM"]
    assert sum("OOM at batch 421, 422, 424, 512" in t for t in _texts(fig)) == 1


def test_a_flop_utilization_far_below_the_others_gets_its_own_axis():
    """Issue 28: FLOP % of 0.02-2 on the 0-100 axis of GPU busy was a flat line: below 20 % it is drawn on
    a right-hand axis from 0 to its highest point x 1.15, and the caption says so."""
    sweep = sample_sweep()
    points = [replace(p, flop_util_pct=v) for p, v in zip(sweep.points, (0.02, 0.9, 2.0))]
    fig = figures.sweep_utilization_figure(replace(sweep, points=points))
    left, right = fig.axes[0], fig.axes[1]
    flop = next(line for line in right.lines if line.get_label() == "FLOP utilization % (right axis)")
    assert list(flop.get_ydata()) == [0.02, 0.9, 2.0]
    assert right.get_ylim() == pytest.approx((0, 2.3))  # 2.0 x 1.15
    assert left.get_ylim() == (0, 105) and "FLOP utilization %" not in [line.get_label() for line in left.lines]
    assert "FLOP utilization % (right axis)" in [t.get_text() for t in left.get_legend().get_texts()]
    assert any("FLOP utilization on the right axis, 0-2.30 %" in t for t in _texts(fig))
    same = figures.sweep_utilization_figure(sweep)  # 20 % and above: one axis, as before
    assert len(same.axes) == 1
