"""`tbd profile --ncu N` after the run: the one Nsight Compute session, and the merge of its counters.

No GPU or ncu here: a stand-in `ncu` (a script written below) records its argv, writes the report
file `--export` names, and for `--import` writes a CSV in ncu's raw-page layout with counters
chosen here. What is checked is tbd's side: the session's filters and launch count, the repeated
run it targets, the measured figures merged (equal to the CSV's counters), the notes, and that
profile.json is rewritten. That real ncu accepts these flags is for a CUDA machine to show.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace

import numpy as np
import pytest
from testpaths import FIXTURES

from tbd.cli.ncu_measure import measure_with_ncu
from tbd.cli.run_analysis import profile_from_trace
from tbd.core import rundir
from tbd.core.errors import WorkloadError
from tbd.core.profile_result import Iterations, Profile
from tbd.core.records import IterationLog

FAKE_NCU = """#!{python}
import json, os, shutil, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if "--import" in args:
    shutil.copy(os.environ["FAKE_NCU_CSV"], args[args.index("--log-file") + 1])
else:
    open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
sys.exit(int(os.environ.get("FAKE_NCU_EXIT", "0")))
"""
OPS = ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")  # a total needs all three precisions
HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum",'
        + ",".join(f'"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"' for op in OPS))
UNITS = ",".join(['""'] * 11) + ',"byte","Kbyte",' + ",".join(['"inst"'] * len(OPS))
SGEMM, TF32 = "volta_sgemm_64x32_sliced1x4_nn", "ampere_tf32_s1688gemm_64x64_sliced1x2_ldg8_tn"


def _launch(i: int, name: str, read: int, write_kb: int, fadd: int, fmul: int, ffma: int) -> str:
    return f'"{i}","7","python","h","{name}","1","7","(128, 1, 1)","(8, 4, 1)","0","8.0",' \
           f'"{read}","{write_kb}","{fadd}","{fmul}","{ffma}","0","0","0","0","0","0"'


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A finished CUDA run directory whose profile is the synthetic A100 trace's, and a stand-in ncu."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = {"model": "resnet50", "framework": "pytorch", "batch": 8, "device": "cuda:0", "size": "test",
            "precision": "fp32"}
    rundir.atomic_write_json(run_dir / rundir.SPEC, spec)
    log = IterationLog(times_ns=np.full(10, 1_000_000), warmup=5, warmup_detected=True, stable=True,
                       timing_window=(5, 7), trace_window=(8, 9), timing_window_ns=3_000_000)
    rundir.atomic_write_json(run_dir / rundir.ITERATIONS, rundir.iteration_log_to_json(log))
    profile = profile_from_trace(FIXTURES / "kineto_cuda_synthetic.json")
    profile = replace(profile, spec=spec, iterations=Iterations(warmup=5, warmup_s=0.005, warmup_detected=True,
                                                                stable=True, timing_window=[5, 7],
                                                                trace_window=[8, 9], times_s=[0.001] * 10))
    rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    csv = tmp_path / "export.csv"
    # sgemm: 2·10,000 FFMA + 300 FMUL + 200 FADD thread instructions = 20,500 FP32 FLOPs;
    # DRAM 4,096 B read + 2 KB (2,000 B) written = 6,096 B. The TF32 GEMM: 1,000 FFMA = 2,000 FLOPs.
    csv.write_text("\n".join([HEAD, UNITS, _launch(0, TF32, 1000, 1, 0, 0, 1000),
                              _launch(1, SGEMM, 4096, 2, 200, 300, 10_000)]) + "\n")
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "argv.jsonl"))
    monkeypatch.setenv("FAKE_NCU_CSV", str(csv))
    return run_dir, profile, str(ncu), tmp_path / "argv.jsonl"


def _calls(log) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_one_session_selects_the_ranked_functions_in_one_traced_iteration(run):
    run_dir, profile, ncu, log = run
    measure_with_ncu(profile, run_dir, 3, ncu=ncu)
    session, export = _calls(log)
    # The first three of the default ranking, by time x (1 - Roof %): the TF32 GEMM 12 us x (1 - 3.69 %) =
    # 11.6 us, wgrad 6 us x (1 - 12.4 %) = 5.26 us, the sgemm 3.3 us x (1 - 1.30 %) = 3.26 us (dgrad, 2.63 us,
    # is fourth); one call each over the 2 traced iterations: ceil(3/2) = 2.
    assert session[session.index("--kernel-name") + 1] == f"regex:^({TF32}|wgrad_alg0_engine|{SGEMM})$"
    assert session[session.index("--kernel-name-base") + 1] == "function"
    assert session[session.index("--launch-count") + 1] == "2"
    assert "--launch-skip" not in session
    assert session[session.index("--nvtx-include") + 1] == "tbd@tbd.trace_window/"
    assert session[session.index("--export") + 1] == str(run_dir / "ncu" / "report")
    # the repeated run: this interpreter's tbd, the same windows with the warm-up pinned, tracer off
    target = session[session.index("env"):]
    assert target[:5] == ["env", "TBD_NO_TRACER=1", sys.executable, "-m", "tbd.cli"]
    for flag, value in (("--warmup", "5"), ("--iterations", "3"), ("--trace-iterations", "2"),
                        ("--out", str(run_dir / "ncu" / "run")), ("--device", "cuda:0"), ("--batch", "8")):
        assert target[target.index(flag) + 1] == value
    assert export[:2] == ["--import", str(run_dir / "ncu" / "report.ncu-rep")]


def test_the_counters_are_merged_and_profile_json_rewritten(run):
    run_dir, profile, ncu, _ = run
    merged = measure_with_ncu(profile, run_dir, 5, ncu=ncu)
    sgemm = next(r for r in merged.kernels if r.name == SGEMM)
    assert sgemm.measured["source"] == "ncu" and sgemm.measured["launches"] == 1
    assert sgemm.measured["flops"] == 2 * 10_000 + 300 + 200
    assert sgemm.measured["dram_bytes"] == 4096 + 2000
    tf32 = next(r for r in merged.kernels if r.name == TF32)
    assert tf32.measured["flops"] == 2 * 1000
    note = merged.notes[-1]
    assert note.startswith("--ncu: 2 launches of 5 kernel functions measured by Nsight Compute")
    assert "0 matched no kernel group" in note
    on_disk = Profile.from_dict(json.loads((run_dir / "profile.json").read_text()))
    assert next(r for r in on_disk.kernels if r.name == SGEMM).measured == sgemm.measured
    assert on_disk.notes[-1] == note


def test_a_failing_ncu_keeps_the_profile_and_names_the_log(run, monkeypatch):
    run_dir, profile, ncu, _ = run
    monkeypatch.setenv("FAKE_NCU_EXIT", "3")
    with pytest.raises(WorkloadError, match="exited with code 3"):
        measure_with_ncu(profile, run_dir, 3, ncu=ncu)
    kept = json.loads((run_dir / "profile.json").read_text())
    assert kept["notes"][-1] == f"--ncu: ncu exited with code 3; nothing merged (log: {run_dir / 'ncu' / 'ncu.log'})"
    assert all(r["measured"] is None for r in kept["kernels"])


def test_no_ncu_or_nothing_to_measure_is_a_note(run, monkeypatch):
    run_dir, profile, _, _ = run
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("TBD_NCU", raising=False)
    monkeypatch.setattr("tbd.cli.ncu_measure._NCU_HOMES", ())
    out = measure_with_ncu(profile, run_dir, 3)
    assert out.notes[-1].startswith("--ncu: nothing measured: Nsight Compute (ncu) is not on PATH")
    cpu = replace(profile, low_util_kernels=[], low_bandwidth_kernels=[], recoverable_kernels=[])
    out = measure_with_ncu(cpu, run_dir, 3, ncu="ncu")
    assert out.notes[-1] == ("--ncu: nothing measured: no ranked CUDA kernel to measure (a CPU run, or no kernel "
                             "in the ranking)")
    assert not (run_dir / "ncu").exists()
    assert math.isfinite(out.metrics.gpu_busy_pct.value)
