"""`tbd sweep`'s pure parts: the max-search planner, a point's figures from its profile, the Sweep's
batches and notes, the CSV, the JSON round trip and the table's width."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testpaths import FIXTURES

from tbd.analysis.sweep_plan import (
    doubling_batches,
    failed_point,
    forecast,
    make_sweep,
    median_iteration_s,
    next_batch,
    profile_device,
    remaining_points,
    sweep_point,
)
from tbd.cli.run_analysis import load_profile
from tbd.core.profile_result import MEMORY_CATEGORIES, Quality, Value
from tbd.core.sweep_result import POINT_MEMORY_KEYS, Sweep
from tbd.reports.figures.sweep_figures import sweep_throughput_figure, sweep_utilization_figure
from tbd.reports.html.sweep_page import sweep_html
from tbd.reports.sweep_table import CSV_COLUMNS, csv_rows, forecast_line, plan_line, point_line, render_sweep, sweep_csv

FIXTURE_RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"


def plan(fits_below: int, start: int, cap: int) -> list[int]:
    """The batches the planner runs against an oracle where a batch fits iff it is below `fits_below`."""
    outcomes: dict[int, bool] = {}
    order = []
    while (batch := next_batch(outcomes, start, cap)) is not None:
        assert batch not in outcomes, f"batch {batch} planned twice"
        assert 1 <= batch <= cap
        outcomes[batch] = batch < fits_below
        order.append(batch)
        assert len(order) < 200, "the planner does not end"
    return order


# --- the planner -----------------------------------------------------------------------------

@pytest.mark.parametrize("fits_below, start, cap, expected", [
    # doubling 1..16; 16 fails: bisect (8, 16) -> 12 fails, (8, 12) -> 10 fits, (10, 12) -> 11 fails
    (11, 1, 4096, [1, 2, 4, 8, 16, 12, 10, 11]),
    # the start does not fit: halve to a fit (16 fits), then bisect (16, 32) -> 24, 20, 22, 21
    (21, 64, 4096, [64, 32, 16, 24, 20, 22, 21]),
    # nothing fits, not even 1
    (1, 8, 4096, [8, 4, 2, 1]),
    # everything fits: doubling stops at the cap, which is tried exactly
    (10**9, 3, 100, [3, 6, 12, 24, 48, 96, 100]),
    # the cap itself fails: bisect below it
    (99, 3, 100, [3, 6, 12, 24, 48, 96, 100, 98, 99]),
    # start 1, only batch 1 fits: 2 fails and they are adjacent
    (2, 1, 4096, [1, 2]),
    # a start above the cap begins at the cap
    (5000, 8192, 4096, [4096]),
])
def test_planner_runs_exactly_these_batches(fits_below, start, cap, expected):
    assert plan(fits_below, start, cap) == expected


@settings(max_examples=400, deadline=None)
@given(n=st.integers(1, 20000), start=st.integers(1, 5000), cap=st.integers(1, 10000))
def test_planner_finds_the_largest_fitting_batch_in_log_steps(n, start, cap):
    order = plan(n, start, cap)
    ran = [b for b in order if b < n]
    failed = [b for b in order if b >= n]
    expected = min(n - 1, cap)
    assert max(ran, default=0) == expected  # 0: nothing fits
    if failed and expected >= 1:
        assert min(failed) == expected + 1  # adjacent: the boundary is pinned
    # O(log N): doubling or halving to the boundary, then bisecting an interval at most that wide
    assert len(order) <= 2 * max(n, start, 2).bit_length() + 2


def test_planner_with_a_non_monotone_outcome_still_ends():
    # 8 failed, yet 12 fits (a run near the limit): the search works below the smallest failure
    outcomes = {4: True, 8: False, 12: True}
    assert next_batch(outcomes, 4, 4096) == 6
    assert next_batch({**outcomes, 6: True, 7: True}, 4, 4096) is None


# --- a point from its profile ------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_profile():
    return load_profile(FIXTURE_RUN)


def hand_profile(base, times, window, **metrics):
    """The fixture's profile with hand-set iteration times, timing window and metric values."""
    it = replace(base.iterations, times_s=times, timing_window=window, warmup=window[0])
    return replace(base, iterations=it, metrics=replace(base.metrics, **metrics))


