"""`tbd train` on real data (scikit-learn's bundled digits): runs reach the target, each logged with
mlperf-logging's mllog so that its parser reads it, and every figure checked against the logs by hand."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbd.cli.main import main
from tbd.core.tta_result import TtaResult
from tbd.models.tasks import catalog
from tbd.profilers.dawnbench.reader import read_entry


def _events(path: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG" in line]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("train") / "run"
    assert main(["train", "resnet50", "--runs", "3", "--batch", "64", "--out", str(out), "--cost-per-hour", "2"]) == 0
    return out


def test_three_runs_reach_the_target_and_the_score_is_the_olympic_mean(trained):
    result = TtaResult.from_dict(json.loads((trained / "tta.json").read_text()))
    (table,) = result.tables
    assert (table.source, table.metric, table.target) == ("tbd", "top1", 0.97)
    (system,) = table.systems
    logs = sorted((trained / "results" / "local" / "resnet50").glob("result_*.txt"))
    assert len(logs) == 3 and len(system.runs) == 3
    minutes = []
    for log, run in zip(logs, system.runs):
        events = _events(log)
        keys = [e["key"] for e in events]
        for key in ("submission_benchmark", "seed", "global_batch_size", "train_samples", "init_start", "init_stop",
                    "run_start", "epoch_start", "epoch_stop", "eval_start", "eval_accuracy", "eval_stop", "run_stop"):
            assert key in keys, key
        start = next(e["time_ms"] for e in events if e["key"] == "run_start")
        stop = next(e for e in events if e["key"] == "run_stop")
        assert stop["metadata"]["status"] == "success"
        last = [e for e in events if e["key"] == "eval_accuracy"][-1]
        assert last["value"] >= 0.97 and run.epochs_to_converge == last["metadata"]["epoch_num"]
        assert run.samples_to_converge == last["metadata"]["epoch_num"] * 1437  # 80 % of 1,797, stratified
        assert run.score == pytest.approx((stop["time_ms"] - start) / 60000, rel=1e-12)
        minutes.append(run.score)
        # mlperf-logging's own parser reads every line.
        from mlperf_logging.compliance_checker.mlp_parser import parse_file
        lines, failed = parse_file(str(log), "4.0.0")
        assert failed == [] and len(lines) == len(events)
    # The olympic mean of three runs is the middle one.
    assert system.score == pytest.approx(sorted(minutes)[1], rel=1e-12)
    assert [r.used for r in system.runs] == [m == sorted(minutes)[1] for m in minutes]
    assert system.time_min_s == pytest.approx(min(minutes) * 60) and system.time_max_s == pytest.approx(max(minutes) * 60)
    assert system.cost_usd == pytest.approx(system.score / 60 * 2)
    assert system.latency_ms is not None and system.latency_ms > 0
    # tbd's profiler on one step of the same configuration; samples to target over it is its prediction.
    assert system.profiled_samples_per_s > 0 and system.profiled_reason is None
    assert system.profiled_train_s == pytest.approx(system.samples_to_target / system.profiled_samples_per_s)
    # No energy counter on these machines: null, with the reason, never a number.
    assert system.energy_j is None and system.energy_per_sample_j is None and "RAPL" in system.energy_reason


def test_each_run_is_also_a_dawnbench_entry(trained):
    entry = read_entry(trained / "dawnbench" / "resnet50_run0.json")
    assert entry.cost_per_hour == 2 and entry.rows
    assert entry.rows[-1].metrics["top1Accuracy"] >= 97.0
    assert all(r.metrics["top1Accuracy"] < 97.0 for r in entry.rows[:-1])  # it stopped at the first at target


def test_tbd_tta_reads_a_train_directory(trained, capsys):
    assert main(["tta", str(trained), "--json"]) == 0
    result = TtaResult.from_dict(json.loads(capsys.readouterr().out))
    assert [t.source for t in result.tables] == ["tbd"] and result.problems == []


def test_runs_that_never_reach_the_target_give_no_score(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "resnet50", "--runs", "2", "--max-epochs", "1", "--target", "0.999", "--out", str(out),
                 "--json"]) == 0
    result = TtaResult.from_dict(json.loads((out / "tta.json").read_text()))
    (system,) = result.tables[0].systems
    assert system.score is None and system.score_reason == "2 runs did not reach the target; MLPerf allows 1"
    assert [r.status for r in system.runs] == ["aborted", "aborted"]


@pytest.mark.parametrize("argv, said", [
    (["nope"], "unknown model 'nope'"),
    (["resnet50", "--framework", "mxnet"], "runs PyTorch only"),
    (["resnet50", "--metric", "bleu"], "measures top1, not bleu"),
    (["resnet50", "--target", "97"], "--target 97 is not a fraction: top1 is one"),
])
def test_bad_requests_are_one_line(argv, said, capsys, tmp_path):
    assert main(["train", *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_a_model_without_a_task_says_why(capsys, tmp_path, monkeypatch):
    monkeypatch.delitem(catalog.TASKS, "wgan", raising=False)
    monkeypatch.setitem(catalog.NO_TASK, "wgan", "no honest task: a stated reason")
    assert main(["train", "wgan", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "wgan has no tbd train task: no honest task: a stated reason" in err and err.count("\n") == 1


def test_sweep_tta_sets_throughput_beside_time_to_target(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "resnet50", "--tta", "--size", "test", "--batch", "32,128", "--runs", "3", "--target", "0.9",
                 "--max-epochs", "40", "--out", str(out)]) == 0
    result = TtaResult.from_dict(json.loads((out / "tta.json").read_text()))
    (table,) = result.tables
    assert [s.label for s in table.systems] == ["batch 32", "batch 128"]
    for system, batch in zip(table.systems, (32, 128)):
        point = TtaResult.from_dict(json.loads((out / f"b{batch}" / "tta.json").read_text())).tables[0].systems[0]
        assert system.score == point.score and system.global_batch_size == batch
    first, second = table.systems
    if first.time_to_target_s and second.time_to_target_s:
        assert second.ratio_time == pytest.approx(second.time_to_target_s / first.time_to_target_s)
    assert (out / "figures" / "tta-resnet50-on-digits-batch-sweep-batch.png").is_file()
    from tbd.reports.figures.tta_figures import batch_sweep_figure
    throughput_axis = batch_sweep_figure(table).axes[0]
    assert list(throughput_axis.lines[0].get_xdata()) == [32, 128]
    assert list(throughput_axis.lines[0].get_ydata()) == [s.samples_per_s for s in table.systems]
    capsys.readouterr()
    assert main(["sweep", "resnet50", "--runs", "5", "--batch", "2"]) == 2
    assert "--runs applies to --tta only" in capsys.readouterr().err


def test_a_task_whose_package_is_missing_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    spec = catalog.TASKS["a3c"]
    monkeypatch.setitem(catalog.TASKS, "a3c", dataclasses.replace(spec, requires=(("no_such_module_x", "gymnasium"),)))
    assert main(["train", "a3c", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "a3c's task (cartpole) needs the Python package gymnasium, which is not installed" in err
    assert "pip install 'gymnasium'" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()  # refused before anything was written


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["int", "term", "kill"])
def test_an_interrupted_train_keeps_the_runs_already_finished(stop, tmp_path):
    """Stopped during run 2 of 3 (once tta.json first appears, written after run 1): run 1's log, its
    DAWNBench entry and a result holding it survive; the run cut short is marked, never passed off as done."""
    out = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-m", "tbd.cli", "train", "resnet50", "--runs", "3", "--max-epochs", "1",
                              "--no-profile", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 240
    while not (out / "tta.json").exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, child.communicate()
    child.send_signal(stop)
    _, err = child.communicate(timeout=120)
    assert child.returncode == (-stop if stop == signal.SIGKILL else 128 + stop), err
    result = TtaResult.from_dict(json.loads((out / "tta.json").read_text()))
    (system,) = result.tables[0].systems
    first = _events(out / "results" / "local" / "resnet50" / "result_0.txt")
    assert [e["key"] for e in first][-1] == "run_stop" and first[-1]["metadata"]["status"] == "aborted"  # 1 epoch
    assert (out / "dawnbench" / "resnet50_run0.tsv").is_file()
    assert Path(system.runs[0].file).name == "result_0.txt" and system.runs[0].status == "aborted"
    assert not any("interrupted" in n for n in system.runs[0].notes)
    second = out / "results" / "local" / "resnet50" / "result_1.txt"
    if stop == signal.SIGKILL:
        assert len(system.runs) == 1 and "partial: 1 of 3 runs finished" in " ".join(system.notes)
        assert not second.exists()  # killed mid-run: its lines stay in .result_1.txt.partial, never a result
    else:
        assert err.strip().splitlines()[-1].startswith("tbd: error: interrupted: the runs done so far"), err
        said = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[stop]
        assert f"interrupted ({said}): the runs done so far" in system.notes
        if second.exists():  # the signal came once run 2 had begun: its log ends with run_stop, marked
            stop_event = _events(second)[-1]
            assert stop_event["key"] == "run_stop" and stop_event["metadata"] == {
                **stop_event["metadata"], "status": "aborted", "reason": f"interrupted ({said})"}
            assert "interrupted: this run was cut short" in system.runs[1].notes
            assert len(system.runs) == 2
        else:
            assert len(system.runs) == 1
