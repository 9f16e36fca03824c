"""Progress without a terminal: one line per stage with the time since the start, the plan with the
expected duration; the run directory's device; the child's stage lines in workload.log."""

import io
import os
import subprocess
import sys
import time

from rich.console import Console

from tbd.cli import frameworks
from tbd.cli.runner import _log_stage
from tbd.core import rundir
from tbd.core.records import RunSpec
from tbd.reports.numbers import fmt_elapsed
from tbd.reports.progress import StageProgress


def _lines(timed_events, end):
    """Feed (time, event) pairs to a piped StageProgress whose clock reads those times."""
    out, now = io.StringIO(), [0.0]
    with StageProgress(Console(file=out, force_terminal=False, width=200), clock=lambda: now[0]) as progress:
        now[0] = 0.2
        progress.say("profiling m")
        for t, e in timed_events:
            now[0] = t
            progress(e)
        now[0] = end
    return out.getvalue().splitlines()


def test_piped_progress_is_one_line_per_stage_with_elapsed_time():
    lines = _lines([
        (0.3, {"stage": "build", "done": 0, "total": 1}), (4.0, {"stage": "build", "done": 1, "total": 1}),
        (4.0, {"stage": "plan", "budget_s": 600.0, "warmup_max_iterations": 200, "window_s": 10.0, "repeat": 3}),
        (4.0, {"stage": "warmup", "done": 1, "total": None}), (29.0, {"stage": "warmup", "done": 14, "total": None}),
        (30.0, {"stage": "gemm_before", "done": 0, "total": 1}), (33.0, {"stage": "gemm_before", "done": 1, "total": 1}),
        (33.0, {"stage": "plan", "expected_s": 95.0, "timing_iterations": 5, "trace_iterations": 3, "repeat": 3,
                "iteration_s": 2.0}),
        (33.0, {"stage": "timing", "done": 1, "total": 15, "repeat": 1, "repeats": 3}),
        (129.0, {"stage": "timing", "done": 15, "total": 15, "repeat": 3, "repeats": 3})], end=130.0)
    assert lines[0] == "tbd: [   0.2 s] profiling m"
    assert lines[1] == "tbd: [   4.0 s] building the workload (3.7 s)"
    assert lines[2].startswith("tbd: [   4.0 s] plan: warm-up until stable (at most 200 iterations), then 3 timing")
    assert lines[3] == "tbd: [    30 s] warming up (until stable): 14 iterations (26 s)"
    assert lines[4] == "tbd: [    33 s] measuring the GEMM ceiling (before the windows) (3.0 s)"
    assert lines[5] == ("tbd: [    33 s] plan: 3 x 5 timing iterations and 3 traced, at 2 s per iteration: about "
                        "1 min 35 s more")
    assert lines[6] == "tbd: [2 min 10 s] timing windows: 3 windows, 15 of 15 iterations (1 min 37 s)"
    assert len(lines) == 7


def test_durations_read_as_people_write_them():
    assert [fmt_elapsed(s) for s in (0.25, 9.96, 12.4, 61, 3599)] == ["0.2 s", "10.0 s", "12 s", "1 min 01 s",
                                                                      "59 min 59 s"]


