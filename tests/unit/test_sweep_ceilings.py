"""A sweep's later points measure less: the GEMM ceiling before the windows only, and the copy bandwidth
not at all: they take the first point's (profilers/ceilings.py, REUSED), which says where it came from."""

import json

from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers.ceilings import REUSED, reusable_ceilings
from tbd.profilers.loop import LoopCallbacks, LoopState
from tbd.profilers.stages import run_stages

PROVENANCE = "measured once for the sweep at batch 8 (b8/raw/bandwidth.json)"
BANDWIDTH = {"bytes_per_s": 1.2e10, "nbytes": 134217728, "repeats": 5}


def _run(run_dir, gemm, bandwidth, events=None):
    clock = iter(range(0, 10**12, 1_000_000))
    callbacks = LoopCallbacks(step=lambda: None, synchronize=lambda: None, clock=lambda: next(clock))
    spec = RunSpec(model="tiny", warmup=1, iterations=2, trace_iterations=0)
    state = LoopState()
    run_stages(callbacks, Workload("tiny", lambda: None, 2, "samples/s"), spec, state, run_dir,
               (events if events is not None else []).append, parameters=None, nvml=None,
               trace_window=lambda n: None, gemm_ceiling=gemm, memory_bandwidth=bandwidth)
    return state


def _never():
    raise AssertionError("a lent bandwidth is not measured again")


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _counted(calls, value):
    def measure():
        calls.append(1)
        return value
    return measure


def test_the_first_point_lends_its_bandwidth_and_says_where_from(tmp_path):
    first = tmp_path / "b8"
    _write(first / "raw/bandwidth.json", BANDWIDTH)
    assert reusable_ceilings(first, 8) == {"bandwidth": BANDWIDTH, "provenance": PROVENANCE, "batch": 8}
    # One saying why it is missing (its buffers did not fit under --memory-limit-gib) is not lent: the later
    # point tries its own; nor is a file that does not read as JSON, nor none at all.
    _write(first / "raw/bandwidth.json", {"error": "no memory for two 128 MiB buffers under the run's memory limit"})
    assert reusable_ceilings(first, 8)["bandwidth"] is None
    (first / "raw/bandwidth.json").write_text("{not json")
    assert reusable_ceilings(first, 8)["bandwidth"] is None
    assert reusable_ceilings(tmp_path / "b16", 16) == {
        "bandwidth": None, "provenance": "measured once for the sweep at batch 16 (b16/raw/bandwidth.json)",
        "batch": 16}


def test_a_later_point_measures_the_gemm_ceiling_before_the_windows_only(tmp_path):
    _write(tmp_path / REUSED, {"bandwidth": BANDWIDTH, "provenance": PROVENANCE, "batch": 8})
    events: list[dict] = []
    gemm_calls: list[int] = []
    state = _run(tmp_path, _counted(gemm_calls, {"flops_per_s": 9.5e10}), _never, events)
    assert gemm_calls == [1]  # before the windows: it leaves the allocator as `tbd profile` runs them
    quality = json.loads((tmp_path / "raw/quality.json").read_text())
    assert quality["gemm_before"] == {"flops_per_s": 9.5e10}
    assert not (tmp_path / "raw/gemm.json").exists()  # none after the windows
    assert json.loads((tmp_path / "raw/bandwidth.json").read_text()) == {**BANDWIDTH, "provenance": PROVENANCE}
    assert state.notes == [f"GEMM ceiling measured before the windows only, and the copy bandwidth {PROVENANCE}, "
                           "reused: a sweep measures them after the windows at its first point only (they depend "
                           "on the device and dtype, not the batch)"]
    assert json.loads((tmp_path / "iterations.json").read_text())["notes"] == state.notes
    assert [e["stage"] for e in events if e["stage"].startswith("gemm")] == ["gemm_before", "gemm_before"]
    plan = next(e for e in events if e["stage"] == "plan" and "expected_s" in e)
    assert plan["expected_s"] is not None


def test_without_a_lent_bandwidth_the_point_measures_its_own(tmp_path):
    _write(tmp_path / REUSED, {"bandwidth": None, "provenance": PROVENANCE, "batch": 8})
    gemm_calls: list[int] = []
    state = _run(tmp_path, _counted(gemm_calls, {"flops_per_s": 5.0e12}), lambda: {"bytes_per_s": 3.0e10})
    assert gemm_calls == [1]
    assert json.loads((tmp_path / "raw/bandwidth.json").read_text()) == {"bytes_per_s": 3.0e10}
    assert state.notes == ["GEMM ceiling measured before the windows only: a sweep measures it after the windows at "
                           "its first point only (batch 8)"]


def test_a_first_point_measures_everything(tmp_path):
    gemm_calls: list[int] = []
    state = _run(tmp_path, _counted(gemm_calls, {"flops_per_s": 1.0e11}), lambda: BANDWIDTH)
    assert gemm_calls == [1, 1]  # before and after the windows
    assert json.loads((tmp_path / "raw/gemm.json").read_text()) == {"flops_per_s": 1.0e11}
    assert json.loads((tmp_path / "raw/bandwidth.json").read_text()) == BANDWIDTH
    assert state.notes == []