def test_point_figures_are_the_profiles_and_the_median_spans_the_timing_window_only(base_profile):
    # warm-up 0.5 s and trace iterations 9 s must not count; window [2, 6]: 0.10 0.30 0.20 0.40 0.25
    times = [0.5, 0.5, 0.10, 0.30, 0.20, 0.40, 0.25, 9.0, 9.0]
    m = base_profile.metrics
    profile = hand_profile(base_profile, times, [2, 6],
                           throughput=replace(m.throughput, value=123.5, unit="images/s"),
                           cpu_util_pct=Value(87.5), gpu_busy_pct=Value.null("no CUDA device"),
                           flop_util_pct=replace(m.flop_util_pct, value=12.25, reason=None))
    point = sweep_point(8, profile, "b8")
    assert point.status == "ok" and point.reason is None and point.run_dir == "b8" and point.batch == 8
    assert point.throughput == 123.5 and point.throughput_unit == "images/s"
    assert point.iteration_s == 0.25  # sorted 0.10 0.20 0.25 0.30 0.40
    assert point.cpu_util_pct == 87.5 and point.flop_util_pct == 12.25
    assert point.gpu_busy_pct is None and point.reasons["gpu_busy_pct"] == "no CUDA device"
    assert point.stable is True
    mem = base_profile.metrics.memory_bytes
    assert point.memory_bytes == {k: getattr(mem, k) for k in POINT_MEMORY_KEYS}
    assert point.memory_bytes["allocator_peak"] == 2624320  # the fixture's own figure
    # The fixture's profile has no quality record and one timing window: no verdict, no interval, each said why.
    assert set(point.reasons) == {"gpu_busy_pct", "reliable", "throughput_interval"}
    assert point.reliable is None and point.throughput_low is None and point.throughput_high is None


def test_even_window_median_and_missing_window(base_profile):
    even = hand_profile(base_profile, [1.0, 0.2, 0.4, 0.1, 0.3, 7.0], [1, 4])
    assert median_iteration_s(even) == (pytest.approx(0.25), None)  # (0.2 + 0.3) / 2
    none = replace(base_profile, iterations=None)
    assert median_iteration_s(none) == (None, "the profile has no iteration log")
    no_window = replace(base_profile, iterations=replace(base_profile.iterations, timing_window=None))
    point = sweep_point(4, no_window, "b4")
    assert point.iteration_s is None and point.reasons["iteration_s"] == "the run has no timing window"


def test_null_memory_and_non_finite_figures_keep_a_reason(base_profile):
    m = base_profile.metrics
    memory = replace(m.memory_bytes, feature_maps=None, reasons={"feature_maps": "MXNet keeps totals only"})
    profile = replace(base_profile, metrics=replace(m, memory_bytes=memory, cpu_util_pct=Value(math.nan),
                                                    throughput=replace(m.throughput, value=None, reason="cut short")))
    point = sweep_point(2, profile, "b2")
    assert point.memory_bytes["feature_maps"] is None
    assert point.reasons["memory.feature_maps"] == "MXNet keeps totals only"
    assert point.cpu_util_pct is None and point.reasons["cpu_util_pct"] == "not a finite number"
    assert point.throughput is None and point.reasons["throughput"] == "cut short"
    json.dumps(Sweep.to_dict(_sweep([point])), allow_nan=False)  # nothing non-finite leaves


