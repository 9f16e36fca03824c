"""One way in: `open_target` tells every input tbd reads from real files, and each command reads
through it (what a command does not take gets one line naming the command that does)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from testpaths import FIXTURES, SHARED

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.cli.main import main
from tbd.cli.run_analysis import load_profile
from tbd.cli.sweep_run import load_sweep
from tbd.core import rundir, targets
from tbd.core.errors import ResultFormatError, UsageError
from tbd.core.sweep_result import Sweep, SweepPoint
from tbd.core.targets import Kind, open_target, sniff

RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"
OTHER = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads2"
# The MLPerf Training v4.0 logs, where the shared data folder holds them (tests/testpaths.py).
MLPERF = SHARED / "mlperf" / "training_results_v4.0"
needs_mlperf = pytest.mark.skipif(not MLPERF.is_dir(), reason=f"MLPerf logs not here ({MLPERF}; see its README)")


@pytest.mark.parametrize("name, kind, words", [
    ("kineto_cpu_small.json.gz", Kind.KINETO_TRACE, "a Kineto trace"),
    ("kineto_cuda_synthetic.json", Kind.KINETO_TRACE, "a Kineto trace"),
    ("kineto_cupti_counters.json", Kind.KINETO_TRACE, "a Kineto trace"),
    ("mxnet_cpu_small.json.gz", Kind.MXNET_TRACE, "an MXNet profiler dump"),
    ("mxnet_cpu_hybrid.json.gz", Kind.MXNET_TRACE, "an MXNet profiler dump"),
    ("tensorflow_cpu_small.json.gz", Kind.TENSORFLOW_TRACE, "a TensorFlow trace"),
    ("tensorflow_cpu_lstm.json.gz", Kind.TENSORFLOW_TRACE, "a TensorFlow trace"),
    ("runs/resnet50-test-cpu-b8-threads1", Kind.RUN_DIR, "a tbd run directory (pytorch)"),
    ("runs/resnet50-test-cpu-b8-threads1/profile.json", Kind.PROFILE_JSON, "a tbd profile.json"),
    ("multirank/gloo_cpu_ddp", Kind.TRACE_FOLDER, "a folder of 2 per-rank Kineto traces"),
])
def test_every_committed_fixture_is_told_by_its_kind(name, kind, words):
    target = open_target(FIXTURES / name)
    assert (target.kind, target.description) == (kind, words)
    assert target.where == FIXTURES / name


def test_a_folder_of_traces_lists_its_traces_and_a_run_says_it_has_its_profile():
    folder = open_target(FIXTURES / "multirank" / "gloo_cpu_ddp")
    assert [p.name for p in folder.files] == ["rank-0.json.gz", "rank-1.json.gz"]
    run = open_target(RUN)
    assert run.has_profile and run.framework == "pytorch" and run.kineto_trace is None


def test_a_profile_is_told_by_its_schema_whatever_its_name(tmp_path):
    # `tbd analyze --json` writes a profile anywhere, under any name.
    saved = tmp_path / "mine.json"
    shutil.copy(RUN / "profile.json", saved)
    assert open_target(saved).kind is Kind.PROFILE_JSON
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(RUN / "profile.json", only / "profile.json")
    target = open_target(only)  # a folder holding a profile.json and no raw records
    assert target.kind is Kind.PROFILE_JSON and target.where == only / "profile.json"


def _run_copy(tmp_path: Path, *, trace: Path | None = None, framework: str = "pytorch", **spec_changes) -> Path:
    """The committed CPU run with `trace` as its trace file (gzipped as tbd writes it) and its spec changed."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    spec = json.loads((run / rundir.SPEC).read_text())
    (run / rundir.SPEC).write_text(json.dumps({**spec, "framework": framework, **spec_changes}))
    if trace is not None:
        data = trace.read_bytes()
        (run / rundir.trace_name(framework)).write_bytes(data if data[:2] == b"\x1f\x8b" else gzip.compress(data))
    return run


def test_a_runs_own_trace_given_directly_counts_as_the_run(tmp_path):
    run = _run_copy(tmp_path, trace=FIXTURES / "kineto_cpu_small.json.gz")
    target = open_target(run / rundir.TRACE)
    assert target.kind is Kind.RUN_DIR and target.where == run
    assert target.description == "the trace of a tbd run directory (pytorch)"
    assert target.kineto_trace == run / rundir.TRACE  # where `tbd kernels` looks for CUPTI counters


def test_an_mxnet_runs_trace_is_its_run_and_not_a_kineto_trace(tmp_path):
    run = _run_copy(tmp_path, trace=FIXTURES / "mxnet_cpu_small.json.gz", framework="mxnet")
    target = open_target(run / rundir.CHROME_TRACE)
    assert (target.kind, target.framework, target.kineto_trace) == (Kind.RUN_DIR, "mxnet", None)
    assert open_target(run).description == "a tbd run directory (mxnet)"


