"""analysis.compare_runs on hand-built profiles: every ratio, delta and share written as arithmetic."""

import dataclasses
import json

import pytest

from tbd.analysis.compare_runs import MATERIAL_CHANGE_PCT, Side, compare_profiles
from tbd.core.comparison import Comparison
from tbd.core.errors import ResultFormatError
from tbd.core.profile_result import (
    Bandwidth,
    FlopUtil,
    Iterations,
    Memory,
    Metrics,
    OpGroupRow,
    Profile,
    Quality,
    Throughput,
    Value,
)
from tbd.reports.comparison_text import comparison_csv, gap_sentence, render_comparison
from tbd.reports.figures.comparison_figures import compare_memory_figure, compare_metrics_figure, compare_ops_figure


def _profile(*, model="resnet50", batch=32, gpu="GPU A", peak=10e12, throughput=100.0, unit="images/s",
             times=(0.5, 0.1, 0.1, 0.1, 0.2, 0.2), timing=(1, 3), trace=(4, 5), busy=50.0, util=20.0,
             ops=(("aten::convolution", 0.3, 40.0), ("aten::addmm", 0.1, 10.0)), weights=1000,
             feature_maps=None, interval=None, warnings=None) -> Profile:
    memory = Memory(weights=weights, gradients=weights, feature_maps=feature_maps, workspace=0, dynamic=500,
                    allocator_peak=3000, at_peak={}, reasons={} if feature_maps is not None else
                    {"feature_maps": "not recorded by this framework"})
    flop = FlopUtil(util, None, "analytic", peak, "gpu_table", peak, None, None, None, None, None)
    metrics = Metrics(throughput=Throughput(throughput, unit, reason=None if throughput else "no samples",
                                            interval_pct=interval),
                      gpu_busy_pct=Value(busy), gpu_busy_nvml_pct=Value.null("no NVML"), flop_util_pct=flop,
                      cpu_util_pct=Value(12.5), memory_bytes=memory, memory_bandwidth=Bandwidth(1e12, "gpu_table"))
    its = Iterations(warmup=1, warmup_s=times[0], warmup_detected=True, stable=True, timing_window=list(timing),
                     trace_window=list(trace) if trace else None, times_s=list(times))
    total = sum(t for _, t, _ in ops)
    groups = [OpGroupRow(name, 10, t, 100.0 * t / total, None, u) for name, t, u in ops]
    return Profile(status="complete", spec={"model": model, "framework": "pytorch", "batch": batch, "device": "cuda"},
                   environment={"gpu": {"name": gpu}}, iterations=its, metrics=metrics, kernels=[],
                   low_util_kernels=[], notes=[], op_groups=groups,
                   quality=None if warnings is None else _quality(warnings))


def _quality(warnings: list[str]) -> Quality:
    """A quality record with these warnings (none: reliable); the other figures do not enter a comparison."""
    return Quality(reliable=not warnings, warnings=list(warnings), cores=2, wall_s=1.0, workload_cores=1.0,
                   other_load_cores=0.0, tbd_parent_cores=0.0, other_processes=[], gemm_ceiling_flops={},
                   gemm_spread_pct=None, clock_mhz={}, throughput_median=None, throughput_spread_pct=None,
                   throughput_interval_pct=None, cpu_util_median_pct=None, cpu_util_range_pct=None, repeats=[])


def _compare(*profiles):
    return compare_profiles([Side(f"run{i}", p) for i, p in enumerate(profiles)])


def _metric(c: Comparison, key: str):
    return next(m for m in c.metrics if m.key == key)


