"""`tbd analyze`'s device options and small things (issue 27, item 9): --memory-bandwidth on a trace
and on a run directory, labelled as the user's; --top and machine output; one "tbd" per error line."""

from __future__ import annotations

import json
import shutil

import pytest
from testpaths import FIXTURES

from tbd.cli.main import build_parser, main

TRACE = FIXTURES / "kineto_cuda_synthetic.json"
RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_memory_bandwidth_replaces_the_tables_on_a_trace_and_every_share_follows_it(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert _cli(capsys, "analyze", TRACE, "--memory-bandwidth", "5e11", "--json", out)[0] == 0
    profile = json.loads(out.read_text())
    bandwidth = profile["metrics"]["memory_bandwidth"]
    assert (bandwidth["value"], bandwidth["source"], bandwidth["reason"]) == (5e11, "user",
                                                                              "given with --memory-bandwidth")
    rows = [r for r in profile["kernels"] if r["bytes"] is not None]
    assert rows
    for r in rows:  # bytes / time / 5e11, from the figures the row prints beside it
        assert r["bandwidth_util_pct"] == pytest.approx(100 * r["bytes"] / r["time_s"] / 5e11, rel=1e-12)


def test_memory_bandwidth_applies_to_a_run_directory(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "profile.json").unlink()
    out = tmp_path / "p.json"
    assert _cli(capsys, "analyze", run, "--memory-bandwidth", "2e10", "--peak-flops", "1e12", "--json", out)[0] == 0
    metrics = json.loads(out.read_text())["metrics"]
    assert (metrics["memory_bandwidth"]["value"], metrics["memory_bandwidth"]["source"]) == (2e10, "user")
    assert (metrics["flop_util_pct"]["peak_flops"], metrics["flop_util_pct"]["peak_source"]) == (1e12, "user")


def test_a_bad_bandwidth_is_one_line(capsys):
    code, _, err = _cli(capsys, "analyze", TRACE, "--memory-bandwidth", "nan")
    assert code == 2 and err.count("\n") == 1 and "--memory-bandwidth" in err


def test_an_argument_error_names_tbd_once(capsys):
    code, _, err = _cli(capsys, "bogus")
    assert code == 2 and err.startswith("tbd: error: argument COMMAND: invalid choice: 'bogus'") and \
        err.count("tbd") == 2  # "tbd: error" and the hint's `tbd --help`
    code, _, err = _cli(capsys, "analyze", TRACE, "--top", "z")
    assert code == 2 and err.startswith("tbd: error: analyze: argument --top: ") and "`tbd analyze --help`" in err


def test_machine_output_holds_every_group_whatever_top_and_help_says_so(capsys):
    code, out, _ = _cli(capsys, "kernels", TRACE, "--json", "--top", "1")
    groups = json.loads(out)["kernels"]
    assert code == 0 and len(groups) > 1
    sub = build_parser()._subparsers._group_actions[0].choices
    for command in ("kernels", "analyze", "report", "compare"):
        top = next(a for a in sub[command]._actions if "--top" in a.option_strings)
        assert "always hold" in top.help, command
