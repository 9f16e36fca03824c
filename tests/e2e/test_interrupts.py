"""Signals to `tbd profile` and what they keep: the parent forwards them to the child, writes a
partial profile.json with the throughput of the timing iterations completed, prints the report,
and exits 130 (SIGINT) or 143 (SIGTERM); a parent killed outright leaves raw records that
`tbd report` still analyses. Never the out-of-memory path, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from testpaths import ROOT

from tbd.cli.main import main

# A long timing window on a tiny model: the signal always lands inside it.
PROFILE = ["profile", "resnet50", "--size", "test", "--batch", "2", "--device", "cpu", "--threads", "1",
           "--warmup", "1", "--repeat", "1", "--window-seconds", "0", "--iterations", "100000", "--max-seconds", "600",
           "--quiet"]


def _start(out, *extra):
    return subprocess.Popen([sys.executable, "-m", "tbd.cli", *PROFILE, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)


def _wait_for_timing(out, iterations=5, timeout=180):
    """Until the child has timed `iterations` iterations of the timing window (its progress file)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        # The child logs each stage it enters: iterations.json appears at warm-up's end already, and
        # the GEMM ceiling measured before the windows then takes 1-2 s on a 2-core machine.
        log = out / "workload.log"
        if (out / "raw" / "workload.json").exists() and log.exists() and "timing started" in log.read_text():
            time.sleep(1.0)  # the timing window runs; iterations take ~10 ms each
            return
        time.sleep(0.2)
    raise AssertionError("the run never reached its timing window")


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_parent_alone_keeps_a_partial_profile_with_throughput(tmp_path, sig, code):
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_timing(out)
    proc.send_signal(sig)  # the parent only, as `kill -INT PID` or a supervisor does
    stdout, stderr = proc.communicate(timeout=120)
    stderr = stderr.decode()
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "out of memory" not in stderr
    data = json.loads((out / "profile.json").read_text())
    assert data["status"] == "partial" and any("interrupted" in n for n in data["notes"])
    first, last = data["iterations"]["timing_window"]
    assert last >= first  # the completed timing iterations form the window
    tp = data["metrics"]["throughput"]
    assert tp["value"] and tp["value"] > 0
    assert any("cut to" in n and "by an interrupt" in n for n in data["notes"])
    assert "Throughput" in stdout.decode()  # the report is printed before exiting


def test_a_killed_parent_leaves_raw_records_that_report_analyses(tmp_path, capsys):
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_timing(out)
    proc.kill()  # SIGKILL: the parent writes nothing more
    proc.wait(timeout=30)
    deadline = time.time() + 60  # the child notices its closed pipe, saves and exits
    while time.time() < deadline:
        status = json.loads((out / "raw" / "status.json").read_text()) if (out / "raw" / "status.json").exists() \
            else {}
        if status.get("state") == "interrupted":
            break
        time.sleep(0.2)
    assert status.get("state") == "interrupted" and "parent process exited" in status["message"]
    assert not (out / "profile.json").exists()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "partial" in text and "analysed from the raw records" in text


def test_two_runs_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    from tbd.core import rundir
    from tbd.core.records import RunSpec

    spec = RunSpec(model="resnet50", batch=2, device="cpu")
    a, b = rundir.new_run_dir(spec, tmp_path), rundir.new_run_dir(spec, tmp_path)
    assert a != b and a.is_dir() and b.is_dir() and b.name.startswith(a.name)


def test_an_existing_run_is_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / "run"
    args = [*PROFILE[:PROFILE.index("--iterations")], "--iterations", "2", "--trace-iterations", "0", "--quiet",
            "--out", str(out)]
    assert main(args) == 0  # a first run: the folder is tbd's, its files listed in its marker
    assert main(args) == 2 and "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert json.loads((out / "profile.json").read_text())["status"] == "complete"
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("not a tbd run")
    assert main([*args[:-1], str(other), "--force"]) == 2  # never empties a folder tbd did not write
    assert (other / "notes.txt").exists()


