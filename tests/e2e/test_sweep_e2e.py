"""`tbd sweep` end to end on the CPU: real `tbd profile` children on a test-size ResNet-50.

The max search runs under an address-space cap (--memory-limit-gib, RLIMIT_AS in the child), so
"out of memory" is real: the allocator fails. Its answer is checked by a second means, `tbd profile`
run alone. Not at the exact boundary: under RLIMIT_AS the address space a run needs varies from run
to run by a few MiB (thread stacks, malloc arenas and heap growth, the GEMM stage's buffers after
training), while one more sample of this model needs ~0.14 MiB, so the same batch near the boundary
fits in one run and not in the next (measured: at 0.85 GiB, batch 220 OOMed inside a sweep and ran
twice alone; batch 241 ran in a sweep and OOMed twice in three runs alone). A batch a quarter below
the largest that fit must run, and a batch a quarter above the smallest that failed must run out of
memory: both far outside that band. Measured on 2 cores: the max sweep ~60 s (11 points), the two
runs alone ~15 s, the list sweep ~12 s.
"""

from __future__ import annotations

import csv
import json
import signal
import statistics
import subprocess
import sys
import time

import pytest
from testpaths import ROOT

from tbd.cli.main import main
from tbd.cli.sweep_run import load_sweep

WINDOWS = ["--warmup", "1", "--iterations", "2", "--repeat", "1", "--trace-iterations", "1", "--threads", "1"]
TINY = ["resnet50", "--size", "test", "--device", "cpu", *WINDOWS]
CAP_GIB = "0.85"  # the start fits with room; the boundary lay near 500 on a 2-core VM (2026-11-27)
MAX_BATCH = 1024

try:
    import tbd.reports.figures.saving  # noqa: F401 - figures only where matplotlib imports
    FIGURES = True
except ImportError:
    FIGURES = False


@pytest.fixture(scope="module")
def max_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "max"
    started = time.monotonic()
    code = main(["sweep", *TINY, "--batch", "max", "--memory-limit-gib", CAP_GIB, "--max-batch", str(MAX_BATCH),
                 "--quiet", "--out", str(out)])
    return out, code, time.monotonic() - started


def test_max_sweep_pins_the_largest_batch_that_fits(max_sweep):
    out, code, seconds = max_sweep
    assert code == 0
    sweep = load_sweep(out)
    assert sweep.mode == "max" and sweep.memory_limit_bytes == int(float(CAP_GIB) * 2**30)
    largest, smallest = sweep.largest_fitting_batch, sweep.smallest_failing_batch
    assert largest is not None and smallest == largest + 1, sweep.notes  # bisected to adjacent batches
    assert sweep.points[0].batch == 4  # the model's CPU batch starts the search
    for p in sweep.points:  # monotone: every batch up to the largest ran, every one above ran out of memory
        assert p.status == ("ok" if p.batch <= largest else "oom"), (p.batch, p.status, p.reason)
    assert len(sweep.points) <= 2 * MAX_BATCH.bit_length() + 2  # O(log N) points
    # The boundary's two points, as their own run directories recorded them.
    top = json.loads((out / f"b{largest}" / "profile.json").read_text())
    assert top["status"] == "complete" and top["spec"]["batch"] == largest
    assert top["spec"]["memory_limit_bytes"] == sweep.memory_limit_bytes
    failing = next(p for p in sweep.points if p.batch == smallest)
    assert failing.reason.startswith(f"batch {smallest} ran out of memory on cpu")
    if failing.run_dir:  # something was gathered before the allocation failed: the child said why
        status = json.loads((out / failing.run_dir / "raw" / "status.json").read_text())
        assert status["state"] == "oom"
    print(f"max sweep: {len(sweep.points)} points, largest {largest}, {seconds:.0f} s")


def test_later_points_measure_the_gemm_ceiling_before_the_windows_only(max_sweep):
    out = max_sweep[0]
    first, *later = [p for p in load_sweep(out).points if p.status == "ok"]
    # The first point measures its own ceilings; under the cap its GEMM's 16 MiB buffers may not fit (seen in
    # CI), which it says. It lends no GEMM ceiling either way: each later point measures its own before the windows.
    first_notes = " ".join(json.loads((out / first.run_dir / "profile.json").read_text())["notes"])
    assert later and "GEMM ceiling measured before the windows only" not in first_notes
    for p in later:
        raw = out / p.run_dir / "raw"
        assert not (raw / "gemm.json").exists()  # the one after the windows: the first point's alone
        before = json.loads((raw / "quality.json").read_text())["gemm_before"]
        profile = json.loads((out / p.run_dir / "profile.json").read_text())
        assert profile["metrics"]["flop_util_pct"]["measured_ceiling_flops"] == (before or {}).get("flops_per_s")
        assert any(n.startswith("GEMM ceiling measured before the windows only") for n in profile["notes"])
        # One traced iteration (WINDOWS; the sweep's default) gives the point its memory figures.
        assert p.memory_bytes["allocator_peak"] and p.memory_bytes["feature_maps"]


