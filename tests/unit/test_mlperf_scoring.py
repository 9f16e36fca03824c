"""MLPerf scoring end to end on a small hand-written submission (open division, so a handful of
`:::MLLOG` lines pass mlperf-logging's compliance checker): scores by hand and by mlperf-logging's own
`summarize_results`, the dropped run and its reason, scaling.json, ratios, and the folder untouched.
Runs in CI, where the real submissions (tests/readers/test_mlperf_submissions.py) are absent."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tbd.cli.main import main
from tbd.cli.tta_analysis import analyse
from tbd.core.tta_result import TtaResult

MINUTES = {"sysA": [10.0, 11.0, 12.0, 13.0, 30.0], "sysB": [5.0, 6.0, 7.0, 8.0, None]}  # None: no run_stop


def _log(path: Path, minutes: float | None, t0: int = 1_700_000_000_000) -> None:
    def line(t: int, key: str, value=None, **meta) -> str:
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                                         "value": value, "metadata": {"file": "train.py", "lineno": 1, **meta}})
    run_start = t0 + 60_000
    end = run_start + int((minutes or 20.0) * 60_000)
    lines = ["console noise before the events",
             line(t0, "submission_org", "Lab"), line(t0, "submission_platform", "box"),
             line(t0, "submission_division", "open"), line(t0, "submission_status", "onprem"),
             line(t0, "submission_benchmark", "resnet"), line(t0, "cache_clear", True), line(t0, "init_start"),
             line(t0, "global_batch_size", 256), line(t0, "train_samples", 1000), line(t0, "eval_samples", 100),
             line(run_start - 1, "init_stop"), line(run_start, "run_start"),
             line(run_start, "epoch_start", 1, epoch_num=1), line(end - 30_000, "epoch_stop", 1, epoch_num=1),
             line(end - 30_000, "eval_start", epoch_num=1), line(end - 1000, "eval_accuracy", 0.76, epoch_num=1),
             line(end - 1000, "eval_stop", epoch_num=1)]
    if minutes is not None:
        lines.append(line(end, "run_stop", status="success"))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def submission(tmp_path_factory) -> Path:
    org = tmp_path_factory.mktemp("mlperf") / "training_results_v4.0" / "Lab"
    for system, minutes in MINUTES.items():
        folder = org / "results" / system / "resnet"
        folder.mkdir(parents=True)
        for i, m in enumerate(minutes):
            _log(folder / f"result_{i}.txt", m)
        (org / "systems").mkdir(exist_ok=True)
        (org / "systems" / f"{system}.json").write_text(json.dumps({
            "division": "open", "status": "onprem", "submitter": "Lab", "system_name": system,
            "number_of_nodes": "2", "host_processor_model_name": "cpu", "host_processors_per_node": "2",
            "host_processor_core_count": "32",
            "accelerator_model_name": "GPU-X", "accelerators_per_node": "4" if system == "sysA" else "8",
            "framework": "fw", "hw_notes": "", "sw_notes": ""}))
    (org / "results" / "sysB" / "resnet" / "scaling.json").write_text('{"scaling_factor": 1.5}')
    return org


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_scores_by_hand_and_by_the_summarizer(submission, tmp_path):
    before = _digest(submission)
    result = analyse([str(submission)])
    assert _digest(submission) == before
    (table,) = result.tables
    assert (table.benchmark, table.ruleset, table.ruleset_source) == ("resnet", "4.0.0",
                                                                       "the path (training_results_v4.0)")
    a, b = table.systems
    # sysA: 10, 11, 12, 13, 30 minutes; the fastest (10) and slowest (30) dropped: (11 + 12 + 13) / 3 = 12.
    assert a.score == pytest.approx(12.0, rel=1e-12) and a.score_unit == "min"
    assert sorted((r.score, r.used) for r in a.runs) == [(10.0, False), (11.0, True), (12.0, True), (13.0, True),
                                                         (30.0, False)]
    # sysB: result_4 has no run_stop: dropped as the slowest, so only the fastest (5) of the rest goes:
    # (6 + 7 + 8) / 3 = 7, times scaling.json's 1.5 = 10.5.
    assert b.score == pytest.approx(10.5, rel=1e-12) and b.rcp_scaling_factor == 1.5
    dropped = next(r for r in b.runs if r.file.endswith("result_4.txt"))
    assert not dropped.used and "run_stop" in dropped.dropped_reason and dropped.status is None
    # 2 nodes x 4 and 2 nodes x 8 accelerators; ratios to sysA.
    assert (a.accelerator_count, b.accelerator_count) == (8, 16)
    assert a.accelerator_time_s == pytest.approx(12.0 * 60 * 8)
    assert b.ratio_time == pytest.approx(10.5 / 12.0) and b.ratio_accelerator_time == pytest.approx(10.5 * 16 / 96)
    # Each run: init 60 s less 1 ms, eval 29 s, one epoch of 1,000 samples.
    run = next(r for r in a.runs if r.file.endswith("result_1.txt"))
    assert run.init_s == pytest.approx(59.999) and run.eval_s == pytest.approx(29.0)
    assert run.train_s == pytest.approx(11 * 60 - 29.0)
    assert run.throughput[0].samples_per_s == pytest.approx(1000 / (11 * 60 - 30.0))
    assert (run.epochs_to_converge, run.samples_to_converge) == (1.0, 1000.0)

    # mlperf-logging's public entry point, on a copy (it writes into the folder), gives the same.
    from mlperf_logging.result_summarizer import result_summarizer as rs
    copy = tmp_path / "Lab"
    shutil.copytree(submission, copy)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        summary, _, _, _ = rs.summarize_results(str(copy), "training", "4.0.0")
    expected = {row["system"]: row["resnet"] for row in summary.to_dict("records")}
    assert expected == {"sysA": a.score, "sysB": b.score}


def test_a_log_that_is_not_mlperf_and_a_broken_log_are_one_line_each(submission, tmp_path, capsys):
    broken = tmp_path / "result_9.txt"
    broken.write_text(':::MLLOG {"namespace": "", "key": "run_start", "time_ms": 17\n')  # cut off
    code = main(["tta", str(submission / "results" / "sysA"), str(broken), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    result = TtaResult.from_dict(json.loads(out))
    assert [s.label for t in result.tables for s in t.systems] == ["Lab/sysA"]
    assert any(p.path == str(broken) and "malformed" in p.reason for p in result.problems)
    assert f"tbd: could not read {broken}:" in err


def test_too_few_runs_for_an_olympic_mean_are_said(submission, tmp_path):
    result = analyse([str(submission / "results" / "sysA" / "resnet" / "result_0.txt")])
    (system,) = result.tables[0].systems
    assert system.score is None
    assert system.score_reason == "1 run: the olympic mean drops the 1 fastest and slowest, so it needs 3"
    assert system.runs[0].score == pytest.approx(10.0)