@pytest.mark.parametrize("extra, needle", [
    (["--max-seconds", "nan"], "argument --max-seconds"),
    (["--max-seconds", "0"], "argument --max-seconds"),
    (["--memory-limit-gib", "nan"], "argument --memory-limit-gib"),
    (["--memory-limit-gib", "-1"], "argument --memory-limit-gib"),
    (["--memory-limit-gib", "1e-12"], "argument --memory-limit-gib"),
    (["--memory-limit-gib", "1e12"], "argument --memory-limit-gib"),
    (["--threads", "0"], "argument --threads"),
    (["--top", "-1"], "argument --top"),
    (["--peak-flops", "inf"], "argument --peak-flops"),
])
def test_bad_numbers_are_refused_before_anything_runs(tmp_path, capsys, extra, needle):
    started = time.perf_counter()
    assert main([*PROFILE, "--out", str(tmp_path / "r"), *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and time.perf_counter() - started < 5
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["/dev/null", "FILE/sub"])
def test_an_output_path_that_cannot_be_a_folder_is_one_line(tmp_path, capsys, where):
    (tmp_path / "FILE").write_text("x")
    out = where if where.startswith("/") else str(tmp_path / where)
    code = main([*PROFILE, "--out", out])
    err = capsys.readouterr().err
    assert code in (1, 2) and err.startswith("tbd: error:") and err.count("\n") == 1, err


def test_std_bad_alloc_under_a_tight_memory_cap_is_out_of_memory(tmp_path, capsys):
    code = main([*PROFILE[:PROFILE.index("--iterations")], "--iterations", "1", "--trace-iterations", "0", "--quiet",
                 "--memory-limit-gib", "0.5", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 3 and "ran out of memory" in err and err.count("\n") == 1, err


def test_api_refuses_an_existing_run_and_keeps_a_partial_profile_when_the_step_raises(tmp_path):
    import tbd
    from tbd.core.errors import UsageError

    calls = []

    def step():
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("the user's step broke")

    out = tmp_path / "api"
    with pytest.raises(RuntimeError):
        tbd.profile_step(step, samples_per_step=4, device="cpu", warmup=2, iterations=5, out=out)
    data = json.loads((out / "profile.json").read_text())
    assert data["status"] == "partial" and any("the step raised RuntimeError" in n for n in data["notes"])
    with pytest.raises(UsageError, match="not empty"):
        tbd.profile_step(lambda: None, samples_per_step=4, device="cpu", warmup=1, iterations=1, out=out)
    for bad in ({"samples_per_step": 0}, {"samples_per_step": float("nan")}, {"samples_per_step": "32"},
                {"samples_per_step": 4, "iterations": 0}, {"samples_per_step": 4, "warmup": -3},
                {"samples_per_step": 4, "trace_iterations": -1}):
        with pytest.raises(UsageError):
            tbd.profile_step(lambda: None, device="cpu", out=tmp_path / "never", **bad)
    assert not (tmp_path / "never").exists()
    assert os.listdir(tmp_path) == ["api"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 160 KiB tmpfs: room for a run's small records, not for its trace. Needs root (skips without)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_full_disk_is_reported_as_such_with_what_was_kept(tiny_disk, capsys):
    out = tiny_disk / "run"
    code = main([*PROFILE[:PROFILE.index("--iterations")], "--iterations", "3", "--trace-iterations", "2",
                 "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1 and "no space left" in err, err
    assert "kept:" in err and "spec.json" in err
    assert (out / "spec.json").exists()


def test_a_step_that_runs_no_operator_gives_a_profile_with_null_kernel_figures(tmp_path):
    import tbd

    profile = tbd.profile_step(lambda: None, samples_per_step=4, device="cpu", warmup=2, iterations=5,
                               trace_iterations=2, out=tmp_path / "empty")
    assert profile.status == "complete" and profile.kernels == []
    assert profile.metrics.flop_util_pct.value is None and profile.metrics.flop_util_pct.reason
    assert profile.metrics.throughput.value > 0  # the timing window still timed the (empty) step
    assert any("recorded no operator" in note for note in profile.notes)


def test_ctrl_c_during_warm_up_keeps_a_partial_profile_that_says_where_it_stopped(tmp_path):
    import tbd

    calls = []

    def step():
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # as the terminal's Ctrl-C reaches an in-process run

    with pytest.raises(KeyboardInterrupt):
        tbd.profile_step(step, samples_per_step=4, device="cpu", warmup=5, iterations=5, out=tmp_path / "r")
    data = json.loads((tmp_path / "r" / "profile.json").read_text())
    assert data["status"] == "partial" and "partial: interrupted by the user during warmup" in data["notes"]
    assert data["metrics"]["throughput"] == {"value": None, "unit": "samples/s", "also": {},
                                             "reason": "no timing window was completed", "repeats": [],
                                             "spread_pct": None, "interval_pct": None}


def test_a_second_ctrl_c_soon_after_the_first_still_writes_the_profile(tmp_path):
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_timing(out)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.7)  # the child may be saving its records, or the parent already analysing them
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr.decode(), stderr.decode()
    data = json.loads((out / "profile.json").read_text())
    assert data["status"] == "partial" and data["metrics"]["throughput"]["value"] > 0
