"""How the warm-up is recorded and reported: iterations run vs where the stable phase was found,
a given --warmup reported as given and not checked, and older files still read."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from tbd.core.profile_result import Iterations, Profile
from tbd.core.records import IterationLog
from tbd.core.rundir import iteration_log_from_json, iteration_log_to_json
from tbd.reports.terminal import _iterations


def _its(**kw) -> Iterations:
    base = dict(warmup=14, warmup_s=0.14, warmup_detected=True, stable=True, timing_window=[30, 49],
                trace_window=[50, 52], times_s=[0.01] * 53, warmup_run=30)
    return Iterations(**{**base, **kw})


def _lines(it: Iterations) -> list[str]:
    return [t.plain for t in _iterations(SimpleNamespace(iterations=it))]


def test_detected_warmup_says_iterations_run_and_where_the_stable_phase_starts():
    # the progress bar counted 30; the stable phase starts at 14 (the detector decides 2 windows later)
    lines = _lines(_its())
    assert lines[0] == "warm-up: 30 iterations run in 0.30 s · stable from iteration 14 (detected)"
    assert len(lines) == 2


def test_given_warmup_is_reported_as_given_and_not_checked():
    lines = _lines(_its(warmup=5, warmup_run=5, warmup_detected=False, stable=None))
    assert lines[0] == "warm-up: 5 iterations run in 0.05 s (given by --warmup) · stable: not checked"
    assert not any("NOT STABLE" in line for line in lines)
    # a profile from before "not checked" said stable: true for a given warm-up: not a claim we repeat
    old = _lines(_its(warmup=5, warmup_run=None, warmup_s=0.05, warmup_detected=False, stable=True))
    assert old[0] == "warm-up: 5 iterations run in 0.05 s (given by --warmup) · stable: not checked"


def test_budget_out_is_loud():
    lines = _lines(_its(warmup=200, warmup_run=200, warmup_s=2.0, warmup_detected=False, stable=False,
                        times_s=[0.01] * 223))
    assert lines[0] == "warm-up: 200 iterations run in 2.00 s · stable: NO, no stable phase found"
    assert "NOT STABLE" in lines[1]


def test_profile_json_round_trip_and_an_older_profile_without_warmup_run():
    from tests.unit.test_reports import cpu_profile

    profile = replace(cpu_profile(), iterations=_its())
    again = Profile.from_dict(profile.to_dict())
    assert again.iterations == profile.iterations and again.iterations.warmup_run == 30
    data = profile.to_dict()
    del data["iterations"]["warmup_run"]
    data["iterations"]["stable"] = None
    old = Profile.from_dict(data).iterations
    assert old.warmup_run is None and old.stable is None


def test_iteration_log_json_keeps_not_checked_and_reads_older_logs():
    log = IterationLog(times_ns=np.full(10, 1000), warmup=3, warmup_detected=False, stable=None,
                       timing_window=(3, 7), trace_window=(8, 9), timing_window_ns=5000, warmup_run=3)
    data = iteration_log_to_json(log)
    back = iteration_log_from_json(data, "iterations.json")
    assert back.stable is None and back.warmup_run == 3  # None must not become False (NOT STABLE)
    del data["warmup_run"]
    data["stable"] = True
    older = iteration_log_from_json(data, "iterations.json")
    assert older.warmup_run is None and older.stable is True
