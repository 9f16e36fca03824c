"""`tbd profile --ncu N`: measure the top N ranked kernels under Nsight Compute and merge the counters.

After the run's profile.json is written, one ncu session (analysis.ncu) repeats the run in a
second child with the same pinned warm-up and windows, the framework's tracer off (TBD_NO_TRACER=1:
ncu and the tracer cannot both hold CUPTI), and measures the chosen launches of the first traced
iteration. Its report is printed as CSV (profilers.ncu_csv) and merged into the profile's rows as
measured beside analytic; profile.json is rewritten with a note. Files under RUN_DIR/ncu/:
report.ncu-rep, launches.csv, ncu.log (ncu's and the repeated run's output) and run/ (the repeated
run's own directory).

When there is nothing to measure (a CPU run, no ranked CUDA kernel) or no ncu to measure with, the
profile says so in a note and nothing else changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from tbd.analysis.assemble import ncu_target
from tbd.analysis.counters import MeasuredLaunch, merged_profile
from tbd.analysis.ncu import NcuPlan, csv_export_command, ncu_plan
from tbd.core import raw_records, rundir
from tbd.core.errors import TbdError, WorkloadError
from tbd.core.profile_result import Profile
from tbd.profilers import ncu_csv

NCU_DIR = "ncu"
#: Where CUDA installs put ncu when it is not on PATH.
_NCU_HOMES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
NCU_VARIABLE = "TBD_NCU"  # an ncu executable to use instead of the one on PATH


def find_ncu() -> str | None:
    """The ncu executable: $TBD_NCU, else ncu on PATH, else a CUDA install's; None when there is none."""
    given = os.environ.get(NCU_VARIABLE)
    if given:
        return given
    found = shutil.which("ncu")
    if found:
        return found
    return next((p for p in _NCU_HOMES if os.access(p, os.X_OK)), None)


def _target(run_dir: Path) -> list[str] | None:
    """The command that repeats the run's windows, with this interpreter's tbd and a real --out."""
    log = rundir.iteration_log_from_json(raw_records.read_record(run_dir, rundir.ITERATIONS, required=True),
                                         str(run_dir / rundir.ITERATIONS))
    spec = raw_records.read_record(run_dir, rundir.SPEC, required=True)
    argv = ncu_target(spec, log)
    if argv is None:
        return None
    tbd = argv.index("tbd")
    argv[tbd:tbd + 1] = [sys.executable, "-m", "tbd.cli"]
    argv[argv.index("RUN_DIR-ncu")] = str(run_dir / NCU_DIR / "run")
    return argv + ["--force"]


def _with_note(run_dir: Path, profile: Profile, note: str) -> Profile:
    profile = replace(profile, notes=[*profile.notes, note])
    rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
    return profile


def measure_with_ncu(profile: Profile, run_dir: Path, top: int, *, ncu: str | None = None,
                     timeout_s: float | None = None, announce=None) -> Profile:
    """Measure the `top` ranked kernels of the run in `run_dir` and merge them (module docstring).

    announce: called with one line before the (long) ncu session starts.
    Returns the profile written to RUN_DIR/profile.json (with the counters, or a note why none).
    Raises WorkloadError when ncu or the repeated run fails (profile.json keeps the run's figures
    and a note naming the log).
    """
    ncu = ncu or find_ncu()
    target = _target(run_dir)
    if target is None:
        return _with_note(run_dir, profile, "--ncu: nothing measured: the run cannot be repeated (no iteration log)")
    out = run_dir / NCU_DIR
    plan = ncu_plan(profile, top, target, str(out / "report"), ncu=ncu or "ncu")
    if isinstance(plan, str):
        return _with_note(run_dir, profile, f"--ncu: nothing measured: {plan}")
    if ncu is None:
        return _with_note(run_dir, profile, "--ncu: nothing measured: Nsight Compute (ncu) is not on PATH; install "
                                            f"it with the CUDA toolkit, or set {NCU_VARIABLE} to its path")
    out.mkdir(exist_ok=True)
    if announce is not None:
        announce(f"measuring {len(plan.rows)} ranked kernels ({plan.launch_count} launches) under Nsight Compute: "
                 f"a second run of the same windows, output in {out / 'ncu.log'}")
    _run(plan.argv, out / "ncu.log", timeout_s, run_dir, profile, "ncu")
    csv = out / "launches.csv"
    _run(csv_export_command(str(out / "report"), log_file=str(csv), ncu=ncu), out / "export.log", timeout_s,
         run_dir, profile, "ncu --import")
    try:
        launches = ncu_csv.measured_launches(csv)
    except TbdError as exc:
        _with_note(run_dir, profile, f"--ncu: the export could not be read ({exc.one_line()})")
        raise
    merged, unmatched = merged_profile(profile, launches, "ncu")
    return _with_note(run_dir, merged, _summary(plan, launches, unmatched, out))


def _summary(plan: NcuPlan, launches: list[MeasuredLaunch], unmatched: int, out: Path) -> str:
    return (f"--ncu: {len(launches)} launches of {len(plan.functions)} kernel functions measured by Nsight Compute in "
            f"the first traced iteration (asked {plan.launch_count}; {unmatched} matched no kernel group), merged as "
            f"measured beside analytic; report in {out}")


def _run(argv: list[str], log: Path, timeout_s: float | None, run_dir: Path, profile: Profile, what: str) -> None:
    with open(log, "wb") as sink:
        try:
            code = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            code = None
        except OSError as exc:
            _with_note(run_dir, profile, f"--ncu: {what} could not start ({exc.strerror or exc})")
            raise WorkloadError(f"{what} could not start: {exc.strerror or exc}",
                                hint=f"check {NCU_VARIABLE} or the ncu on PATH") from None
    if code != 0:
        why = f"ran past {timeout_s:g} s" if code is None else f"exited with code {code}"
        _with_note(run_dir, profile, f"--ncu: {what} {why}; nothing merged (log: {log})")
        raise WorkloadError(f"{what} {why}; the profile is kept without counters", hint=f"see {log}")
