"""`tbd sweep`'s pure parts: the max-search planner, a point's figures from its profile, the Sweep's
batches and notes, the CSV, the JSON round trip and the table's width."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testpaths import FIXTURES

from tbd.analysis.sweep_plan import (
    failed_point,
    make_sweep,
    median_iteration_s,
    next_batch,
    profile_device,
    sweep_point,
)
from tbd.cli.run_analysis import load_profile
from tbd.core.profile_result import MEMORY_CATEGORIES, Value
from tbd.core.sweep_result import POINT_MEMORY_KEYS, Sweep
from tbd.reports.sweep_table import CSV_COLUMNS, csv_rows, point_line, render_sweep, sweep_csv

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
    assert set(point.reasons) == {"gpu_busy_pct"}


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
    assert point.status == "partial" and point.reason == "partial: interrupted by the user during timing"


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