def test_partial_profile_is_a_partial_point_with_its_note(base_profile):
    profile = replace(base_profile, status="partial", notes=["x", "partial: interrupted by the user during timing"])
    point = sweep_point(16, profile, "b16")
    assert point.status == "partial" and point.reason == "interrupted by the user during timing"
    # Said "partial" once: in the point's line and in the table's reasons.
    assert point_line(point).endswith("(partial: interrupted by the user during timing)")
    assert point_line(point).count("partial") == 1
    text = render_sweep(_sweep([point]), width=120)
    assert "partial: interrupted by the user during timing" in text and "partial: partial" not in text
    # No note says why: the point says the run stopped, still without a second "partial".
    assert sweep_point(16, replace(profile, notes=["x"]), "b16").reason == "the run stopped before its end"


def test_failed_point_has_every_figure_null_with_why():
    point = failed_point(64, "oom", "batch 64 ran out of memory on cpu", "b64")
    assert point.status == "oom" and point.reason == "batch 64 ran out of memory on cpu"
    assert point.throughput is None and point.iteration_s is None and point.stable is None
    assert point.memory_bytes == {k: None for k in POINT_MEMORY_KEYS}
    assert point.reasons["throughput"] == "out of memory"
    assert failed_point(3, "failed", "crash").reasons["memory.allocator_peak"] == "the run failed"
    with pytest.raises(ValueError):
        failed_point(3, "ok", "no")


def test_profile_device_names_the_cpu(base_profile):
    device, name = profile_device(base_profile)
    assert device == "cpu" and name == base_profile.environment["cpu"]["model"]


# --- the sweep ---------------------------------------------------------------------------------

def ok_point(batch, throughput=100.0):
    return replace(failed_point(batch, "oom", "x"), status="ok", reason=None, throughput=throughput,
                   throughput_unit="images/s", iteration_s=batch / throughput, cpu_util_pct=50.0, stable=True,
                   memory_bytes={k: batch * 1000 for k in POINT_MEMORY_KEYS},
                   reasons={"gpu_busy_pct": "no CUDA device", "flop_util_pct": "no peak"})


def _sweep(points, mode="list", cap=None, notes=()):
    return make_sweep(model="resnet50", framework="pytorch", device="cpu", device_name="AMD EPYC", size="test",
                      mode=mode, points=points, memory_limit_bytes=2**30, cap=cap, notes=notes)


def test_make_sweep_sorts_and_finds_the_two_batches():
    points = [ok_point(8), failed_point(16, "oom", "batch 16 ran out of memory"), ok_point(12),
              failed_point(14, "oom", "batch 14 ran out of memory"), ok_point(13)]
    sweep = _sweep(points, mode="max", cap=4096)
    assert [p.batch for p in sweep.points] == [8, 12, 13, 14, 16]
    assert sweep.largest_fitting_batch == 13 and sweep.smallest_failing_batch == 14
    assert sweep.notes == []


def test_a_crash_bounding_the_search_and_the_cap_are_noted():
    crashed = _sweep([ok_point(8), failed_point(9, "failed", "workload exited with code 1")], mode="max", cap=64)
    assert crashed.largest_fitting_batch == 8 and crashed.smallest_failing_batch is None
    assert any("batch 9, which failed without running out of memory" in n for n in crashed.notes)
    capped = _sweep([ok_point(32), ok_point(64)], mode="max", cap=64)
    assert capped.notes == ["reached --max-batch 64 without running out of memory: the largest batch that fits "
                            "may be larger"]
    odd = _sweep([ok_point(8), failed_point(10, "oom", "oom"), ok_point(12)], notes=["interrupted at batch 12"])
    assert odd.notes[0] == "interrupted at batch 12" and "not monotone" in odd.notes[1]


def test_sweep_round_trips_through_json():
    sweep = _sweep([ok_point(2, 10.5), ok_point(4, 19.25), failed_point(8, "oom", "batch 8 ran out", "b8")],
                   notes=["a note"])
    text = json.dumps(sweep.to_dict(), allow_nan=False)
    assert Sweep.from_dict(json.loads(text)) == sweep


