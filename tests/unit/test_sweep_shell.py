"""`tbd sweep`'s shell without child processes: `profile_run` is replaced by an oracle, so the order of
points, failures, interrupts, what is written and the exit codes are checked in milliseconds."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.analysis.sweep_plan import next_batch
from tbd.cli import sweep_executors
from tbd.cli.main import main
from tbd.cli.orchestrate import RunOutcome
from tbd.cli.run_analysis import load_profile
from tbd.cli.sweep_run import SweepPlan, load_sweep, new_sweep_dir, prepare_sweep_dir, run_sweep
from tbd.core.errors import InterruptedRun, OutOfMemoryError, ResultFormatError, UsageError, WorkloadError
from tbd.core.records import RunSpec

BASE = load_profile(FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1")
SPEC = RunSpec(model="resnet50", framework="pytorch", batch=None, device="cpu", size="test")


class Oracle:
    """A stand-in for orchestrate.profile_run: a batch fits below `fits_below`; `crash`/`stop` act at one batch."""

    def __init__(self, fits_below=10**9, crash=(), interrupt_at=None, interrupted_before=None, gemm_from=None):
        self.fits_below, self.crash = fits_below, set(crash)
        self.interrupt_at, self.interrupted_before = interrupt_at, interrupted_before
        self.gemm_from = gemm_from  # the first batch whose run writes raw/bandwidth.json (None: no batch does)
        self.calls: list[int] = []
        self.ceilings: dict[int, dict | None] = {}  # what each batch was handed to reuse

    def __call__(self, spec, run_dir, progress, probe_oom=True, force=False, ceilings=None):
        assert probe_oom is False, "a sweep bisects by itself: no halving probe per point"
        batch = spec.batch
        self.calls.append(batch)
        self.ceilings[batch] = ceilings
        if batch == self.interrupted_before:
            raise InterruptedRun("interrupted before any iteration completed; nothing was written")
        run_dir.mkdir(parents=True)
        if batch in self.crash:
            raise WorkloadError(f"workload exited with code 1, log at {run_dir / 'workload.log'}",
                                hint="RuntimeError during timing: Resource temporarily unavailable")
        if batch >= self.fits_below:
            os.rmdir(run_dir)  # as profile_run: nothing gathered, nothing left
            raise OutOfMemoryError(f"batch {batch} ran out of memory on cpu", hint="try a smaller --batch")
        metrics = replace(BASE.metrics, throughput=replace(BASE.metrics.throughput, value=10.0 * batch))
        partial = batch == self.interrupt_at
        profile = replace(BASE, metrics=metrics, status="partial" if partial else "complete",
                          notes=["partial: interrupted by Ctrl-C (SIGINT) during the run"] if partial else [])
        (run_dir / "profile.json").write_text(json.dumps(profile.to_dict()))
        if self.gemm_from is not None and batch >= self.gemm_from and ceilings is None:
            (run_dir / "raw").mkdir()
            (run_dir / "raw" / "bandwidth.json").write_text(json.dumps({"bytes_per_s": 2.0e10, "nbytes": 1 << 27}))
        return RunOutcome(profile, 130 if partial else 0)


@pytest.fixture
def oracle(monkeypatch):
    def install(**kwargs):
        fake = Oracle(**kwargs)
        monkeypatch.setattr(sweep_executors, "profile_run", fake)
        return fake
    return install


def sweep(out: Path, plan: SweepPlan, lines: list[str] | None = None):
    return run_sweep(SPEC, plan, out, announce=(lines if lines is not None else []).append,
                     progress=lambda: contextlib.nullcontext(lambda event: None))


#: How many points a max search from 1 to 4096 runs, for every batch it could find (fits below n): counted by
#: running the planner against each oracle, apart from analysis.sweep_plan.remaining_points.
PLAN_COUNTS = []
for _n in range(1, 4098):
    _outcomes: dict[int, bool] = {}
    while (_b := next_batch(_outcomes, 1, 4096)) is not None:
        _outcomes[_b] = _b < _n
    PLAN_COUNTS.append(len(_outcomes))


def test_max_search_bisects_to_adjacent_batches_and_writes_everything(tmp_path, oracle):
    fake = oracle(fits_below=11)
    lines: list[str] = []
    outcome = sweep(tmp_path, SweepPlan(None, start=1, cap=4096), lines)
    assert fake.calls == [1, 2, 4, 8, 16, 12, 10, 11]
    result = outcome.sweep
    assert outcome.exit_code == 0 and result.mode == "max"
    assert result.largest_fitting_batch == 10 and result.smallest_failing_batch == 11
    assert [p.batch for p in result.points] == [1, 2, 4, 8, 10, 11, 12, 16]
    assert result.device == "cpu" and result.device_name == BASE.environment["cpu"]["model"]
    oom = {p.batch: p for p in result.points}[16]
    assert oom.status == "oom" and oom.reason == "batch 16 ran out of memory on cpu" and oom.run_dir is None
    # The plan first (the doubling batches; the fewest and most points, as PLAN_COUNTS counts them), then per point
    # its line with its run time and what is left (a fits-below-11 search has run 1 point of its 8).
    assert lines[0] == ("plan: batch 1, 2, 4, ..., 4096, doubling until one does not fit, then bisecting to the "
                        f"largest that fits: {min(PLAN_COUNTS)} to {max(PLAN_COUNTS)} points")
    assert lines[1] == "batch 1: running"
    assert lines[2].startswith("batch 1: 10.0 images/s, 5.70 ms per iteration, peak memory 2.5 MiB (ran ")
    assert lines[3].startswith("next: batch 2; ") and " each at the last point's pace: up to ~" in lines[3]
    assert not any(line.startswith("next:") for line in lines[lines.index("batch 11: running"):])  # done: no next
    assert any(line.startswith("batch 16: out of memory (ran ") for line in lines)
    assert load_sweep(tmp_path) == result  # sweep.json is the final one, no "incomplete" note
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [int(r["batch"]) for r in rows] == [1, 2, 4, 8, 10, 11, 12, 16]
    assert [float(r["throughput"]) for r in rows if r["status"] == "ok"] == [10.0, 20.0, 40.0, 80.0, 100.0]
    assert outcome.figures_note is None
    stems = ("sweep_throughput", "sweep_utilization", "sweep_memory")
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == sorted(f"{s}.{x}" for s in stems
                                                                              for x in ("png", "svg"))


def test_list_runs_exactly_the_batches_in_order_past_a_failure(tmp_path, oracle):
    fake = oracle(fits_below=100, crash={4})
    outcome = sweep(tmp_path, SweepPlan((8, 4, 200, 2)))
    assert fake.calls == [8, 4, 200, 2]
    assert [(p.batch, p.status) for p in outcome.sweep.points] == [(2, "ok"), (4, "failed"), (8, "ok"), (200, "oom")]
    failed = outcome.sweep.points[1]
    assert failed.reason.startswith("workload exited with code 1") and "Resource temporarily" in failed.reason
    assert failed.run_dir == "b4"  # its log is kept
    assert outcome.exit_code == 0 and outcome.sweep.notes == []  # list mode: no search to qualify


def test_a_crash_in_the_max_search_counts_as_not_fitting_and_is_noted(tmp_path, oracle):
    fake = oracle(fits_below=1000, crash={64})
    outcome = sweep(tmp_path, SweepPlan(None, start=16, cap=4096))
    assert fake.calls == [16, 32, 64, 48, 56, 60, 62, 63]
    assert outcome.sweep.largest_fitting_batch == 63 and outcome.sweep.smallest_failing_batch is None
    assert any("batch 64, which failed without running out of memory" in n for n in outcome.sweep.notes)


def test_reaching_the_cap_is_noted(tmp_path, oracle):
    oracle()
    outcome = sweep(tmp_path, SweepPlan(None, start=8, cap=20))
    assert [p.batch for p in outcome.sweep.points] == [8, 16, 20]
    assert outcome.sweep.notes == ["reached --max-batch 20 without running out of memory: the largest batch that "
                                   "fits may be larger"]


def test_an_interrupted_point_stops_the_sweep_and_keeps_what_ran(tmp_path, oracle):
    fake = oracle(interrupt_at=4)
    outcome = sweep(tmp_path, SweepPlan((2, 4, 8)))
    assert fake.calls == [2, 4] and outcome.exit_code == 130
    saved = load_sweep(tmp_path / "sweep.json")
    assert [(p.batch, p.status) for p in saved.points] == [(2, "ok"), (4, "partial")]
    assert saved.notes == ["interrupted at batch 4 (its partial profile is kept)"]
    # The reason without its "partial: " (the table and the point's line say "partial" once).
    assert saved.points[1].reason == "interrupted by Ctrl-C (SIGINT) during the run"


def test_an_interrupt_before_a_point_measured_anything(tmp_path, oracle):
    oracle(interrupted_before=4)
    outcome = sweep(tmp_path, SweepPlan((2, 4, 8)))
    assert outcome.exit_code == 130 and [p.batch for p in outcome.sweep.points] == [2]
    assert outcome.sweep.notes == ["interrupted at batch 4, before it measured anything"]


def test_sweep_json_is_written_after_every_point(tmp_path, oracle, monkeypatch):
    fake = oracle()
    seen = []

    def spy(spec, run_dir, progress, probe_oom=True, force=False, ceilings=None):
        if (tmp_path / "sweep.json").exists():
            seen.append([p["batch"] for p in json.loads((tmp_path / "sweep.json").read_text())["points"]])
        return fake(spec, run_dir, progress, probe_oom, force, ceilings)

    monkeypatch.setattr(sweep_executors, "profile_run", spy)
    sweep(tmp_path, SweepPlan((2, 4, 8)))
    assert seen == [[2], [2, 4]]


def test_exit_code_when_no_point_ran(tmp_path, oracle):
    oracle(fits_below=1)
    assert sweep(tmp_path / "a", SweepPlan((2, 4))).exit_code == 3  # every point out of memory
    oracle(fits_below=1, crash={4})
    assert sweep(tmp_path / "b", SweepPlan((2, 4))).exit_code == 4


# --- directories and loading -------------------------------------------------------------------

def test_sweep_directory_is_new_or_a_replaced_sweep(tmp_path):
    out = tmp_path / "s"
    with prepare_sweep_dir(out, force=False):
        (out / "b2").mkdir()
        (out / "sweep.json").write_text("{}")
    with pytest.raises(UsageError, match="not empty"):
        prepare_sweep_dir(out, force=False)
    (out / "notes.txt").write_text("mine")  # not tbd's: --force refuses before removing anything
    with pytest.raises(UsageError, match="holds what tbd did not write there: notes.txt"):
        prepare_sweep_dir(out, force=True)
    assert sorted(p.name for p in out.iterdir()) == [".tbd-lock", ".tbd-run.json", "b2", "notes.txt", "sweep.json"]
    (out / "notes.txt").unlink()
    with prepare_sweep_dir(out, force=True):
        assert sorted(p.name for p in out.iterdir()) == [".tbd-lock", ".tbd-run.json"]
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        prepare_sweep_dir(tmp_path / "f", force=True)


def test_default_sweep_directories_are_unique(tmp_path):
    first, second = new_sweep_dir(SPEC, tmp_path), new_sweep_dir(SPEC, tmp_path)
    assert first.name.startswith("sweep-resnet50-pytorch-cpu-") and first != second and second.is_dir()


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"schema": "tbd.profile/2"}', "unknown sweep schema"),
    ('{"schema": "tbd.sweep/1", "model": "m"}', "missing"),
    ("[1, 2]", "not a JSON object"),
])
def test_a_corrupt_sweep_json_is_one_line_naming_the_file(tmp_path, content, message):
    (tmp_path / "sweep.json").write_text(content)
    with pytest.raises(ResultFormatError, match=message) as err:
        load_sweep(tmp_path)
    line = err.value.one_line()
    assert "\n" not in line and line.startswith(str(tmp_path / "sweep.json"))


def test_load_sweep_refuses_what_is_not_a_regular_file(tmp_path):
    with pytest.raises(ResultFormatError, match="no sweep.json here"):
        load_sweep(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ResultFormatError, match="not a regular file"):
        load_sweep(tmp_path / "fifo")


# --- the command -------------------------------------------------------------------------------

@pytest.mark.parametrize("batch", ["2,x", "0", "max,4", "2,,4", "2,2", "-4", ""])
def test_bad_batch_text_is_a_usage_error_before_any_run(tmp_path, capsys, oracle, batch):
    fake = oracle()
    code = main(["sweep", "resnet50", "--batch", batch, "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("tbd: error: --batch")
    assert "hint: give batch sizes like --batch 2,4,8" in err
    assert fake.calls == [] and not (tmp_path / "s").exists()


@pytest.mark.parametrize("argv, message", [
    (["nosuch", "--batch", "2"], "unknown model 'nosuch'"),
    (["resnet50", "--framework", "jax", "--batch", "2"], "unknown framework 'jax'"),
    (["faster_rcnn", "--batch", "max"], "there is no batch to sweep"),
    (["resnet50", "--batch", "2,4", "--max-batch", "8"], "--max-batch applies to --batch max only"),
    (["resnet50", "--batch", "max", "--batch-start", "64", "--max-batch", "8"], "above --max-batch 8"),
])
def test_other_usage_errors(tmp_path, capsys, oracle, argv, message):
    fake = oracle()
    assert main(["sweep", *argv, "--out", str(tmp_path / "s")]) == 2
    assert message in capsys.readouterr().err and fake.calls == []


def test_the_command_prints_the_table_and_the_directory(tmp_path, capsys, oracle):
    fake = oracle(fits_below=40)
    out = tmp_path / "s"
    code = main(["sweep", "resnet50", "--size", "test", "--device", "cpu", "--batch", "max", "--quiet",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert fake.calls[:3] == [4, 8, 16]  # the model's CPU batch first
    assert f"sweep directory: {out}" in captured.out and "Largest batch that ran: 39" in captured.out
    assert "batch 32: running" in captured.err


@pytest.mark.parametrize("signals, note", [
    (1, "interrupted before batch 4"),  # recorded; the sweep stops before its next point
    (2, "interrupted at batch 2"),  # the second one: the user insists, stop now
])
def test_signals_between_points(tmp_path, oracle, monkeypatch, signals, note):
    fake = oracle()

    def signalled(spec, run_dir, progress, probe_oom=True, force=False, ceilings=None):
        outcome = fake(spec, run_dir, progress, probe_oom, force, ceilings)
        for _ in range(signals):  # outside profile_run's own handlers, as between two points
            os.kill(os.getpid(), signal.SIGINT)
        return outcome

    monkeypatch.setattr(sweep_executors, "profile_run", signalled)
    outcome = sweep(tmp_path, SweepPlan((2, 4, 8)))
    assert fake.calls == [2] and outcome.exit_code == 130
    assert load_sweep(tmp_path).notes == [note]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers put back


# --- executors (tbd/cli/sweep_executors.py) without a cluster: a stand-in runner, the CLI's checks --------

class RemoteStandIn:
    """A remote runner whose workers are elsewhere: each point's profile comes back as data only.

    Points finish in reverse order; `interrupt_after` sends this process SIGINT after that many
    points, as a user's Ctrl-C while the others still run; `lost` batches never come back.
    """

    remote = True
    parallel = True

    def __init__(self, fits_below=10**9, crash=(), interrupt_after=None, lost=()):
        self.fits_below, self.crash, self.interrupt_after, self.lost = fits_below, set(crash), interrupt_after, set(lost)
        self.submitted: list[list[int]] = []
        self.cancelled: list[int] = []

    def describe(self, points, search):
        return "stand-in: the max search" if search else f"stand-in: {points} point(s)"

    def submit(self, specs, out, stopped):
        self.submitted.append([s.batch for s in specs])
        for done, spec in enumerate(reversed(specs)):
            if stopped():
                self.cancelled += [s.batch for s in reversed(specs)][done:]
                return
            if spec.batch in self.lost:
                continue
            yield sweep_executors.outcome_from_wire(sweep_executors.outcome_to_wire(self._outcome(spec)))
            if self.interrupt_after is not None and done + 1 == self.interrupt_after:
                os.kill(os.getpid(), signal.SIGINT)

    def _outcome(self, spec):
        where = {"host": "node-7", "run_dir": f"/scratch/node-7/b{spec.batch}"}
        if spec.batch in self.crash:
            return sweep_executors.PointOutcome(spec.batch, failure="failed", kept=True, **where,
                                                reason="workload exited with code 1, log at /scratch/node-7/b4/workload.log")
        if spec.batch >= self.fits_below:
            return sweep_executors.PointOutcome(spec.batch, failure="oom", **where,
                                                reason=f"batch {spec.batch} ran out of memory on cpu")
        metrics = replace(BASE.metrics, throughput=replace(BASE.metrics.throughput, value=10.0 * spec.batch))
        return sweep_executors.PointOutcome(spec.batch, profile=replace(BASE, metrics=metrics), **where)


def remote_sweep(out: Path, plan: SweepPlan, runner, lines: list[str] | None = None):
    return run_sweep(SPEC, plan, out, announce=(lines if lines is not None else []).append,
                     progress=lambda: pytest.fail("a remote sweep shows no progress bars"), runner=runner)


def test_a_remote_list_sweep_hands_out_every_point_at_once_and_copies_their_profiles(tmp_path):
    runner = RemoteStandIn(fits_below=100, crash={4})
    lines: list[str] = []
    outcome = remote_sweep(tmp_path, SweepPlan((8, 4, 200, 2)), runner, lines)
    assert runner.submitted == [[8, 4, 200, 2]]
    assert lines[:2] == ["plan: 4 points, batch 8, 4, 200, 2", "stand-in: 4 point(s)"]
    assert len(lines) == 6 and not any("running" in line or "next:" in line for line in lines)
    assert lines[2] == "batch 2: 20.0 images/s, 5.70 ms per iteration, peak memory 2.5 MiB"  # as each finishes
    result = outcome.sweep
    assert outcome.exit_code == 0 and load_sweep(tmp_path) == result
    assert [(p.batch, p.status, p.run_dir) for p in result.points] == [
        (2, "ok", "b2"), (4, "failed", None), (8, "ok", "b8"), (200, "oom", None)]
    assert result.points[1].reason == "workload exited with code 1, log at /scratch/node-7/b4/workload.log"
    by_batch = {p.batch: p for p in result.points}
    for batch in (2, 8):  # the profile that came back is written here, and is the point's source
        copied = load_profile(tmp_path / f"b{batch}")
        assert copied.metrics.throughput.value == 10.0 * batch == by_batch[batch].throughput
    assert result.notes == [
        "batch 2 ran on node-7: its profile.json was copied to b2/, its raw records (trace, log) stayed in "
        "/scratch/node-7/b2 there",
        "batch 4 ran on node-7: its log stayed in /scratch/node-7/b4 there",
        "batch 8 ran on node-7: its profile.json was copied to b8/, its raw records (trace, log) stayed in "
        "/scratch/node-7/b8 there"]


def test_a_remote_max_search_runs_one_point_at_a_time(tmp_path):
    runner = RemoteStandIn(fits_below=11)
    lines: list[str] = []
    outcome = remote_sweep(tmp_path, SweepPlan(None, start=1, cap=4096), runner, lines)
    assert runner.submitted == [[1], [2], [4], [8], [16], [12], [10], [11]]
    assert outcome.sweep.largest_fitting_batch == 10 and outcome.sweep.smallest_failing_batch == 11
    assert lines.count("stand-in: the max search") == 1


def test_ctrl_c_during_a_remote_sweep_cancels_the_rest_and_keeps_what_came_back(tmp_path):
    runner = RemoteStandIn(interrupt_after=1)
    outcome = remote_sweep(tmp_path, SweepPlan((2, 4, 8)), runner)
    assert runner.cancelled == [4, 2] and outcome.exit_code == 130
    saved = load_sweep(tmp_path)
    assert [p.batch for p in saved.points] == [8] and saved.notes[0] == "interrupted; cancelled batch 2, 4"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_point_the_runner_lost_is_recorded_not_run_again(tmp_path):
    runner = RemoteStandIn(lost={4})
    outcome = remote_sweep(tmp_path, SweepPlan((2, 4)), runner)
    assert runner.submitted == [[2, 4]]
    assert [(p.batch, p.status, p.reason) for p in outcome.sweep.points] == [
        (2, "ok", None), (4, "failed", "the executor returned no result for it")]


def test_a_worker_runs_the_point_code_and_sends_plain_data(tmp_path, oracle):
    oracle(crash={4})
    spec = replace(SPEC, batch=2)
    wire = sweep_executors.run_remote_point(spec.to_dict(), str(tmp_path / "s"))
    json.dumps(wire)  # plain data: profile.json's content, no pickled objects
    assert wire["run_dir"] == str(tmp_path / "s" / "b2") and wire["failure"] is None
    assert wire["profile"] == json.loads((tmp_path / "s" / "b2" / "profile.json").read_text())
    assert sweep_executors.outcome_from_wire(wire).profile.metrics.throughput.value == 20.0
    crashed = sweep_executors.run_remote_point(replace(SPEC, batch=4).to_dict(), str(tmp_path / "s"))
    assert crashed["failure"] == "failed" and crashed["reason"].startswith("workload exited with code 1")


def test_a_bug_on_a_worker_is_that_point_s_reason(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")
    monkeypatch.setattr(sweep_executors, "profile_run", broken)
    wire = sweep_executors.run_remote_point(replace(SPEC, batch=2).to_dict(), str(tmp_path))
    assert (wire["failure"], wire["reason"]) == ("failed", "RuntimeError: boom")


def test_gather_keeps_to_its_limit_and_after_a_cancel_keeps_only_profiles():
    launched, cancelled, stop = [], [], []
    outcomes = {2: sweep_executors.PointOutcome(2, failure="failed", reason="killed"),
                4: sweep_executors.PointOutcome(4, profile=BASE, exit_code=130)}

    def launch(specs):
        launched.append([s.batch for s in specs])
        return [s.batch for s in specs]

    def finished(handles):
        if handles == [2, 4] and not stop:
            stop.append(True)  # both running: the user presses Ctrl-C
            return []
        return handles

    got = list(sweep_executors._gather([replace(SPEC, batch=b) for b in (2, 4, 8)], launch, 2, finished,
                                       lambda handle, batch: outcomes[batch], cancelled.append, lambda: bool(stop)))
    assert launched == [[2, 4]] and cancelled == [2, 4]  # batch 8 never launched
    assert [o.batch for o in got] == [4]  # batch 2 failed of the cancel: dropped


def test_executor_options_are_checked_before_anything_runs(tmp_path, capsys, oracle):
    fake = oracle()
    base = ["sweep", "resnet50", "--batch", "2", "--out", str(tmp_path / "s")]
    for argv, message in [
        (["--executor", "foo"], "argument --executor: invalid choice: 'foo' (choose from 'local', 'ray', 'submitit')"),
        (["--ray-address", "head:6379"], "--ray-address applies to --executor ray only"),
        (["--executor", "submitit", "--ray-address", "head:6379"], "--ray-address applies to --executor ray only"),
        (["--slurm-partition", "gpu"], "--slurm-partition applies to --executor submitit only"),
        (["--executor", "ray", "--timeout-min", "30"], "--timeout-min applies to --executor submitit only"),
        (["--executor", "ray", "--device", "cuda:1"], "--device cuda:1: with --executor ray each point gets a GPU"),
    ]:
        assert main([*base, *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert fake.calls == [] and not (tmp_path / "s").exists()


@pytest.mark.parametrize("executor, module", [("ray", "ray"), ("submitit", "submitit")])
def test_an_executor_that_is_not_installed_is_one_line_with_the_install_command(tmp_path, capsys, monkeypatch,
                                                                               executor, module):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    assert main(["sweep", "resnet50", "--batch", "2", "--executor", executor, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err == (f"tbd: error: --executor {executor} needs {module}, which is not installed "
                   f'(hint: pip install "tbd[{executor}]")\n')
    assert not (tmp_path / "s").exists()


def test_a_ray_address_nothing_listens_on_is_one_line_at_once(tmp_path, capsys):
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    code = main(["sweep", "resnet50", "--batch", "2", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                 "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"tbd: error: cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused")
    assert time.monotonic() - started < 10 and not (tmp_path / "s").exists()


def test_a_failed_job_s_reason_is_its_exception_line():
    # submitit's FailedJobError text, as a local job raising ValueError gave it (submitit 1.5.4)
    text = ('Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent '
            'call last):\n  File "/venv/submitit/core/submission.py", line 55, in process_job\n    result = '
            'delayed.result()\n             ^^^^^^^^^^^^^^^^\n  File "<dynamic-code>", line 4, in boom\nValueError: '
            "bad value 3\nsecond line\n\n----------------------\nYou can check full logs with 'job.stderr(0)' and "
            "'job.stdout(0)'or at paths:\n  - /tmp/subfail/12731_0_log.err\n  - /tmp/subfail/12731_0_log.out")
    assert sweep_executors._error_line(text) == "ValueError: bad value 3"
    assert sweep_executors._error_line("Job 7 (task: 0) has not produced any output (state: TIMEOUT)\nmore") == \
        "Job 7 (task: 0) has not produced any output (state: TIMEOUT)"


def test_later_points_are_lent_what_the_first_complete_point_measured(tmp_path, oracle):
    # Batch 2 crashes; 8 is the first to write a bandwidth (gemm_from=8), but the lender is the first complete
    # point, 4: it measured none, so the later points measure their own bandwidth.
    fake = oracle(crash={2}, gemm_from=8)
    sweep(tmp_path, SweepPlan((2, 4, 8, 16)))
    assert fake.ceilings[2] is None and fake.ceilings[4] is None
    lent = {"bandwidth": None, "provenance": "measured once for the sweep at batch 4 (b4/raw/bandwidth.json)",
            "batch": 4}
    assert fake.ceilings[8] == lent and fake.ceilings[16] == lent


def test_the_first_points_bandwidth_is_lent(tmp_path, oracle):
    fake = oracle(gemm_from=2)
    sweep(tmp_path, SweepPlan((2, 4, 8)))
    assert fake.ceilings[2] is None
    lent = {"bandwidth": {"bytes_per_s": 2.0e10, "nbytes": 1 << 27},
            "provenance": "measured once for the sweep at batch 2 (b2/raw/bandwidth.json)", "batch": 2}
    assert fake.ceilings[4] == lent and fake.ceilings[8] == lent
