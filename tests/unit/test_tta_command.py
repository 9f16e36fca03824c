"""`tbd tta` end to end on the hand-written DAWNBench entries (tests/fixtures/dawnbench) and, where they
are beside the repository, real MLPerf logs: values by hand, the 80-column table, one line per bad
path, the saved result read back by `tbd report`."""

from __future__ import annotations

import json
import shutil

import pytest
from testpaths import FIXTURES, SHARED

from tbd.cli.main import main
from tbd.core.tta_result import TtaResult
from tbd.reports.renderers import renderer_for

DAWN = FIXTURES / "dawnbench"
MLPERF = SHARED / "mlperf" / "training_results_v4.0"


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["tta", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _system(result: TtaResult, table: str, file_part: str):
    (t,) = [t for t in result.tables if t.benchmark == table]
    return next(s for s in t.systems if file_part in s.path), t


def test_dawnbench_entries_by_hand(capsys):
    code, out, err = _run(capsys, DAWN, "--json")
    assert code == 0
    result = TtaResult.from_dict(json.loads(out))
    # example_resnet9: the first row at or above 94 top-1 is epoch 4 at 0.4 h (93.99 at epoch 3 is not);
    # cost 0.4 h x 2.5 USD/h = 1.0 USD.
    s, table = _system(result, "CIFAR10 train", "example_resnet9")
    assert (s.score, s.score_unit, s.epochs_to_target, s.accuracy) == (0.4, "h", 4, 94.0)
    assert s.time_to_target_s == pytest.approx(1440.0) and s.cost_usd == pytest.approx(1.0)
    assert (table.metric, table.target) == ("top1Accuracy", 94.0)
    # hours before epoch: top-5 reaches 93 at epoch 3, 6.0 h; 6.0 x 8.0 USD/h = 48 USD.
    s, table = _system(result, "ImageNet train", "example_resnet50_4m60")
    assert (s.score, s.epochs_to_target, s.cost_usd) == (6.0, 3, 48.0)
    first = table.systems[0]
    assert s.ratio_time == pytest.approx(s.time_to_target_s / first.time_to_target_s)
    # The accuracy curve of the run is the TSV's rows, hours as seconds.
    assert [(p.seconds, p.value) for p in s.runs[0].accuracy][:2] == [(7200.0, 80.0), (14400.0, 92.99)]
    assert {t.benchmark for t in result.tables} >= {"CIFAR10 inference", "SQuAD train", "ImageNet inference"}


def test_target_overrides_and_benchmark_filters(capsys):
    code, out, _ = _run(capsys, DAWN, "--json", "--benchmark", "CIFAR10", "--target", "80")
    result = TtaResult.from_dict(json.loads(out))
    assert {t.benchmark for t in result.tables} == {"CIFAR10 train", "CIFAR10 inference"}
    s, table = _system(result, "CIFAR10 train", "example_resnet9")
    assert (s.score, table.target, table.target_source) == (0.2, 80.0, "--target 80 on top1Accuracy")


def test_the_table_fits_80_columns_and_names_what_could_not_be_read(capsys, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    code, out, err = _run(capsys, DAWN, bad)
    assert code == 0
    result = TtaResult.from_dict(json.loads(_run(capsys, DAWN, bad, "--json")[1]))
    text = renderer_for(result).text(width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert f"{bad}: not an MLPerf result log or DAWNBench entry: a text file" in text.replace("\n", " ")
    code, out, err = _run(capsys, tmp_path / "missing")
    assert code == 2 and err.count("\n") == 1 and "nothing to score" in err and "no such file" in err


def test_saved_result_renders_again_and_a_corrupt_one_is_one_line(capsys, tmp_path):
    saved = tmp_path / "tta.json"
    code, text, _ = _run(capsys, DAWN, "--out", saved)
    assert code == 0 and saved.is_file()
    assert main(["report", str(saved)]) == 0
    assert capsys.readouterr().out == text
    assert main(["report", str(saved), "--csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("row,source,benchmark") and any(r.startswith("system,dawnbench,CIFAR10 train") for r in rows)
    data = json.loads(saved.read_text())
    data["tables"][0]["systems"][0]["score"] = -1
    saved.write_text(json.dumps(data))
    assert main(["report", str(saved)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tables[0].systems[0].score" in err


def test_html_never_overwrites_without_force(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, DAWN, "--html")
    assert code == 0 and "HTML report: tta.html" in out and (tmp_path / "tta.html").read_text().startswith("<!")
    code, _, err = _run(capsys, DAWN, "--html")
    assert code == 2 and "--html tta.html exists" in err
    assert _run(capsys, DAWN, "--html", "--force")[0] == 0


def test_figures_are_written(capsys, tmp_path):
    code, out, _ = _run(capsys, DAWN, "--benchmark", "ImageNet", "--figures", tmp_path / "figs")
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert "tta-imagenet-train-time.svg" in names and "tta-imagenet-train-accuracy.png" in names


@pytest.mark.skipif(not MLPERF.is_dir(), reason=f"no MLPerf v4.0 logs under {MLPERF}")
def test_a_loose_mlperf_log_is_scored_alone_with_its_ruleset_assumed(capsys, tmp_path):
    log = tmp_path / "my_run.log"
    shutil.copy(MLPERF / "tinycorp" / "results" / "tinybox_red" / "resnet" / "result_1.txt", log)
    code, out, _ = _run(capsys, log, "--json")
    result = TtaResult.from_dict(json.loads(out))
    (table,) = result.tables
    assert table.benchmark == "resnet" and table.ruleset_source.startswith("assumed")
    (system,) = table.systems
    events = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in log.read_text().splitlines() if ":::MLLOG" in line]
    start = next(e["time_ms"] for e in events if e["key"] == "run_start")
    stop = next(e["time_ms"] for e in events if e["key"] == "run_stop")
    assert system.runs[0].score == pytest.approx((stop - start) / 60000, rel=1e-12)
    text = renderer_for(result).text(width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
