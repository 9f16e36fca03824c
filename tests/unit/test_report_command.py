"""`tbd report RUN|SWEEP|COMPARE` with --json, --csv, --html and --figures, on committed run fixtures."""

import csv
import io
import json
import shutil

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main
from tbd.core.comparison import Comparison
from tbd.core.sweep_result import Sweep, SweepPoint

RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"
OTHER = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads2"


def _out(capsys) -> str:
    return capsys.readouterr().out


def test_json_is_the_profile_as_saved(capsys):
    assert main(["report", str(RUN), "--json"]) == 0
    assert json.loads(_out(capsys)) == json.loads((RUN / "profile.json").read_text())


def test_csv_rows_are_the_profiles_figures(capsys):
    assert main(["report", str(RUN), "--csv"]) == 0
    rows = {r["key"]: r for r in csv.DictReader(io.StringIO(_out(capsys)))}
    saved = json.loads((RUN / "profile.json").read_text())["metrics"]
    assert float(rows["throughput"]["value"]) == saved["throughput"]["value"]
    assert rows["throughput"]["unit"] == "images/s"
    assert rows["gpu_busy_pct"]["value"] == "" and rows["gpu_busy_pct"]["reason"] == saved["gpu_busy_pct"]["reason"]
    assert int(rows["memory_bytes.weights"]["value"]) == saved["memory_bytes"]["weights"]
    assert int(rows["memory_bytes.at_peak.unattributed"]["value"]) == saved["memory_bytes"]["at_peak"]["unattributed"]


def test_html_of_a_run_goes_beside_it_by_default(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    assert main(["report", str(run), "--html"]) == 0
    page = (run / "report.html").read_text()
    assert _out(capsys).strip() == f"HTML report: {run / 'report.html'}"
    assert page.startswith("<!DOCTYPE html>") and "1,397.3 images/s" in page  # the terminal's figure
    assert main(["report", str(run), "--html"]) == 2  # the page already there is not replaced unasked
    assert "report.html exists (hint: choose another path, or --force to replace it)" in capsys.readouterr().err
    assert main(["report", str(run), "--html", "--force"]) == 0


def test_html_path_given_is_never_overwritten_unasked(tmp_path, capsys):
    page = tmp_path / "page.html"
    page.write_text("mine")
    assert main(["report", str(RUN), "--html", str(page)]) == 2
    assert "exists" in capsys.readouterr().err and page.read_text() == "mine"
    assert main(["report", str(RUN), "--html", str(page), "--force"]) == 0
    assert "<svg" in page.read_text()


def test_figures_are_written_as_svg_and_png(tmp_path, capsys):
    assert main(["report", str(RUN), "--figures", str(tmp_path / "f")]) == 0
    names = sorted(p.name for p in (tmp_path / "f").iterdir())
    assert names == sorted(f"{stem}.{ext}" for stem in ("iteration_time", "memory", "kernel_utilization")
                           for ext in ("svg", "png"))
    assert "figure: " in _out(capsys)


def test_a_saved_comparison_renders_in_every_form(tmp_path, capsys):
    saved = tmp_path / "ab.json"
    assert main(["compare", str(RUN), str(OTHER), "--out", str(saved)]) == 0
    text = _out(capsys)
    assert main(["report", str(saved)]) == 0
    assert _out(capsys) == text  # the same comparison, rendered from the file
    assert main(["report", str(saved), "--json"]) == 0
    assert Comparison.from_dict(json.loads(_out(capsys))) == Comparison.from_dict(json.loads(saved.read_text()))
    assert main(["report", str(saved), "--csv"]) == 0
    assert _out(capsys).startswith("section,key,label,unit,run,source,value,ratio_to_first")
    assert main(["report", str(saved), "--html"]) == 0
    assert "Ratios are to run A" in (tmp_path / "ab.html").read_text()


def _sweep_dir(tmp_path):
    point = SweepPoint(8, "ok", None, "b8", 1397.0, "images/s", 0.0057, None, 3.7, 50.0, True,
                       {"weights": 523848, "allocator_peak": 2624320})
    oom = SweepPoint(16, "oom", "batch 16 ran out of memory on cpu", None, None, None, None, None, None, None, None)
    sweep = Sweep("resnet50", "pytorch", "cpu", "AMD EPYC", "test", "max", [point, oom], 8, 16)
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps(sweep.to_dict()))
    return folder, sweep


def test_a_sweep_directory_renders_in_every_form(tmp_path, capsys):
    folder, sweep = _sweep_dir(tmp_path)
    assert main(["report", str(folder)]) == 0
    assert "OOM" in _out(capsys)
    assert main(["report", str(folder / "sweep.json"), "--json"]) == 0
    assert Sweep.from_dict(json.loads(_out(capsys))) == sweep
    assert main(["report", str(folder), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(_out(capsys))))
    assert [(r["batch"], r["status"]) for r in rows] == [("8", "ok"), ("16", "oom")]
    assert main(["report", str(folder), "--html"]) == 0
    assert "batch 16 ran out of memory on cpu" in (folder / "report.html").read_text()


@pytest.mark.parametrize("content, message", [
    ('{"schema": "tbd.sweep/1", "model": 3}', "has type int"),
    ('{"schema": "tbd.compare/1", "runs": []}', "missing"),
    ('{"hello": 1}', "not a tbd profile, sweep or comparison"),
    ("{", "not a tbd profile, sweep or comparison"),
])
def test_a_corrupt_or_foreign_file_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "x.json"
    path.write_text(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tbd: error:") and message in err
