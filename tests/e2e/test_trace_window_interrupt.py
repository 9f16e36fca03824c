"""A stop signal inside the trace window keeps what the tracer gathered (issue 29).

Before, a Ctrl-C after the trace window had started gave a partial profile with no kernels ("no kernels
or ops were traced"): the tracer's export was dropped. Now the window ends after the iteration under
way, the trace of the complete iterations is saved, and the partial profile is built from it. SIGHUP
(a closed terminal or ssh session) is the same stop, on a terminal that no longer takes writes: the run
directory is complete all the same and the process exits 129 without a traceback.

The expectations are checked against the trace file itself (independent of tbd's reader): the number of
`ProfilerStep#N` spans in it equals the trace window iterations.json records, so no half or empty step
entered the trace.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from testpaths import ROOT

# Timing window short, trace window long on a tiny model: the signal lands inside the trace window. Batch 256
# makes each traced iteration slow enough (~0.3 s) that only a few are traced: the trace stays small (~0.2 MB each).
PROFILE = ["profile", "resnet50", "--size", "test", "--batch", "256", "--device", "cpu", "--threads", "1",
           "--warmup", "1", "--repeat", "1", "--iterations", "2", "--window-seconds", "0",
           "--trace-iterations", "400", "--max-seconds", "600", "--quiet"]


def _wait_for_trace_steps(out, proc, timeout=120):
    """Until the child has entered its trace window and run a few traced iterations (its stage log)."""
    deadline = time.time() + timeout
    log = out / "workload.log"
    while time.time() < deadline:
        assert proc.poll() is None, "the run ended before its trace window"
        if log.exists() and "trace started" in log.read_text(errors="replace"):
            time.sleep(3.0)  # the lead-in step and a few traced iterations (~0.3 s each here; slack for a loaded CI)
            return
        time.sleep(0.2)
    raise AssertionError("the run never reached its trace window")


def _steps_in_trace(path) -> int:
    """ProfilerStep#N spans in the trace, counted from its JSON directly."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return sum(1 for e in events if e.get("ph") == "X" and re.fullmatch(r"ProfilerStep#\d+", str(e.get("name"))))


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_stop_in_the_trace_window_keeps_the_trace_of_the_iterations_done(tmp_path, sig, code):
    out = tmp_path / "run"
    if sig == signal.SIGHUP:
        # The terminal hangs up: stdout and stderr are a pty whose other end is closed, so every write fails (EIO).
        master, slave = os.openpty()
        stdout = stderr = slave
    else:
        master = None
        stdout = stderr = subprocess.PIPE
    proc = subprocess.Popen([sys.executable, "-m", "tbd.cli", *PROFILE, "--out", str(out)],
                            stdout=stdout, stderr=stderr, cwd=ROOT, start_new_session=True)
    try:
        _wait_for_trace_steps(out, proc)
        if master is not None:
            os.close(slave)
            os.close(master)
        proc.send_signal(sig)  # the parent only, as a terminal's Ctrl-C or hang-up reaches it
        proc.wait(timeout=120)
        err = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Traceback" not in (out / "workload.log").read_text(errors="replace")
    data = json.loads((out / "profile.json").read_text())
    assert data["status"] == "partial"
    assert any("trace window cut to" in n and "by an interrupt" in n for n in data["notes"]), data["notes"]
    first, last = data["iterations"]["trace_window"]
    traced = last - first + 1
    assert 1 <= traced < 400
    assert _steps_in_trace(out / "trace.pt.trace.json.gz") == traced  # complete steps only: none half, none empty
    assert len(data["kernels"]) > 0  # the ops the tracer gathered (CPU: one row per op)
    assert data["iterations"]["timing_window"] is not None and data["metrics"]["throughput"]["value"] > 0