# --- CSV and table -----------------------------------------------------------------------------

def test_csv_has_one_unformatted_row_per_point():
    sweep = _sweep([ok_point(4, 1234.5678901234), failed_point(8, "oom", "batch 8, out of memory", "b8")])
    rows = list(csv.DictReader(io.StringIO(sweep_csv(sweep))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert CSV_COLUMNS[-len(POINT_MEMORY_KEYS):] == tuple(f"{k}_bytes" for k in (*MEMORY_CATEGORIES, "allocator_peak"))
    ok, oom = rows
    assert ok["batch"] == "4" and ok["status"] == "ok" and ok["reason"] == ""
    assert float(ok["throughput"]) == 1234.5678901234  # every digit, no thousands separator
    assert float(ok["iteration_s"]) == 4 / 1234.5678901234 and ok["unit"] == "images/s"
    assert ok["gpu_busy_pct"] == "" and ok["cpu_util_pct"] == "50.0" and ok["allocator_peak_bytes"] == "4000"
    assert oom["status"] == "oom" and oom["reason"] == "batch 8, out of memory" and oom["throughput"] == ""
    assert csv_rows(sweep)[0]["weights_bytes"] == 4000


def sample_sweep():
    long = "batch 48 ran out of memory on cpu; partial profile kept in /a/very/long/path/" + "x" * 60 + "/b48"
    return _sweep([ok_point(b, 1000.0 + b) for b in (1, 2, 4, 8, 16, 32)]
                  + [failed_point(48, "oom", long, "b48"), failed_point(64, "failed", "workload exited with code 1")],
                  mode="max", cap=4096, notes=["interrupted at batch 64 " + "and a long note " * 8])


@pytest.mark.parametrize("width", [80, 120])
def test_table_fits_the_width_and_says_why(width):
    text = render_sweep(sample_sweep(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "Throughput" in text and "images/s" in text and "1,032" in text  # human units
    assert "n/a" in text and "no CUDA device" in text  # a null figure and its reason
    assert "out of memory on cpu" in text and "failed: workload exited with code 1" in text
    assert "Largest batch that ran: 32; smallest out of memory: 48" in " ".join(text.split())
    assert ("Feature" in text) == (width >= 100)  # the narrow table leaves feature maps to sweep.csv


def test_table_has_no_nan_and_escapes_control_characters():
    sweep = _sweep([replace(ok_point(2), throughput=None, reasons={"throughput": "evil \x1b[2J name"})])
    text = render_sweep(sweep, width=80)
    assert "\x1b" not in text and "\\x1b[2J" in text and "nan" not in text


def test_point_lines():
    assert point_line(ok_point(64, 2742.0)) == "batch 64: 2,742 images/s, 23.3 ms per iteration, peak memory 62.5 KiB"
    assert point_line(failed_point(128, "oom", "x")) == "batch 128: out of memory"
    assert point_line(failed_point(3, "failed", "crash")) == "batch 3: failed: crash"


# --- measurement quality: a point whose profile is unreliable says so in every output ------------------------

LOAD_WARNING = ("another load used 1.02 cores of 2 during the timing windows (1.00 python (pid 6626)): the throughput "
                "and the machine-wide CPU utilization are not this workload's alone")
#: Three timing windows at 100, 110 and 90 images/s: mean 100, sample sd 10, t(2, 97.5 %) = 4.303 from a
#: statistics table: the 95 % interval's half-width is 4.303 x 10 / sqrt(3) = 24.84 images/s, 24.84 % of 100.
HALF_PCT = 4.303 * 10 / math.sqrt(3) / 100 * 100


def quality(reliable, warnings):
    return Quality(reliable=reliable, warnings=warnings, cores=2, wall_s=0.6, workload_cores=0.98,
                   other_load_cores=1.02, tbd_parent_cores=0.0, other_processes=[], gemm_ceiling_flops={},
                   gemm_spread_pct=None, clock_mhz={}, throughput_median=100.0, throughput_spread_pct=20.0,
                   throughput_interval_pct=HALF_PCT, cpu_util_median_pct=None, cpu_util_range_pct=None, repeats=[])


def rated_profile(base, value, reliable, warnings=()):
    """The fixture's profile with three timing windows around `value` (x 1.0, 1.1, 0.9) and a quality verdict."""
    m = base.metrics
    throughput = replace(m.throughput, value=value, unit="images/s", repeats=[value, 1.1 * value, 0.9 * value],
                         spread_pct=20.0, interval_pct=HALF_PCT)
    return replace(base, metrics=replace(m, throughput=throughput), quality=quality(reliable, list(warnings)))


def test_an_unreliable_profile_makes_an_unreliable_point_with_its_interval(base_profile):
    point = sweep_point(8, rated_profile(base_profile, 100.0, False, [LOAD_WARNING]), "b8")
    assert point.status == "ok" and point.reliable is False and point.quality_warnings == [LOAD_WARNING]
    assert point.throughput_interval_pct == pytest.approx(24.8434, abs=1e-4)
    assert point.throughput_low == pytest.approx(100 - 24.8434, abs=1e-4)  # 75.16 images/s
    assert point.throughput_high == pytest.approx(100 + 24.8434, abs=1e-4)  # 124.84 images/s
    assert "reliable" not in point.reasons and "throughput_interval" not in point.reasons
    good = sweep_point(16, rated_profile(base_profile, 200.0, True), "b16")
    assert good.reliable is True and good.throughput_low == pytest.approx(200 * (1 - 0.248434), abs=1e-3)


def unreliable_sweep(base):
    """Batch 8 and 32 unreliable (another load), 16 reliable, 64 out of memory."""
    points = [sweep_point(8, rated_profile(base, 100.0, False, [LOAD_WARNING]), "b8"),
              sweep_point(16, rated_profile(base, 200.0, True), "b16"),
              sweep_point(32, rated_profile(base, 300.0, False, [LOAD_WARNING, "the CPU clock moved"]), "b32"),
              failed_point(64, "oom", "batch 64 ran out of memory on cpu")]
    return _sweep(points, mode="max", cap=4096)


def test_every_output_says_which_points_are_unreliable(base_profile):
    sweep = unreliable_sweep(base_profile)
    assert sweep.unreliable_batches == [8, 32]
    assert any(n.startswith("unreliable measurement at batch 8, 32: its profile's quality warnings (another load "
                            "used 1.02 cores of 2 during the timing windows; 2 more in sweep.json)") for n in sweep.notes)
    assert Sweep.from_dict(json.loads(json.dumps(sweep.to_dict()))) == sweep  # sweep.json keeps it all
    rows = {int(r["batch"]): r for r in csv.DictReader(io.StringIO(sweep_csv(sweep)))}
    assert [rows[b]["reliable"] for b in (8, 16, 32, 64)] == ["false", "true", "false", ""]
    assert float(rows[8]["throughput_low"]) == pytest.approx(75.1566, abs=1e-4)
    assert float(rows[32]["throughput_high"]) == pytest.approx(300 * 1.248434, abs=1e-3)
    assert rows[32]["quality_warnings"] == LOAD_WARNING + " | the CPU clock moved"
    for width in (80, 120):
        text = render_sweep(sweep, width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        table = {int(line.split()[0]): line.split() for line in text.splitlines() if line.strip()[:1].isdigit()
                 and len(line.split()) > 3}
        assert [table[b][1] for b in (8, 16, 32)] == ["unreliable", "ok", "unreliable"]
        assert table[8][2:4] == ["100", "±25%"]  # 24.84 % to two digits
        assert "batch 8:" in text and "unreliable: another load used 1.02 cores" in " ".join(text.split())
    page = sweep_html(sweep)
    assert page.count(">unreliable</td>") == 2 and ">±25%</td>" in page
    assert "Unreliable points" in page and "2 of 3: batch 8, 32" in page
    line = point_line(sweep.points[0])  # 5.70 ms: the fixture run's median iteration
    assert line == "batch 8: 100 images/s ±25%, 5.70 ms per iteration, peak memory 2.5 MiB — unreliable (see its " \
                   "profile's quality warnings)"


def test_the_throughput_figure_draws_each_points_interval_and_rings_the_unreliable(base_profile):
    sweep = unreliable_sweep(base_profile)
    fig = sweep_throughput_figure(sweep)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segments = bars.lines[2][0].get_segments()
    half = 0.248434  # HALF_PCT / 100, by hand
    expected = [[(b, v * (1 - half)), (b, v * (1 + half))] for b, v in ((8, 100.0), (16, 200.0), (32, 300.0))]
    assert np.allclose(np.asarray(segments), np.asarray(expected), atol=1e-3)
    rings = [line for line in ax.get_lines() if line.get_label() == "unreliable (quality warnings)"]
    assert len(rings) == 1 and list(rings[0].get_xdata()) == [8, 32] and list(rings[0].get_ydata()) == [100.0, 300.0]
    texts = " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text())
    assert "unreliable at batch 8, 32" in texts
    util = sweep_utilization_figure(sweep)
    assert any(line.get_label() == "unreliable (quality warnings)" for ax in util.axes for line in ax.get_lines())


# --- the plan: the points the search expects, and the time per point after the first ------------------------

def _counts(start, cap, outcomes=None):
    """Every count of points the planner may still run, over every batch it could find (fits below n)."""
    counts = set()
    for n in range(1, cap + 2):
        known = dict(outcomes or {})
        if any(ok != (b < n) for b, ok in known.items()):
            continue  # an oracle the outcomes so far rule out
        ran = 0
        while (b := next_batch(known, start, cap)) is not None:
            known[b] = b < n
            ran += 1
        counts.add(ran)
    return min(counts), max(counts)


@pytest.mark.parametrize("start, cap, outcomes", [(8, 4096, None), (1, 100, None), (5, 37, None), (64, 1000, None),
                                                  (8, 4096, {8: True, 16: True, 32: False}),
                                                  (64, 4096, {64: False, 32: False})])
def test_remaining_points_are_what_the_planner_runs(start, cap, outcomes):
    assert remaining_points(outcomes or {}, start, cap) == _counts(start, cap, outcomes)


def test_plan_and_forecast_lines_list_the_expected_points():
    assert doubling_batches(8, 4096) == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert doubling_batches(3, 20) == [3, 6, 12, 20]
    first = forecast(None, {}, 8, 4096)
    assert (first.next_batch, first.fewest, first.most, first.most_s) == (8, 4, 21, None)  # _counts(8, 4096)
    assert plan_line(None, doubling_batches(8, 4096), first) == (
        "plan: batch 8, 16, 32, ..., 4096, doubling until one does not fit, then bisecting to the largest that "
        "fits: 4 to 21 points")
    assert plan_line([2, 4, 8], [], forecast([2, 4, 8], {}, 1, 1)) == "plan: 3 points, batch 2, 4, 8"
    # After 8, 16 fit and 32 did not: bisecting (16, 32) takes exactly log2(16) = 4 more points; at 6.5 s each.
    after = forecast(None, {8: True, 16: True, 32: False}, 8, 4096, point_s=6.5)
    assert (after.next_batch, after.fewest, after.most, after.most_s) == (24, 4, 4, 4 * 6.5)
    assert forecast_line(after) == ("next: batch 24; 4 more points, about 6.50 s each at the last point's pace: up to "
                                    "~26.0 s (an estimate; larger batches run longer)")
    assert forecast_line(forecast([2, 4], {2: True}, 1, 1)) == "next: batch 4; 1 more point"
    assert forecast_line(forecast([2, 4], {2: True, 4: True}, 1, 1)) is None