def test_ratios_to_the_first_run():
    a = _profile()
    b = _profile(gpu="GPU B", peak=32e12, throughput=210.0, times=(0.4, 0.05, 0.05, 0.05, 0.1, 0.1), busy=80.0,
                 util=25.0, ops=(("aten::convolution", 0.12, 50.0), ("aten::addmm", 0.08, 12.0)))
    c = _compare(a, b)
    assert [r.label for r in c.runs] == ["A", "B"]
    assert _metric(c, "throughput").ratios == [1.0, pytest.approx(210 / 100)]
    # iteration time: the timing window's iterations 1..3 only (warm-up and traced ones left out)
    assert _metric(c, "iteration_s").values == [pytest.approx(0.1), pytest.approx(0.05)]
    assert _metric(c, "iteration_s").ratios[1] == pytest.approx(0.05 / 0.1)
    assert _metric(c, "gpu_busy_pct").ratios[1] == pytest.approx(80 / 50)
    assert _metric(c, "flop_util_pct").ratios[1] == pytest.approx(25 / 20)
    # kernel time per traced iteration: the trace window holds iterations 4..5, two of them
    assert _metric(c, "kernel_time_per_iteration_s").values == [pytest.approx((0.3 + 0.1) / 2),
                                                                 pytest.approx((0.12 + 0.08) / 2)]
    assert _metric(c, "gpu_busy_nvml_pct").values == [None, None]
    assert _metric(c, "gpu_busy_nvml_pct").reasons == ["no NVML", "no NVML"]
    assert _metric(c, "memory.feature_maps").reasons[0] == "not recorded by this framework"
    gap = c.gaps[0]
    assert gap.peak_ratio == pytest.approx(32 / 10)
    assert (gap.speed_ratio, gap.speed_basis) == (pytest.approx(2.1), "throughput")
    assert gap.kernel_time_delta_s == pytest.approx(0.1 - 0.2)
    # conv: 0.06 - 0.15 = -0.09 s per iteration of the -0.10 s change = 90 %; addmm 0.04 - 0.05 = 10 %
    conv = next(o for o in c.ops if o.op == "aten::convolution")
    assert conv.delta_s[1] == pytest.approx(-0.09) and conv.gap_share_pct[1] == pytest.approx(90.0)
    assert conv.util_pct == [40.0, 50.0]
    assert (gap.top_op, gap.top_op_share_pct) == ("aten::convolution", pytest.approx(90.0))
    assert c.ops[0].op == "aten::convolution"  # largest absolute delta first
    assert c.differences == []
    assert gap_sentence(c, gap) == ("B has 3.20x A's FP32 peak; this workload ran 2.10x as fast (throughput; no "
                                    "interval: A and B have one timing window (--repeat 1)); it spends 100 ms less "
                                    "kernel time per iteration, 90.0 % of that in aten::convolution.")


def test_an_op_one_run_lacks_counts_zero_and_its_util_is_null():
    a = _profile(ops=(("aten::convolution", 0.3, 40.0), ("nccl:all_reduce", 0.1, None)))
    b = _profile(ops=(("aten::convolution", 0.3, 40.0),))
    c = _compare(a, b)
    nccl = next(o for o in c.ops if o.op == "nccl:all_reduce")
    assert nccl.time_per_iteration_s == [pytest.approx(0.05), 0.0]
    assert nccl.util_pct == [None, None]
    assert nccl.delta_s[1] == pytest.approx(-0.05) and nccl.gap_share_pct[1] == pytest.approx(100.0)


def test_small_net_change_gets_no_shares():
    """Ops moving both ways around a near-zero total: per iteration +0.05 and -0.055 s of 0.2 s is -0.005 s (2.5 %)."""
    assert 0.005 / 0.2 * 100 < MATERIAL_CHANGE_PCT
    a = _profile(ops=(("x", 0.2, None), ("y", 0.2, None)))
    b = _profile(ops=(("x", 0.3, None), ("y", 0.09, None)))
    c = _compare(a, b)
    assert all(o.gap_share_pct[1] is None for o in c.ops)
    gap = c.gaps[0]
    assert gap.kernel_time_delta_s == pytest.approx(-0.005)
    # the op that moved most towards the net change (down): y, (0.09 - 0.2) / 2 s per iteration
    assert (gap.top_op, gap.top_op_delta_s, gap.top_op_share_pct) == ("y", pytest.approx(-0.055), None)
    assert "a small net change" in gap_sentence(c, gap)


