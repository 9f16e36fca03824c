import numpy as np
import pytest

from tbd.analysis import utilization
from tbd.analysis.ranking import average_util_pct, group_kernels, low_util_kernels
from tbd.core.records import CpuSample, KernelTable, NvmlSample, OpTable, StepSpan, TraceRecords


def table(names, starts, durs, flops, precision="fp32"):
    n = len(names)
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    return KernelTable(name=obj(names), start_ns=np.array(starts, dtype=np.int64),
                       dur_ns=np.array(durs, dtype=np.int64), device=np.zeros(n, np.int64),
                       stream=np.zeros(n, np.int64), op=obj([""] * n), flops=np.array(flops, dtype=float),
                       flop_source=obj(["analytic" if np.isfinite(f) else "" for f in flops]),
                       precision=obj([precision] * n), step=np.zeros(n, np.int64))


def trace_of(kernels, window, busy=None):
    starts = kernels.start_ns if busy is None else np.array(busy[0])
    ends = kernels.start_ns + kernels.dur_ns if busy is None else np.array(busy[1])
    empty = OpTable(np.array([], object), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    return TraceRecords(source="t", device_kind="cuda", kernels=kernels, busy_start_ns=starts, busy_end_ns=ends,
                        steps=(StepSpan(1, window[0], window[1], window[1]),), window_start_ns=window[0],
                        window_end_ns=window[1], ops=empty, memory=None)


def test_formula_1_gpu_busy_union_over_window():
    # kernels [0,30) and [20,50) overlap on two streams, [100,120) alone; window 0..200 ns
    k = table(["a", "b", "c"], [0, 20, 100], [30, 30, 20], [0, 0, 0])
    assert utilization.gpu_busy_pct(trace_of(k, (0, 200))) == pytest.approx(100 * (50 + 20) / 200)


def test_formula_2_flop_util():
    # 2e3 + 1e3 FLOPs over 6 us of busy time at a 1e9 FLOP/s peak: 3e3 / (1e9 * 6e-6) = 50 %
    k = table(["gemm", "relu"], [0, 3000], [3000, 3000], [2e3, 1e3])
    busy = utilization.device_busy_ns(trace_of(k, (0, 6000)))
    assert busy == 6000
    assert utilization.flop_util_pct(k, busy, {"fp32": 1e9}) == pytest.approx(100 * 3e3 / (1e9 * 6000e-9))


def test_per_kernel_util_and_mixed_precision():
    k = table(["gemm", "relu"], [0, 3000], [3000, 3000], [2e3, 1e3])
    util = utilization.kernel_util_pct(k, {"fp32": 1e9})
    assert util.tolist() == pytest.approx([100 * 2e3 / (1e9 * 3e-6), 100 * 1e3 / (1e9 * 3e-6)])
    # a tf32 kernel is weighed against the tf32 peak, not the fp32 one
    k2 = KernelTable(**{**k.__dict__, "precision": np.array(["tf32", "fp32"], dtype=object)})
    total = utilization.flop_util_pct(k2, 6000, {"fp32": 1e9, "tf32": 8e9})
    assert total == pytest.approx(100 * (2e3 / 8e9 + 1e3 / 1e9) / 6000e-9)


def test_formula_3_cpu_util():
    sample = CpuSample(busy_s=np.array([1.0, 0.5, 0.25, 0.25]), total_s=np.array([2.0] * 4), wall_ns=2_000_000_000,
                       cores=4)
    assert utilization.cpu_util_pct(sample) == pytest.approx(100 * (1.0 + 0.5 + 0.25 + 0.25) / (4 * 2.0))


def test_formula_3_counts_the_window_in_the_counters_own_ticks():
    # a 100 ms window read by 10 ms ticks: 13 ticks elapsed on each core, 12 + 13 of them busy;
    # against the host clock this would read (0.12 + 0.13) / (2 * 0.1) = 125 %
    sample = CpuSample(busy_s=np.array([0.12, 0.13]), total_s=np.array([0.13, 0.13]), wall_ns=100_000_000, cores=2)
    assert utilization.cpu_util_pct(sample) == pytest.approx(100 * (0.12 + 0.13) / (0.13 + 0.13))


def test_nvml_mean_and_throughput():
    assert utilization.nvml_busy_pct(NvmlSample(np.array([90.0, 100.0, 80.0]), 0)) == pytest.approx(90.0)
    # 64 samples x 10 iterations in 2.5 s
    assert utilization.throughput_per_s(64, 10, 2_500_000_000) == pytest.approx(64 * 10 / 2.5)


def test_ranking_rule():
    # conv: 600 ns at 50 %, bn: 300 ns at 10 %, relu: 100 ns at 5 %, copy: 200 ns unknown
    peak = 1e12
    flops = [0.5 * peak * 600e-9, 0.1 * peak * 300e-9, 0.05 * peak * 100e-9, np.nan]
    k = table(["conv", "bn", "relu", "copy"], [0, 600, 900, 1000], [600, 300, 100, 200], flops)
    groups = group_kernels(k, utilization.kernel_util_pct(k, {"fp32": peak}))
    assert [g.name for g in groups] == ["conv", "bn", "copy", "relu"]
    assert groups[0].time_share_pct == pytest.approx(100 * 600 / 1200)
    avg = average_util_pct(groups)
    assert avg == pytest.approx((50 * 600 + 10 * 300 + 5 * 100) / (600 + 300 + 100))
    low = low_util_kernels(groups, avg)
    # below 33.5 %: bn and relu, longest first; the unknown 'copy' is never ranked
    assert [g.name for g in low] == ["bn", "relu"]
    assert low[0].util_pct == pytest.approx(10.0)


def test_a_partly_counted_group_keeps_its_counted_calls_flops_and_their_utilization():
    # 5 FLOPs in 10 ns at 1 GFLOP/s peak: 5e-9 s at peak over 1e-8 s = 50 %; the uncounted call's 10 ns
    # neither dilutes it nor hides it: the group says 1 call of 2 is uncounted (issue 27, item 1).
    k = table(["k", "k"], [0, 10], [10, 10], [5.0, np.nan])
    g = group_kernels(k, utilization.kernel_util_pct(k, {"fp32": 1e9}))[0]
    assert (g.calls, g.flops, g.util_pct, g.uncounted_calls, g.uncounted_time_ns) == (2, 5.0, 50.0, 1, 10)
    none = group_kernels(table(["k"], [0], [10], [np.nan]), np.array([np.nan]))[0]
    assert np.isnan(none.flops) and np.isnan(none.util_pct) and none.uncounted_calls == 1


def test_groups_tie_by_name_and_take_their_dominant_precision_and_shared_source():
    # "b" and "a" both 100 ns: equal time, so by name; "a" ran 60 ns fp16 + 40 ns fp32 -> fp16
    k = table(["b", "a", "a"], [0, 100, 200], [100, 60, 40], [1.0, 2.0, np.nan])
    k = KernelTable(**{**k.__dict__, "precision": np.array(["fp32", "fp16", "fp32"], dtype=object)})
    groups = group_kernels(k, utilization.kernel_util_pct(k, {"fp32": 1e9, "fp16": 1e9}))
    # "a" has one uncounted call: its counted call's source is the group's
    assert [(g.name, g.precision, g.flop_source) for g in groups] == [("a", "fp16", "analytic"),
                                                                       ("b", "fp32", "analytic")]
    # an exact tie in precision time goes to the first by name
    k = KernelTable(**{**k.__dict__, "dur_ns": np.array([100, 50, 50], dtype=np.int64)})
    assert group_kernels(k, utilization.kernel_util_pct(k, {"fp32": 1e9}))[0].precision == "fp16"


def test_known_zero_flops_is_zero_util_without_a_precision():
    k = table(["aten::fill_"], [0], [100], [0.0], precision="")
    assert utilization.kernel_util_pct(k, {"fp32": 1e9}).tolist() == [0.0]


def test_a_window_shorter_than_ten_ticks_is_not_measured():
    from tbd.analysis.assemble import cpu_util

    short = CpuSample(busy_s=np.array([0.01, 0.0]), total_s=np.array([0.02, 0.02]), wall_ns=20_000_000, cores=2)
    v = cpu_util(short, "unused")
    assert v.value is None and "shorter than 10 ticks" in v.reason
    long = CpuSample(busy_s=np.array([0.1, 0.05]), total_s=np.array([0.2, 0.2]), wall_ns=200_000_000, cores=2)
    assert cpu_util(long, "unused").value == pytest.approx(100 * 0.15 / 0.4)


def test_real_counters_see_one_busy_thread():
    """One thread spinning for 0.6 s on this machine: formula (3) reads about 100 / cores percent."""
    import time as _time

    from tbd.profilers.cpu import CpuWindow

    window = CpuWindow()
    window.start()
    end = _time.perf_counter() + 0.6
    while _time.perf_counter() < end:
        pass
    sample = window.stop()
    cores = sample.cores
    expected = 100 / cores
    # other processes may add load, never remove ours: at least ~80 % of one core, at most all of them
    assert 0.8 * expected <= utilization.cpu_util_pct(sample) <= 100


def test_one_busy_core_of_several_is_called_out_unless_threads_were_given():
    from tbd.analysis.assemble import cpu_util, one_core_note

    # 2 cores, 2 s window: one core busy 1.9 s, the other 0.3 s -> (1.9 + 0.3) / (2 x 2) = 55 %.
    one = CpuSample(busy_s=np.array([1.9, 0.3]), total_s=np.array([2.0, 2.0]), wall_ns=2_000_000_000, cores=2)
    util = cpu_util(one, "")
    assert util.value == pytest.approx(100 * (1.9 + 0.3) / (2 * 2.0))
    assert one_core_note(util, one, {"threads": None}) == [
        "CPU utilization 55 % of 2 cores: the framework kept about one core busy with its own thread count; "
        "--threads 2 gives it every core"]
    assert one_core_note(util, one, {"threads": 1}) == []  # the user chose one thread
    # Both cores busy: (1.9 + 1.2) / 4 = 77.5 % > 125 / 2 %.
    both = CpuSample(busy_s=np.array([1.9, 1.2]), total_s=np.array([2.0, 2.0]), wall_ns=2_000_000_000, cores=2)
    assert one_core_note(cpu_util(both, ""), both, {"threads": None}) == []