def test_a_run_of_several_processes_and_one_without_its_profile(tmp_path):
    run = _run_copy(tmp_path, nproc_per_node=2)
    target = open_target(run)
    assert target.kind is Kind.MULTI_RANK_RUN_DIR and target.description == "a tbd run directory (pytorch, 2 ranks)"
    (run / rundir.PROFILE).unlink()
    assert not open_target(run).has_profile


def test_a_sweep_and_a_comparison_as_tbd_writes_them(tmp_path):
    point = SweepPoint(8, "ok", None, "b8", 1397.0, "images/s", 0.0057, None, 3.7, 50.0, True,
                       {"weights": 523848, "allocator_peak": 2624320})
    folder = tmp_path / "sweep"
    rundir.atomic_write_json(folder / "sweep.json", Sweep("resnet50", "pytorch", "cpu", "AMD EPYC", "test", "list",
                                                          [point], 8, None).to_dict())
    assert (open_target(folder).kind, open_target(folder).description) == (Kind.SWEEP_DIR, "a tbd sweep")
    assert open_target(folder / "sweep.json").kind is Kind.SWEEP_JSON
    comparison = compare_profiles([Side(str(RUN), load_profile(RUN)), Side(str(OTHER), load_profile(OTHER))])
    rundir.atomic_write_json(tmp_path / "ab.json", comparison.to_dict())
    target = open_target(tmp_path / "ab.json")
    assert (target.kind, target.description) == (Kind.COMPARISON_JSON, "a tbd comparison")


@needs_mlperf
def test_mlperf_result_logs_and_submission_folders():
    tinycorp = MLPERF / "tinycorp" / "results" / "tinybox_red" / "resnet"
    log = open_target(tinycorp / "result_0.txt")
    assert (log.kind, log.description) == (Kind.MLPERF_LOG, "an MLPerf Training result log")
    # Red Hat's logs start with 50 kB of launcher output before the first :::MLLOG line.
    red_hat = sorted((MLPERF / "Red_Hat" / "results").glob("*/llama2_70b_lora/result_0.txt"))[0]
    assert open_target(red_hat).kind is Kind.MLPERF_LOG
    expected = sorted(tinycorp.glob("result_*.txt"))
    for folder in (tinycorp, tinycorp.parent, MLPERF / "tinycorp" / "results", MLPERF / "tinycorp"):
        target = open_target(folder)
        assert target.kind is Kind.MLPERF_SUBMISSION, folder
        assert target.description.startswith("an MLPerf Training submission folder")
    assert list(open_target(tinycorp).files) == expected
    assert f"({len(expected)} result logs)" in open_target(tinycorp).description
    # The README speaks of `:::MLLOG {...}` lines without holding one.
    assert sniff(MLPERF.parent / "README.md").kind is Kind.UNKNOWN


def _dawnbench(folder: Path) -> tuple[Path, Path]:
    """A DAWNBench ImageNet training entry as its README lays one out, saved with a BOM and CRLF."""
    entry = {"version": "v1.0", "author": "Stanford DAWN", "authorEmail": "dawn-bench@cs.stanford.edu",
             "framework": "TensorFlow", "codeURL": "https://github.com/stanford-futuredata/dawn-benchmark",
             "model": "ResNet 50", "hardware": "1 K80 / 30 GB / 8 CPU (Google Cloud)", "costPerHour": 0.90,
             "timestamp": "2017-08-14", "misc": {}}
    rows = ["epoch\thours\ttop1Accuracy\ttop5Accuracy", "1\t0.07166666666666667\t33.57\t68.93",
            "2\t0.1461111111111111\t52.51\t72.48"]
    json_path, tsv_path = folder / "dawn_resnet50_1k80-gc_tensorflow.json", folder / "dawn_resnet50_1k80-gc_tensorflow.tsv"
    json_path.write_bytes("\ufeff".encode() + json.dumps(entry, indent=4).replace("\n", "\r\n").encode())
    tsv_path.write_bytes("\ufeff".encode() + "\r\n".join(rows).encode() + b"\r\n")
    return json_path, tsv_path


def test_a_dawnbench_entry_by_its_json_or_its_tsv(tmp_path):
    json_path, tsv_path = _dawnbench(tmp_path)
    for path in (json_path, tsv_path):
        target = open_target(path)
        assert (target.kind, target.description) == (Kind.DAWNBENCH_ENTRY, "a DAWNBench entry")
        assert target.files == (json_path, tsv_path)


def _unknown(path) -> str:
    with pytest.raises(UsageError) as caught:
        open_target(path)
    line = caught.value.one_line()
    assert "\n" not in line and "a Kineto trace" in caught.value.hint  # the hint lists what tbd reads
    return str(caught.value)