def test_speed_ratio_falls_back_to_iteration_time_only_for_the_same_batch():
    a = _profile(throughput=None)
    b = _profile(throughput=None, times=(0.4, 0.05, 0.05, 0.05, 0.1, 0.1))
    gap = _compare(a, b).gaps[0]
    assert (gap.speed_ratio, gap.speed_basis) == (pytest.approx(0.1 / 0.05), "iteration time")
    c = _compare(a, _profile(throughput=None, batch=64))
    assert c.gaps[0].speed_ratio is None and "not the same workload" in c.gaps[0].speed_reason
    assert c.gaps[0].not_comparable_reason == "batch: 32 / 64" and c.differences == ["batch: 32 / 64"]


def test_throughput_units_that_differ_get_no_ratio():
    c = _compare(_profile(), _profile(model="seq2seq", unit="sentences/s", throughput=50.0))
    tp = _metric(c, "throughput")
    assert tp.values == [100.0, 50.0] and tp.ratios == [1.0, None]
    assert tp.reasons[1] == "unit sentences/s differs from A's images/s: no ratio"
    assert c.differences == ["model: resnet50 / seq2seq"]


def test_a_trace_without_steps_has_no_per_iteration_op_times():
    a = _profile()
    b = _profile(trace=None)
    c = _compare(a, b)
    assert all(o.time_per_iteration_s[1] is None and o.delta_s[1] is None for o in c.ops)
    assert _metric(c, "kernel_time_per_iteration_s").values[1] is None
    assert "B has no iterations (ProfilerStep spans): no per-iteration op times" in c.notes


def test_three_runs_each_against_the_first():
    c = _compare(_profile(), _profile(throughput=200.0), _profile(throughput=50.0))
    assert _metric(c, "throughput").ratios == [1.0, 2.0, 0.5]
    assert [g.label for g in c.gaps] == ["B", "C"]


def test_json_round_trip_and_validation():
    c = _compare(_profile(), _profile(throughput=150.0))
    data = json.loads(json.dumps(c.to_dict()))
    assert Comparison.from_dict(data) == c
    data["metrics"][0]["values"] = [1.0]
    with pytest.raises(ResultFormatError, match="metrics\\[0\\].values' has 1 entries for 2 runs"):
        Comparison.from_dict(data)
    with pytest.raises(ResultFormatError, match="unknown comparison schema"):
        Comparison.from_dict({"schema": "tbd.profile/2"})


def test_csv_has_a_row_per_metric_and_op_and_run():
    c = _compare(_profile(), _profile(throughput=150.0))
    lines = comparison_csv(c).splitlines()
    assert lines[0].startswith("section,key,label,unit,run,source,value,ratio_to_first")
    assert len(lines) == 1 + 2 * (len(c.metrics) + len(c.ops))
    assert "metric,throughput,Throughput,images/s,B,run1,150.0,1.5,,,,,resnet50 · GPU A · batch 32 (run1),,," in lines


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_fits_the_width(width):
    c = _compare(_profile(), _profile(throughput=150.0, gpu="NVIDIA H100 80GB HBM3 with a long name"))
    text = render_comparison(c, width=width, color=False)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "1.50x" in text


# --- issue 28: intervals, unreliable runs, unlike workloads, names ---

