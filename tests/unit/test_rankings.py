"""The two rankings and what stays out of them (issue 27, items 4 and 5), by hand.

A device of peak 1e12 FLOP/s (fp32) and bandwidth 1e11 B/s: the ridge lies at 10 FLOP/B. Every
expected figure below is arithmetic on the rows written here, not tbd's output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tbd.analysis import kernel_rows, ranking
from tbd.analysis.op_bytes.ops import NO_BYTES
from tbd.analysis.peaks import USER, device_bandwidth
from tbd.analysis.roofline import ABOVE_BANDWIDTH, ABOVE_PEAK, COMPUTE, MEMORY, roofline_point
from tbd.core.records import KernelTable, OpTable, StepSpan, TraceRecords

PEAK, BW = 1e12, 1e11


def _trace(rows: list[tuple[str, str, int, float, float]]) -> tuple[TraceRecords, np.ndarray]:
    """rows: (kernel name, launching op, duration ns, FLOPs, bytes), one after another; the per-row
    utilization FLOPs / (PEAK x duration) x 100 as utilization.kernel_util_pct gives it."""
    n = len(rows)
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    dur = np.array([r[2] for r in rows], dtype=np.int64)
    flops = np.array([r[3] for r in rows], dtype=float)
    kernels = KernelTable(name=obj([r[0] for r in rows]), start_ns=np.cumsum(dur) - dur, dur_ns=dur,
                          device=np.zeros(n, np.int64), stream=np.zeros(n, np.int64), op=obj([r[1] for r in rows]),
                          flops=flops, flop_source=obj(["analytic" if math.isfinite(f) else "" for f in flops]),
                          precision=obj(["fp32"] * n), step=np.zeros(n, np.int64), flop_gap=obj([""] * n),
                          bytes=np.array([r[4] for r in rows], dtype=float))
    end = int(dur.sum())
    empty = OpTable(obj([]), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64))
    trace = TraceRecords(source="t", device_kind="cpu", kernels=kernels, busy_start_ns=kernels.start_ns,
                         busy_end_ns=kernels.start_ns + dur, steps=(StepSpan(1, 0, end, end),), window_start_ns=0,
                         window_end_ns=end, ops=empty, memory=None)
    return trace, 100.0 * flops / (PEAK * dur * 1e-9)


def _tables(rows, bandwidth=BW):
    trace, util = _trace(rows)
    return kernel_rows.kernel_tables(trace, util, {"fp32": PEAK}, bandwidth, lambda g: None)


NAN = float("nan")
# gemm: 6e6 FLOPs in 10 us = 6e11 FLOP/s = 60 % of the peak; 1e5 B: 60 FLOP/B, right of the ridge.
GEMM = ("gemm", "aten::mm", 10_000, 6e6, 1e5)
# add: 1e4 FLOPs, 1.2e5 B in 2 us = 6e10 B/s = 60 % of the bandwidth; 1/12 FLOP/B: memory-bound.
ADD = ("add", "aten::add", 2_000, 1e4, 1.2e5)
# The copy: launched 96 % by aten::reshape (no byte count: strides unrecorded), 4 % by an op
# with FLOPs, so the group does arithmetic (8e3 FLOPs) but its bytes are unknown: its bound too.
COPY = [("direct_copy", "aten::reshape", 24_000, 0.0, NAN), ("direct_copy", "aten::add", 1_000, 8e3, 1e5)]


def test_a_group_whose_bound_is_unknown_is_in_neither_ranking_but_listed_apart_with_why():
    t = _tables([GEMM, ADD, *COPY])
    # Threshold by hand: utilizations gemm 60 %, add 1e4 / (1e12 x 2e-6) = 0.5 %, copy 8e3 / (1e12 x 25e-6)
    # = 0.032 %, time-weighted: (60 x 10 + 0.5 x 2 + 0.032 x 25) / 37.
    assert t.flop_threshold_pct == pytest.approx((60 * 10 + 0.5 * 2 + 0.032 * 25) / 37)
    assert [r.name for r in t.bound_unknown] == ["direct_copy"]
    copy = t.bound_unknown[0]
    assert copy.bound is None and copy.util_pct == pytest.approx(0.032)  # below the threshold, yet not ranked
    assert copy.roofline_note == f"bytes not derivable for aten::reshape: {NO_BYTES['aten::reshape']}"
    assert all(r.bound == COMPUTE for r in t.low_compute) and "direct_copy" not in [r.name for r in t.low_compute]
    assert all(r.bound == MEMORY for r in t.low_memory)
    assert t.flop_threshold_reason is None


def test_no_group_with_flops_leaves_the_flop_threshold_null_with_why_not_zero():
    # Two copies (0 FLOPs, bytes known): 4e5 B in 5 us = 80 %, 1e5 B in 5 us = 20 % of the bandwidth.
    t = _tables([("copy_a", "aten::copy_", 5_000, 0.0, 4e5), ("copy_b", "aten::copy_", 5_000, 0.0, 1e5)])
    assert math.isnan(t.flop_threshold_pct) and "no group with FLOPs counted" in t.flop_threshold_reason
    assert t.low_compute == []
    assert t.bandwidth_threshold_pct == pytest.approx((80 * 5 + 20 * 5) / 10)  # the memory ranking still works
    assert [r.name for r in t.low_memory] == ["copy_b"] and t.bandwidth_threshold_reason is None


def test_a_group_above_the_bandwidth_carries_why_and_stays_out_of_the_threshold():
    # "div": 3e5 B in 2 us = 1.5e11 B/s = 150 % of 1e11: cached or an expanded view, not a faster memory.
    t = _tables([GEMM, ADD, ("div", "aten::div", 2_000, 1e4, 3e5), ("copy", "aten::copy_", 2_000, 0.0, 4e4)])
    div = next(r for r in t.rows if r.name == "div")
    assert div.bandwidth_util_pct == pytest.approx(150.0) and div.roofline_note == ABOVE_BANDWIDTH
    # Threshold over add (60 %) and copy (4e4 / 2e-6 / 1e11 = 20 %) only, 2 us each.
    assert t.bandwidth_threshold_pct == pytest.approx((60 + 20) / 2)
    assert [r.name for r in t.low_memory] == ["copy"]


def test_no_bandwidth_says_so_and_lists_the_groups_it_leaves_unjudged():
    t = _tables([GEMM, ADD], bandwidth=None)
    assert math.isnan(t.bandwidth_threshold_pct) and t.bandwidth_threshold_reason == "memory bandwidth unknown"
    assert {r.name for r in t.bound_unknown} == {"gemm", "add"}
    assert all(r.roofline_note == "memory bandwidth unknown" for r in t.bound_unknown)
    assert t.low_compute == [] and t.low_memory == []


@pytest.mark.parametrize("flops, nbytes, seconds, reason", [
    (1e4, 3e5, 2e-6, ABOVE_BANDWIDTH),  # 150 % of the bandwidth, memory-bound
    (0.0, 3e5, 2e-6, ABOVE_BANDWIDTH),  # data movement at 150 %
    (3e6, 1e4, 2e-6, ABOVE_PEAK),  # 1.5e12 FLOP/s: 150 % of the peak, 300 FLOP/B compute-bound
    (1e6, 1e4, 2e-6, None),  # 50 % of the peak, 5 % of the bandwidth: a plain figure
])
def test_a_share_above_100_says_why(flops, nbytes, seconds, reason):
    p = roofline_point(flops, nbytes, seconds, PEAK, BW)
    assert p.reason == reason
    assert (max(p.roofline_pct, p.bandwidth_util_pct) > 100) == (reason is not None)


def test_bandwidth_given_by_the_user_is_labelled_theirs_and_the_advice_names_it():
    assert device_bandwidth({}, "cuda", None, 9e11) == (9e11, USER, "given with --memory-bandwidth")
    value, source, why = device_bandwidth({"gpu": {"name": "Imaginary GPU 9000", "vendor": "nvidia"}}, "cuda", None)
    assert value is None and source == "none"
    assert "--memory-bandwidth" in why and "--peak-flops" not in why and "GPU table" in why
    assert "--memory-bandwidth" in device_bandwidth({}, "cpu", None)[2]


def test_a_group_with_no_flops_and_no_bytes_has_no_bound_and_says_why():
    p = roofline_point(0.0, 0.0, 1e-6, PEAK, BW)  # a view or an allocation's op time on the CPU
    assert p.bound is None and p.reason.startswith("no FLOPs and no bytes")


# -- The default ranking: by the time that could be won back (issue 28). --

# long: 40 us at 50 % of the peak (2e7 FLOPs, 2e5 B: 100 FLOP/B, compute-bound): wins back 40 x 0.5 = 20 us.
LONG = ("long", "aten::convolution", 40_000, 2e7, 2e5)
# tiny: 1 us at 1 % of the peak (1e4 FLOPs, 1e2 B: 100 FLOP/B): wins back 1 x 0.99 = 0.99 us. Table V ranks it
# first (far below the average), though it can win back 20x less than `long`.
TINY = ("tiny", "aten::mm", 1_000, 1e4, 1e2)
# over: 5e6 FLOPs in 2 us = 250 % of the peak: a misestimate, its won-back time unknown, not ranked.
OVER = ("over", "aten::mm", 2_000, 5e6, 1e4)


def test_the_default_ranking_is_by_the_time_reaching_the_roof_would_win_back():
    t = _tables([LONG, GEMM, ADD, TINY, OVER, *COPY])
    total_ns = 40_000 + 10_000 + 2_000 + 1_000 + 2_000 + 25_000
    # long 20 us; gemm 10 x 0.4 = 4 us; add 2 x (1 - 0.6) = 0.8 us; tiny 0.99 us; over and copy: unknown.
    expected = [("long", 20e-6), ("gemm", 4e-6), ("tiny", 0.99e-6), ("add", 0.8e-6)]
    assert [r.name for r in t.recoverable] == [name for name, _ in expected]
    for row, (_, seconds) in zip(t.recoverable, expected):
        assert row.recoverable_s == pytest.approx(seconds)
        assert row.recoverable_pct == pytest.approx(100 * seconds / (total_ns * 1e-9))
    # Table V, kept as a view: below the average (50 x 40 + 60 x 10 + 0.5 x 2 + 1 x 1 + 0.032 x 25) / 78 = 33.4 %
    assert t.flop_threshold_pct == pytest.approx((50 * 40 + 60 * 10 + 0.5 * 2 + 1 * 1 + 0.032 * 25) / 78)
    assert [r.name for r in t.low_compute] == ["tiny"]
    rows = {r.name: r for r in t.rows}
    assert rows["over"].recoverable_s is None and rows["direct_copy"].recoverable_s is None
    assert rows["long"].ncu is None  # a CPU trace: no Nsight Compute command


def test_recoverable_time_is_unknown_without_a_share_and_never_negative():
    assert ranking.recoverable_ns(1000, 25.0) == 750.0
    assert ranking.recoverable_ns(1000, 100.0) == 0.0
    assert math.isnan(ranking.recoverable_ns(1000, None))
    assert math.isnan(ranking.recoverable_ns(1000, 100.5))  # a misestimate: unknown, not -5


def test_recommendations_only_where_the_figures_show_them():
    # One FP32 compute-bound group, 100 % of the time at 50 % of the peak; an FP16 peak 8x the FP32 one.
    trace, util = _trace([LONG])
    t = kernel_rows.kernel_tables(trace, util, {"fp32": PEAK, "fp16": 8 * PEAK}, BW, lambda g: None)
    kinds = [r.kind for r in t.recommendations]
    assert kinds == ["start_here", "faster_precision"]
    faster = t.recommendations[1]
    assert "at 50 % of the FP32 peak" in faster.text and "8x that peak in FP16" in faster.text
    assert faster.figures == ["kernels[0] (long).util_pct: 50", "metrics.flop_util_pct.peaks_by_precision.fp32: 1e+12",
                              "metrics.flop_util_pct.peaks_by_precision.fp16: 8e+12"]
    # An FP16 peak only 1.5x the FP32 one: not worth a move, nothing said.
    t = kernel_rows.kernel_tables(trace, util, {"fp32": PEAK, "fp16": 1.5 * PEAK}, BW, lambda g: None)
    assert [r.kind for r in t.recommendations] == ["start_here"]
    # Memory-bound groups: 100 % of the time at 60 % of the bandwidth: move fewer bytes.
    trace, util = _trace([ADD])
    t = kernel_rows.kernel_tables(trace, util, {"fp32": PEAK, "fp16": 8 * PEAK}, BW, lambda g: None)
    assert [r.kind for r in t.recommendations] == ["start_here", "fewer_bytes"]
    assert "at 60 % of the memory bandwidth" in t.recommendations[1].text