def test_what_tbd_does_not_read_is_one_line_saying_what_it_is(tmp_path):
    assert _unknown(tmp_path / "nope.json") == f"{tmp_path / 'nope.json'}: no such file or folder"
    (tmp_path / "empty.json").write_bytes(b"")
    assert "an empty file" in _unknown(tmp_path / "empty.json")
    (tmp_path / "blob.json.gz").write_bytes(bytes(range(256)) * 64)
    assert "a binary file" in _unknown(tmp_path / "blob.json.gz")
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    assert "a corrupt gzip file" in _unknown(tmp_path / "bad.json.gz")
    (tmp_path / "other.json").write_text('{"some": "thing"}')
    assert "a JSON file: not a tbd profile, sweep or comparison" in _unknown(tmp_path / "other.json")
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    for name, text in (("notes.txt", "hello\n"), ("data.csv", "a,b\n1,2\n"), ("script.py", "print(1)\n")):
        (unrelated / name).write_text(text)
    assert "a folder with no trace files" in _unknown(unrelated)
    assert "a folder with no trace files" in _unknown(FIXTURES / "multirank")  # scripts and expected.json


def test_a_bare_array_of_events_is_a_kineto_trace_and_other_arrays_are_not(tmp_path):
    """PyTorch 1.8's profiler wrote Chrome's array form, no "traceEvents" object around the events."""
    bare = tmp_path / "bare.json"
    bare.write_text('[{"ph":"X","cat":"Operator","name":"aten::empty","pid":1,"tid":"2","ts":10,"dur":7}]')
    assert open_target(bare).kind is Kind.KINETO_TRACE
    (tmp_path / "numbers.json").write_text("[1, 2, 3]")
    assert "a JSON file: not a tbd profile" in _unknown(tmp_path / "numbers.json")


def test_a_fifo_is_told_without_blocking(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    assert "a FIFO (named pipe)" in _unknown(fifo)


def test_a_truncated_trace_is_still_a_trace_and_its_reader_says_what_is_wrong(tmp_path):
    whole = gzip.decompress((FIXTURES / "kineto_cpu_small.json.gz").read_bytes())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(whole)[:2000])
    assert open_target(cut).kind is Kind.KINETO_TRACE


def test_one_table_of_size_caps_for_every_result_reader(tmp_path, monkeypatch):
    assert targets.MAX_RESULT_BYTES == {Kind.PROFILE_JSON: 256 << 20, Kind.SWEEP_JSON: 64 << 20,
                                        Kind.COMPARISON_JSON: 64 << 20, Kind.TTA_JSON: 256 << 20}
    monkeypatch.setitem(targets.MAX_RESULT_BYTES, Kind.PROFILE_JSON, 1000)
    with pytest.raises(ResultFormatError, match="far too large for a profile.json"):
        load_profile(RUN)
    monkeypatch.setitem(targets.MAX_RESULT_BYTES, Kind.SWEEP_JSON, 10)
    (tmp_path / "sweep.json").write_text('{"schema": "tbd.sweep/1"}')
    with pytest.raises(ResultFormatError, match="far too large for a sweep.json"):
        load_sweep(tmp_path)


# --- each command through it -------------------------------------------------------------------

def _cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 1
    return code, err


def test_a_kind_a_command_does_not_take_names_the_command_that_does(tmp_path, capsys):
    folder = tmp_path / "sweep"
    point = SweepPoint(8, "ok", None, "b8", 1397.0, "images/s", 0.0057, None, 3.7, 50.0, True, {})
    rundir.atomic_write_json(folder / "sweep.json", Sweep("resnet50", "pytorch", "cpu", None, "test", "list", [point],
                                                          8, None).to_dict())
    code, err = _cli(capsys, "analyze", folder / "sweep.json")
    assert code == 2 and f"{folder / 'sweep.json'} is a tbd sweep: `tbd report` reads it" in err
    code, err = _cli(capsys, "report", FIXTURES / "kineto_cpu_small.json.gz")
    assert code == 2 and "is a Kineto trace: `tbd analyze` reads it" in err
    code, err = _cli(capsys, "kernels", FIXTURES / "multirank" / "gloo_cpu_ddp")
    assert code == 2 and "is a folder of 2 per-rank Kineto traces: `tbd analyze` reads it" in err
    code, err = _cli(capsys, "analyze", RUN / "profile.json")
    assert code == 2 and "is a tbd profile.json: `tbd report` reads it" in err
    code, err = _cli(capsys, "compare", RUN, FIXTURES / "mxnet_cpu_small.json.gz")
    assert code == 2 and "is an MXNet profiler dump: tbd reads one in the run directory" in err
    json_path, _ = _dawnbench(tmp_path)
    code, err = _cli(capsys, "analyze", json_path)
    assert code == 2 and "is a DAWNBench entry: `tbd tta` reads it" in err


