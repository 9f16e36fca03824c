"""The timing window run several times (--repeat), windows sized by time (--window-seconds), the
duration estimate, and iterations of a queueing engine waited for one by one."""

import json

import pytest

from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers.loop import LoopCallbacks, LoopState, run_timing_window
from tbd.profilers.stages import run_stages, window_plan


def test_windows_are_cut_to_the_seconds_asked_at_the_warmup_iteration_time():
    state = LoopState(times_ns=[9_000_000_000, 3_000_000_000, 2_000_000_000, 2_000_000_000, 2_200_000_000], warmup=2)
    spec = RunSpec(model="m", iterations=20, trace_iterations=3, repeat=3, window_seconds=10.0)
    plan = window_plan(spec, state, gemm_s=4.0)
    assert plan.iteration_s == 2.0  # median of the stable part, [2.0, 2.0, 2.2]
    assert plan.timing_iterations == 5  # 10 s // 2 s
    assert plan.trace_iterations == 3  # 10 s // (2 s x 1.6) = 3: not cut
    # 3 x 5 x 2 s, + (3 traced + 1 lead-in) x 2 s x 1.6, + the GEMM ceiling again and the bandwidth (2 x 4 s)
    assert plan.expected_s == pytest.approx(30 + 12.8 + 8)
    assert plan.notes == ["timing window sized by time: 5 iterations per repeat (~10 s at 2 s each) instead of 20; "
                          "--window-seconds or --iterations change it"]


def test_a_slow_model_still_runs_one_iteration_per_window_and_no_cut_without_window_seconds():
    state = LoopState(times_ns=[40_000_000_000] * 3, warmup=0)
    plan = window_plan(RunSpec(model="m", iterations=20, trace_iterations=3, window_seconds=10.0), state, 1.0)
    assert (plan.timing_iterations, plan.trace_iterations) == (1, 1)
    plan = window_plan(RunSpec(model="m", iterations=20, trace_iterations=3), state, 1.0)
    assert (plan.timing_iterations, plan.trace_iterations, plan.notes) == (20, 3, [])


def _counting_clock(step_ns):
    now = [0]

    def clock():
        now[0] += step_ns
        return now[0]
    return clock


def test_repeats_each_get_a_record_and_the_log_window_spans_them(tmp_path):
    callbacks = LoopCallbacks(step=lambda: None, clock=_counting_clock(1_000_000))
    spec = RunSpec(model="m", warmup=2, iterations=4, trace_iterations=0, repeat=3)
    state = LoopState()
    run_stages(callbacks, Workload("m", lambda: None, 8, "samples/s"), spec, state, tmp_path, lambda e: None,
               parameters=None, nvml=None, trace_window=lambda n: None, gemm_ceiling=lambda: {"flops_per_s": 1e9})
    quality = json.loads((tmp_path / "raw/quality.json").read_text())
    assert [(r["first"], r["last"]) for r in quality["repeats"]] == [(2, 5), (6, 9), (10, 13)]
    assert quality["gemm_before"] == {"flops_per_s": 1e9}
    log = json.loads((tmp_path / "iterations.json").read_text())
    assert log["timing_window"] == [2, 13]
    assert log["timing_window_ns"] == sum(r["wall_ns"] for r in quality["repeats"])
    for r in quality["repeats"]:
        assert r["load"]["wall_s"] > 0 and len(r["cpu"]["busy_s"]) >= 1


def test_a_queueing_engine_is_waited_for_after_every_timing_iteration():
    syncs = []
    callbacks = LoopCallbacks(step=lambda: None, synchronize=lambda: syncs.append(1), clock=_counting_clock(10),
                      sync_each_iteration=True)
    run_timing_window(callbacks, 5, LoopState(), 10**18)
    assert len(syncs) == 5 + 2  # each iteration, and both ends of the window
    syncs.clear()
    callbacks.sync_each_iteration = False
    run_timing_window(callbacks, 5, LoopState(), 10**18)
    assert len(syncs) == 2