def test_the_first_line_comes_within_a_second(tmp_path):
    """`tbd profile` says what it runs before the child imports its framework."""
    tbd = os.path.join(os.path.dirname(sys.executable), "tbd")
    start = time.monotonic()
    proc = subprocess.Popen([tbd, "profile", "resnet50", "--size", "test", "--out", str(tmp_path / "r")],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        first = proc.stderr.readline()
        took = time.monotonic() - start
    finally:
        proc.kill()
        proc.wait()
    assert first.startswith("tbd: [") and "profiling resnet50 (test size) in pytorch on cpu, batch 4" in first
    assert took < 1.0 + 1.0  # a second, plus the interpreter's start on a loaded machine


def test_auto_is_the_cpu_without_a_gpu_driver_and_a_run_dir_is_renamed_after_the_device(tmp_path):
    assert frameworks.planned_device("auto", nodes=(str(tmp_path / "nvidia0"),)) == "cpu"
    (tmp_path / "nvidia0").touch()
    assert frameworks.planned_device("auto", nodes=(str(tmp_path / "nvidia0"),)) == "auto"
    assert frameworks.planned_device("cuda:1") == "cuda:1"
    run = rundir.new_run_dir(RunSpec(model="m", batch=4), tmp_path, device="auto")
    assert "-auto-b4-" in run.name
    rundir.atomic_write_json(run / rundir.SPEC, {"device": "cuda:0"})
    renamed = rundir.named_after_device(run)
    assert renamed.name == run.name.replace("-auto-", "-cuda0-") and (renamed / rundir.SPEC).is_file()
    assert not run.exists() and rundir.named_after_device(renamed) == renamed


def test_the_child_logs_each_stage_in_workload_log(capsys):
    for e in ({"stage": "build", "done": 0, "total": 1}, {"stage": "build", "done": 1, "total": 1},
              {"stage": "plan", "expected_s": 5.0}, {"stage": "warmup", "done": 7, "total": None},
              {"stage": "done"}):
        _log_stage(e)
    words = [line.split(" ", 2)[2] for line in capsys.readouterr().err.splitlines()]
    assert words == ["build started", 'plan: {"expected_s": 5.0}', "build ended: 1 of 1 done", "warmup started",
                     "warmup ended: 7 of - done", "done started"]


def test_piped_progress_says_something_at_least_every_five_seconds():
    """Issue 28: a piped run was silent for 24 s of warm-up (one line per stage, at its end)."""
    out, now = io.StringIO(), [0.0]
    with StageProgress(Console(file=out, force_terminal=False, width=200), clock=lambda: now[0],
                       heartbeat_s=5.0) as progress:
        for t in (1.0, 4.9):  # the child is still importing its framework: nothing yet
            now[0] = t
            progress.tick()
        now[0] = 5.0
        progress.tick()
        now[0] = 6.0
        progress({"stage": "warmup", "done": 1, "total": None, "last_s": 1.5})
        for t in range(7, 31):  # 24 s of warm-up, an event each 1.5 s; the thread would tick each second
            now[0] = float(t)
            if t % 3 == 0:
                progress({"stage": "warmup", "done": (t - 6) // 3 * 2 + 1, "total": None, "last_s": 1.5})
            progress.tick()
        now[0] = 31.0
        progress({"stage": "gemm_before", "done": 0, "total": 1})
    lines = out.getvalue().splitlines()
    assert lines[0] == "tbd: [   5.0 s] waiting for the workload process (5.0 s so far)"
    # Warm-up began at 6 s: lines at 10, 15, 20, 25 and 30 s (5 s after the one before), each with the count.
    assert lines[1] == "tbd: [    10 s] warming up (until stable): 3 iterations, last 1.50 s, 4.0 s so far"
    assert [line[6:14].strip() for line in lines[1:6]] == ["10 s", "15 s", "20 s", "25 s", "30 s"]
    assert lines[5] == "tbd: [    30 s] warming up (until stable): 17 iterations, last 1.50 s, 24 s so far"
    assert lines[6] == "tbd: [    31 s] warming up (until stable): 17 iterations (25 s)"
    assert len(lines) == 8  # and the GEMM stage's line at the end: never 5 s without a line


def test_a_plan_without_a_time_cut_names_the_iterations():
    out = io.StringIO()
    with StageProgress(Console(file=out, force_terminal=False, width=300), clock=lambda: 0.0,
                       heartbeat_s=None) as progress:
        progress({"stage": "plan", "budget_s": 600.0, "warmup_max_iterations": 200, "window_s": None, "repeat": 3,
                  "iterations": 5})
    assert "then 3 timing windows of 5 iterations each and a trace window" in out.getvalue()