@needs_mlperf
def test_an_mlperf_log_is_named_and_pointed_at_tbd_tta(capsys):
    log = MLPERF / "tinycorp" / "results" / "tinybox_red" / "resnet" / "result_0.txt"
    for command in ("analyze", "report", "kernels"):
        code, err = _cli(capsys, command, log)
        assert code == 2 and "is an MLPerf Training result log: `tbd tta` reads it" in err


def test_report_and_the_api_read_a_run_through_its_trace_and_a_run_without_profile_json(tmp_path, capsys):
    import tbd

    run = _run_copy(tmp_path, trace=FIXTURES / "kineto_cpu_small.json.gz")
    assert tbd.load_profile(run / rundir.TRACE) == tbd.load_profile(run) == load_profile(run)
    (run / rundir.PROFILE).unlink()
    partial = tbd.load_profile(run)
    assert partial.status == "partial" and any("profile.json was never written" in n for n in partial.notes)
    with pytest.raises(UsageError, match="is a Kineto trace: `tbd analyze` reads it"):
        tbd.load_profile(FIXTURES / "kineto_cpu_small.json.gz")


# --- `tbd analyze RUN_DIR` with the trace options ----------------------------------------------

def test_analyze_run_dir_applies_peak_flops_labelled_as_the_users(tmp_path, capsys):
    # Before: profile_from_run_dir was called without the options; --peak-flops 1e12 was dropped.
    run = _run_copy(tmp_path, trace=FIXTURES / "kineto_cpu_small.json.gz")
    out = tmp_path / "p.json"
    code, _ = _cli(capsys, "analyze", run, "--peak-flops", "1e12", "--json", out)
    assert code == 0
    flop = json.loads(out.read_text())["metrics"]["flop_util_pct"]
    assert flop["peak_flops"] == 1e12 and flop["peak_source"] == "user"
    # FLOP utilization = FLOPs / (peak x busy time), from the figures it prints beside it.
    assert flop["value"] == pytest.approx(100 * flop["flops"] / (1e12 * flop["busy_s"]), rel=1e-12)
    recorded = json.loads((RUN / "profile.json").read_text())["metrics"]["flop_util_pct"]
    assert recorded["peak_source"] != "user"  # the run's own profile is left as it was


def test_analyze_run_dir_refuses_samples_per_step_and_a_cpu_runs_sm_clock(tmp_path, capsys):
    run = _run_copy(tmp_path, trace=FIXTURES / "kineto_cpu_small.json.gz")
    code, err = _cli(capsys, "analyze", run, "--samples-per-step", "32")
    assert code == 2 and "--samples-per-step does not apply to" in err and "recorded its own batch" in err
    code, err = _cli(capsys, "analyze", run, "--sm-clock-mhz", "1410")
    assert code == 2 and "--sm-clock-mhz does not apply to" in err and "ran on the CPU" in err
    several = _run_copy(tmp_path / "ranks", nproc_per_node=2)  # said before any rank is read
    code, err = _cli(capsys, "analyze", several, "--sm-clock-mhz", "1410")
    assert code == 2 and "--sm-clock-mhz does not apply to" in err


def test_analyze_gpu_run_dir_takes_the_sm_clock_as_the_trace_path_does(tmp_path, capsys):
    trace = FIXTURES / "kineto_cuda_synthetic.json"
    run = _run_copy(tmp_path, trace=trace, device="cuda")
    environment = json.loads((run / rundir.ENVIRONMENT).read_text())
    props = json.loads(trace.read_text())["deviceProperties"][0]  # the synthetic A100-like GPU
    environment["gpu"] = {"name": props["name"], "vendor": "nvidia", "index": 0,
                          "compute_capability": [props["computeMajor"], props["computeMinor"]],
                          "sm_count": props["numSms"], "memory_bytes": props["totalGlobalMem"], "max_sm_clock_hz": None}
    (run / rundir.ENVIRONMENT).write_text(json.dumps(environment))
    as_run, as_trace = tmp_path / "run.json", tmp_path / "trace.json"
    assert _cli(capsys, "analyze", run, "--sm-clock-mhz", "1410", "--json", as_run)[0] == 0
    assert _cli(capsys, "analyze", trace, "--sm-clock-mhz", "1410", "--json", as_trace)[0] == 0
    run_flop, trace_flop = (json.loads(p.read_text())["metrics"]["flop_util_pct"] for p in (as_run, as_trace))
    assert run_flop["peaks_by_precision"] == trace_flop["peaks_by_precision"]
    assert run_flop["peaks_by_precision"]["fp32"] > 0
    assert json.loads(as_run.read_text())["environment"]["gpu"]["max_sm_clock_hz"] == 1410e6