def test_the_answer_holds_when_batches_run_alone(max_sweep, tmp_path, capsys):
    sweep = load_sweep(max_sweep[0])
    below = sweep.largest_fitting_batch * 3 // 4
    above = sweep.smallest_failing_batch * 5 // 4
    assert main(["profile", *TINY, "--batch", str(below), "--memory-limit-gib", CAP_GIB, "--quiet",
                 "--out", str(tmp_path / "below")]) == 0
    capsys.readouterr()
    assert main(["profile", *TINY, "--batch", str(above), "--memory-limit-gib", CAP_GIB, "--quiet",
                 "--out", str(tmp_path / "above")]) == 3
    assert f"batch {above} ran out of memory on cpu" in capsys.readouterr().err


def test_max_sweep_writes_json_csv_and_figures(max_sweep):
    out = max_sweep[0]
    sweep = load_sweep(out / "sweep.json")
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [int(r["batch"]) for r in rows] == [p.batch for p in sweep.points]
    assert [r["status"] for r in rows] == [p.status for p in sweep.points]
    if FIGURES:
        assert list((out / "figures").glob("*.svg")) and list((out / "figures").glob("*.png"))
    assert not list(out.rglob("*.tmp"))


def test_list_sweep_points_are_their_profiles(tmp_path, capsys):
    out = tmp_path / "list"
    assert main(["sweep", *TINY, "--batch", "4,2", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"sweep directory: {out}" in text and "images/s" in text
    sweep = load_sweep(out)
    assert sweep.mode == "list" and [p.batch for p in sweep.points] == [2, 4]
    assert sweep.largest_fitting_batch == 4 and sweep.smallest_failing_batch is None
    assert sweep.device == "cpu" and sweep.size == "test"
    for point in sweep.points:
        profile = json.loads((out / f"b{point.batch}" / "profile.json").read_text())
        assert profile["spec"]["batch"] == point.batch and point.run_dir == f"b{point.batch}"
        assert point.status == "ok" and point.throughput == profile["metrics"]["throughput"]["value"]
        it = profile["iterations"]
        first, last = it["timing_window"]
        assert point.iteration_s == statistics.median(it["times_s"][first:last + 1])
        assert point.memory_bytes["allocator_peak"] == profile["metrics"]["memory_bytes"]["allocator_peak"]
        assert point.cpu_util_pct == profile["metrics"]["cpu_util_pct"]["value"]
    rows = {int(r["batch"]): r for r in csv.DictReader((out / "sweep.csv").open())}
    assert float(rows[2]["throughput"]) == sweep.points[0].throughput
    if FIGURES:
        assert list((out / "figures").glob("*.svg"))


def test_ctrl_c_keeps_the_points_so_far_and_exits_130(tmp_path):
    out = tmp_path / "interrupted"
    # A timing window far longer than the test: the signal lands inside batch 2's run.
    argv = ["sweep", "resnet50", "--size", "test", "--device", "cpu", "--threads", "1", "--warmup", "1",
            "--iterations", "100000", "--batch", "2,4", "--quiet", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "tbd.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT, start_new_session=True)
    deadline = time.time() + 180
    log = out / "b2" / "workload.log"
    # The child logs each stage it enters (iterations.json appears at warm-up's end already, and the
    # GEMM ceiling measured before the windows then takes 1-2 s on a 2-core machine).
    while not ((out / "b2" / "raw" / "workload.json").exists() and log.exists() and "timing started" in log.read_text()):
        assert time.time() < deadline and proc.poll() is None, "batch 2 never reached its timing window"
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr.decode()
    assert "Traceback" not in stderr.decode()
    sweep = load_sweep(out)
    assert [(p.batch, p.status) for p in sweep.points] == [(2, "partial")]
    # A shared machine's other load may also mark the point unreliable (a note of its own): not this test's subject.
    assert [n for n in sweep.notes if not n.startswith("unreliable measurement")] == [
        "interrupted at batch 2 (its partial profile is kept)"]
    assert sweep.points[0].throughput and sweep.points[0].throughput > 0  # the completed timing iterations
    assert not (out / "b4").exists()
    assert f"sweep directory: {out}" in stdout.decode()
