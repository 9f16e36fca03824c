"""Issue 28: `--iterations 5` gives 5 timing iterations per window (it silently became 4 piped and 3 in a
terminal, sized by the warm-up's time), and the progress bar's count and time are the window's as
iterations.json records it (a bar said "3/3 done 0:00:02" for a 5.05 s window)."""

import argparse
import io
import json

import pytest
from rich.console import Console

from tbd.cli.commands import profile
from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers.loop import LoopCallbacks, LoopState
from tbd.profilers.stages import run_stages
from tbd.reports.progress import StageProgress


def _args(*argv):
    p = argparse.ArgumentParser()
    profile.add_arguments(p)
    return p.parse_args(["resnet50", *argv])


def test_a_given_iterations_is_not_cut_by_the_default_window_seconds():
    assert profile.window_options(_args()) == (20, 10.0)  # the defaults: 20 at most, cut to ~10 s
    assert profile.window_options(_args("--iterations", "5")) == (5, None)  # given: run as given
    assert profile.window_options(_args("--iterations", "5", "--window-seconds", "4")) == (5, 4.0)
    assert profile.window_options(_args("--window-seconds", "0")) == (20, None)  # 0: no cut
    assert profile.window_options(_args("--window-seconds", "3")) == (20, 3.0)


class _SlowThenFast:
    """A workload whose warm-up iterations take 3.3 s and later ones 1.7 s (the issue's run), on a fake clock."""

    def __init__(self, warmup):
        self.now, self.steps, self.warmup = 0, 0, warmup

    def clock(self):
        return self.now

    def step(self):
        self.now += 3_300_000_000 if self.steps < self.warmup else 1_700_000_000
        self.steps += 1


def _run(tmp_path, spec):
    fake = _SlowThenFast(spec.warmup)
    events = []
    run_stages(LoopCallbacks(step=fake.step, clock=fake.clock), Workload("m", lambda: None, 8, "samples/s"), spec,
               LoopState(), tmp_path, events.append, parameters=None, nvml=None, trace_window=lambda n: None,
               gemm_ceiling=lambda: {"flops_per_s": 1e9})
    return events, json.loads((tmp_path / "iterations.json").read_text())


@pytest.mark.parametrize("repeat", (1, 3))
def test_iterations_5_gives_5_timing_iterations_per_window(tmp_path, repeat):
    iterations, window_s = profile.window_options(_args("--iterations", "5"))
    spec = RunSpec(model="m", warmup=2, iterations=iterations, trace_iterations=0, repeat=repeat,
                   window_seconds=window_s)
    events, log = _run(tmp_path, spec)
    first, last = log["timing_window"]
    assert last - first + 1 == 5 * repeat and log["notes"] == []
    assert log["timing_window_ns"] == 5 * repeat * 1_700_000_000  # each window: 5 x 1.7 s, ends synchronised
    timing = [e for e in events if e["stage"] == "timing"]
    assert timing[0]["done"] == 0 and timing[-1]["done"] == timing[-1]["total"] == 5 * repeat
    assert sum(e["window_s"] for e in timing if "window_s" in e) == pytest.approx(5 * repeat * 1.7)


def test_a_window_sized_by_time_says_why_in_the_plan(tmp_path):
    # The old default path: 10 s at the warm-up's 3.3 s per iteration gives 3, not 20 (or the 5 asked).
    spec = RunSpec(model="m", warmup=2, iterations=20, trace_iterations=0, repeat=1, window_seconds=10.0)
    events, log = _run(tmp_path, spec)
    assert log["timing_window"][1] - log["timing_window"][0] + 1 == 3  # 10 s // 3.3 s
    plan = [e for e in events if e["stage"] == "plan" and "expected_s" in e][0]
    assert plan["timing_iterations"] == 3 and plan["notes"] == log["notes"]
    out = io.StringIO()
    with StageProgress(Console(file=out, force_terminal=False, width=300), heartbeat_s=None) as progress:
        progress(plan)
    assert "plan: 3 timing iterations" in out.getvalue()
    assert "sized by time: 3 iterations per repeat (~10 s at 3.3 s each) instead of 20" in out.getvalue()


def test_the_bar_counts_and_times_the_window_iterations_json_records(tmp_path):
    spec = RunSpec(model="m", warmup=2, iterations=3, trace_iterations=0, repeat=1, window_seconds=None)
    events, log = _run(tmp_path, spec)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    with StageProgress(console, heartbeat_s=None) as progress:
        for e in events:
            progress(e)
    bar = next(line for line in out.getvalue().splitlines()[::-1] if "timing windows" in line)
    # 3 iterations of 1.7 s: the bar shows 3/3 and the window's measured 5.10 s, not the time between events.
    assert log["timing_window_ns"] == 3 * 1_700_000_000
    assert "3/3" in bar and "5.10 s" in bar, bar