def test_ratio_interval_is_the_ratio_of_the_bounds():
    # A: 100 images/s within ±10 % (95 %), B: 210 within ±5 %: B/A = 2.1, lowest 210 x 0.95 / (100 x 1.1),
    # highest 210 x 1.05 / (100 x 0.9).
    c = _compare(_profile(interval=10.0), _profile(gpu="GPU B", throughput=210.0, interval=5.0))
    low, high = 210 * 0.95 / (100 * 1.1), 210 * 1.05 / (100 * 0.9)
    gap = c.gaps[0]
    assert (gap.speed_ratio_low, gap.speed_ratio_high) == (pytest.approx(low), pytest.approx(high))
    assert gap.speed_interval_reason is None
    tp = _metric(c, "throughput")
    assert tp.ratio_low == [pytest.approx(1 * 0.9 / 1.1), pytest.approx(low)]
    assert tp.ratio_high == [pytest.approx(1.1 / 0.9), pytest.approx(high)]
    assert "this workload ran 2.10x as fast (throughput; 95 % interval 1.81x-2.45x)" in gap_sentence(c, gap)
    text = render_comparison(c, width=120, color=False)
    assert "210.0 images/s (2.10x, 1.81x-2.45x)" in text
    row = next(r for r in comparison_csv(c).splitlines() if r.startswith("metric,throughput,") and ",B," in r)
    assert row.endswith(f",{low!r},{high!r}")
    # the JSON keeps them, and a bad length is refused
    data = json.loads(json.dumps(c.to_dict()))
    assert Comparison.from_dict(data).gaps[0].speed_ratio_high == pytest.approx(high)
    next(m for m in data["metrics"] if m["key"] == "throughput")["ratio_low"] = [1.0]
    with pytest.raises(ResultFormatError, match="ratio_low"):
        Comparison.from_dict(data)


def test_an_interval_reaching_zero_is_unbounded_above():
    # The run: spread 92.7 %, ±127 % at 95 %. A at 100 ± 127 %, B at 4.92 ± 10 %: 0.0492x, from
    # 4.92 x 0.9 / (100 x 2.27) up: A's lower bound is below 0, so no upper bound.
    c = _compare(_profile(interval=127.0), _profile(gpu="GPU B", throughput=4.92, interval=10.0))
    gap = c.gaps[0]
    assert gap.speed_ratio_low == pytest.approx(4.92 * 0.9 / (100 * 2.27)) and gap.speed_ratio_high is None
    assert "reaches 0" in gap.speed_interval_reason
    assert "0.0492x as fast (throughput; 95 % interval 0.0195x-unbounded" in gap_sentence(c, gap)
    # B's own interval reaching 0: the ratio's starts at 0
    c = _compare(_profile(interval=10.0), _profile(gpu="GPU B", throughput=50.0, interval=120.0))
    assert c.gaps[0].speed_ratio_low == 0.0 and c.gaps[0].speed_ratio_high == pytest.approx(0.5 * 2.2 / 0.9)


def test_unreliable_runs_say_so_in_text_json_csv_and_figures():
    why = "the throughput of the 3 timing windows varied by 93 % of their median"
    c = _compare(_profile(warnings=[why], interval=127.0), _profile(gpu="GPU B", warnings=[], interval=2.0))
    assert [r.reliable for r in c.runs] == [False, True] and c.gaps[0].reliable is False
    assert c.runs[0].quality_warnings == [why]
    text = render_comparison(c, width=120, color=False)
    assert f"A is UNRELIABLE: {why}" in text
    assert "A is UNRELIABLE (see the notes): the ratio may be far off" in text
    assert any(line.startswith("A ") and "UNRELIABLE" in line for line in text.splitlines())  # the runs table
    assert any("A (resnet50 · GPU A · batch 32) is UNRELIABLE" in n for n in c.notes)
    data = c.to_dict()
    assert [r["reliable"] for r in data["runs"]] == [False, True] and data["gaps"][0]["reliable"] is False
    rows = comparison_csv(c).splitlines()
    assert all(",false," in r for r in rows[1:] if ",A,run0," in r)
    assert all(",true," in r for r in rows[1:] if ",B,run1," in r)
    for figure in (compare_metrics_figure(c), compare_ops_figure(c), compare_memory_figure(c)):
        legend = [t.get_text() for ax in figure.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        ticks = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels()]
        assert "A: resnet50 · GPU A · batch 32 (UNRELIABLE)" in legend + ticks
        assert f"A is UNRELIABLE: {why}" in figure.get_supxlabel().replace("\n", " ")
    # a run without a quality record is neither: unknown, with why
    c = _compare(_profile(), _profile(gpu="GPU B"))
    assert [r.reliable for r in c.runs] == [None, None] and c.gaps[0].reliable is None
    assert "older tbd" in c.runs[0].quality_reason


