"""An allocation failure while measuring the GEMM ceiling or the copy bandwidth, after the workload's
windows: the run completes without that figure and says why (under --memory-limit-gib the batch
fitted; the measurement's own buffers did not)."""

import json

import pytest

from tbd.core.records import RunSpec
from tbd.models.base import Workload
from tbd.profilers.loop import LoopCallbacks, LoopState
from tbd.profilers.stages import run_stages


def _run(tmp_path, gemm, bandwidth):
    clock = iter(range(0, 10**12, 1_000_000))
    callbacks = LoopCallbacks(step=lambda: None, synchronize=lambda: None, clock=lambda: next(clock))
    spec = RunSpec(model="tiny", warmup=1, iterations=2, trace_iterations=0)
    state = LoopState()
    run_stages(callbacks, Workload("tiny", lambda: None, 2, "samples/s"), spec, state, tmp_path, lambda event: None, parameters=None, nvml=None,
               trace_window=lambda n: None, gemm_ceiling=gemm, memory_bandwidth=bandwidth,
               out_of_memory=lambda exc: "can't allocate memory" in str(exc))
    return state


def _fail(message):
    def measure():
        raise RuntimeError(message)
    return measure


def test_an_out_of_memory_measurement_is_left_out_with_a_note(tmp_path):
    state = _run(tmp_path, _fail("DefaultCPUAllocator: can't allocate memory: you tried to allocate 16777216 bytes"),
                 lambda: {"bytes_per_s": 1e10})
    assert not (tmp_path / "raw/gemm.json").exists()
    assert json.loads((tmp_path / "raw/bandwidth.json").read_text()) == {"bytes_per_s": 1e10}
    notes = json.loads((tmp_path / "iterations.json").read_text())["notes"]
    # measured on both sides of the windows: both failed, each says so
    assert notes == state.notes and len(notes) == 2
    assert notes[0].startswith("GEMM ceiling before the windows not measured: out of memory")
    assert notes[1].startswith("GEMM ceiling not measured: out of memory")
    quality = json.loads((tmp_path / "raw/quality.json").read_text())
    assert quality["gemm_before"] is None and len(quality["repeats"]) == 1


def test_any_other_failure_still_fails_the_run(tmp_path):
    with pytest.raises(RuntimeError, match="cuBLAS broke"):
        _run(tmp_path, _fail("cuBLAS broke"), lambda: None)