def test_runs_of_different_models_get_no_speed_ratio_and_no_attribution():
    a = _profile()
    b = _profile(model="bert", gpu="GPU B", throughput=210.0, ops=(("aten::convolution", 0.12, 50.0),
                                                                   ("aten::addmm", 0.08, 12.0)))
    c = _compare(a, b)
    gap = c.gaps[0]
    assert not gap.comparable and gap.not_comparable_reason == "model: resnet50 / bert"
    assert gap.speed_ratio is None and gap.top_op is None and gap.top_op_share_pct is None
    assert all(o.gap_share_pct[1] is None for o in c.ops)
    assert _metric(c, "throughput").ratios[1] == pytest.approx(2.1)  # the table stays, labelled
    text = render_comparison(c, width=120, color=False)
    assert "Not the same workload: B against A (model: resnet50 / bert)" in text
    assert "as fast" not in text and "of that in" not in text
    for batch, framework, why in ((64, "pytorch", "batch: 32 / 64"), (32, "mxnet", "framework: pytorch / mxnet")):
        other = _profile(batch=batch)
        other.spec["framework"] = framework
        assert _compare(a, other).gaps[0].not_comparable_reason == why


def test_names_default_from_model_device_batch_and_stay_unique():
    a, b = _profile(gpu="Tesla V100"), _profile(gpu="H100", batch=64)
    c = _compare(a, b)
    assert [r.name for r in c.runs] == ["resnet50 · Tesla V100 · batch 32", "resnet50 · H100 · batch 64"]
    # the same model, device and batch twice: what differs tells them apart
    c = compare_profiles([Side("runs/x", _profile(gpu="G")), Side("runs/y", _profile(gpu="G"))])
    assert [r.name for r in c.runs] == ["resnet50 · G · batch 32 (x)", "resnet50 · G · batch 32 (y)"]
    p1, p2 = _profile(gpu="G"), _profile(gpu="G")
    p1.spec["threads"], p2.spec["threads"] = 1, 2
    c = compare_profiles([Side("r1", p1), Side("r2", p2)])
    assert [r.name for r in c.runs] == ["resnet50 · G · batch 32 (threads 1)", "resnet50 · G · batch 32 (threads 2)"]
    # given names are kept, and every figure's legend names the runs by them
    c = compare_profiles([Side("r1", p1, "before"), Side("r2", p2, "after")])
    assert [r.name for r in c.runs] == ["before", "after"]
    legend = [t.get_text() for t in compare_metrics_figure(c).axes[0].get_legend().get_texts()]
    assert legend == ["A: before", "B: after"]
    assert "A = before" not in render_comparison(c, width=120, color=False)  # the runs table holds the names
    assert "before" in render_comparison(c, width=120, color=False)


def test_a_partial_run_is_said_partial_once():
    partial = dataclasses.replace(_profile(), status="partial", notes=["partial: interrupted by Ctrl-C (SIGINT) during timing"])
    c = compare_profiles([Side("r1", _profile()), Side("r2", partial)])
    [note] = [n for n in c.notes if "partial profile" in n]
    assert note.endswith("is a partial profile (interrupted by Ctrl-C (SIGINT) during timing): its figures cover only "
                         "what was gathered")
    assert "partial: " not in note
    bare = compare_profiles([Side("r1", _profile()), Side("r2", dataclasses.replace(partial, notes=[]))])
    assert any("is a partial profile (the run stopped before its end)" in n for n in bare.notes)
