"""The one loader behind every command's TARGET: what tbd.core.targets.open_target found, read by its kind's reader.

Each command takes some kinds (`TAKES`); any other gets one line saying what the path is and
which command reads it (`READ_BY`). A run directory is analysed again by `tbd analyze` (the
options given apply, or are refused: `_reanalysed`) and read from its profile.json by the others,
or, when the parent process died before writing it, from its raw records, marked partial.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

from tbd.cli.run_analysis import (
    RankProfile,
    load_profile,
    profile_from_run_dir,
    profile_from_trace,
    profiles_from_trace_folder,
)
from tbd.cli.sweep_run import load_sweep
from tbd.core.comparison import Comparison
from tbd.core.errors import UsageError
from tbd.core.profile_result import PARTIAL, Profile
from tbd.core.sweep_result import Sweep
from tbd.core.targets import Kind, Target, open_target, read_result
from tbd.core.tta_result import TtaResult

Result = Union[Profile, Sweep, Comparison, TtaResult]
Loaded = Union[Profile, Sweep, Comparison, TtaResult, list[RankProfile]]

# Who asks (a command, or the API's tbd.load_profile).
ANALYZE, KERNELS, COMPARE, REPORT, API = "tbd analyze", "tbd kernels", "tbd compare", "tbd report", "tbd.load_profile"
_RUNS = {Kind.RUN_DIR, Kind.MULTI_RANK_RUN_DIR}
TAKES = {
    ANALYZE: _RUNS | {Kind.KINETO_TRACE, Kind.TRACE_FOLDER},
    KERNELS: _RUNS | {Kind.PROFILE_JSON, Kind.KINETO_TRACE},
    COMPARE: _RUNS | {Kind.PROFILE_JSON, Kind.KINETO_TRACE},
    REPORT: _RUNS | {Kind.PROFILE_JSON, Kind.SWEEP_DIR, Kind.SWEEP_JSON, Kind.COMPARISON_JSON, Kind.TTA_JSON},
    API: _RUNS | {Kind.PROFILE_JSON},
}
_TTA = "`tbd tta` reads it"
READ_BY = {
    Kind.PROFILE_JSON: "`tbd report` reads it (`tbd kernels` and `tbd compare` too)",
    Kind.SWEEP_DIR: "`tbd report` reads it",
    Kind.SWEEP_JSON: "`tbd report` reads it",
    Kind.COMPARISON_JSON: "`tbd report` reads it",
    Kind.TTA_JSON: "`tbd report` reads it",
    Kind.KINETO_TRACE: "`tbd analyze` reads it (`tbd kernels` and `tbd compare` too)",
    Kind.TRACE_FOLDER: "`tbd analyze` reads it",
    Kind.MXNET_TRACE: "tbd reads one in the run directory `tbd profile --framework mxnet` wrote "
                      "(`tbd analyze RUN_DIR`)",
    Kind.TENSORFLOW_TRACE: "tbd reads one in the run directory `tbd profile --framework tensorflow` wrote "
                           "(`tbd analyze RUN_DIR`)",
    Kind.MLPERF_LOG: _TTA,
    Kind.MLPERF_SUBMISSION: _TTA,
    Kind.DAWNBENCH_ENTRY: _TTA,
}
_PARTIAL_NOTE = "profile.json was never written (the tbd process stopped first): analysed from the raw records"


def load_target(target: Target, reader: str, **options: Any) -> Loaded:
    """What `target` holds, read for `reader` (ANALYZE, KERNELS, COMPARE, REPORT or API).

    `options` (peak_flops, sm_clock_mhz, samples_per_step, memory_bandwidth; None when not given) apply to what is
    analysed here: a trace or a folder of them, and, for ANALYZE, a run directory.

    Returns:
        a Profile; a Sweep or Comparison (REPORT); a folder of traces' RankProfiles (ANALYZE).
    Raises:
        UsageError: `reader` does not take this kind (the line says which does), or an option
            cannot apply to it.
        ResultFormatError, TraceFormatError: what the path holds cannot be read.
    """
    kind = target.kind
    if kind not in TAKES[reader]:
        raise UsageError(f"{target.path} is {target.description}: {READ_BY.get(kind, 'tbd does not read it')}")
    given = {k: v for k, v in options.items() if v is not None}
    if kind in _RUNS:
        if reader == ANALYZE:
            return _reanalysed(target, **given)
        if target.has_profile:
            return load_profile(target.where)
        return profile_from_run_dir(target.where, status=PARTIAL, extra_notes=[_PARTIAL_NOTE])
    if kind is Kind.PROFILE_JSON:
        return load_profile(target.where)
    if kind in (Kind.SWEEP_DIR, Kind.SWEEP_JSON):
        return load_sweep(target.where)
    if kind is Kind.COMPARISON_JSON:
        hint = "give a comparison saved by `tbd compare --out`"
        return Comparison.from_dict(read_result(target.where, Kind.COMPARISON_JSON, hint))
    if kind is Kind.TTA_JSON:
        return TtaResult.from_dict(read_result(target.where, Kind.TTA_JSON, "give a result saved by `tbd tta --out`"))
    if kind is Kind.KINETO_TRACE:
        return profile_from_trace(target.where, **given)
    return profiles_from_trace_folder(target.where, **given)  # Kind.TRACE_FOLDER


def _reanalysed(target: Target, peak_flops: float | None = None, sm_clock_mhz: float | None = None,
                samples_per_step: float | None = None, memory_bandwidth: float | None = None) -> Profile:
    """`tbd analyze RUN_DIR`: the run analysed again from its raw records, with the options given.

    --peak-flops applies: the user's FP32 peak replaces the device model's (labelled as theirs),
    as `tbd profile --peak-flops` would have; so does --memory-bandwidth (the roofline's slope, labelled
    as theirs). --sm-clock-mhz applies to a GPU run (the SM model at
    that clock) and is refused on a CPU run by the reader. --samples-per-step is refused: a tbd run
    knows its batch (raw/workload.json), and a second figure for it would contradict the timing
    window's own throughput.
    """
    if samples_per_step is not None:
        raise UsageError(f"--samples-per-step does not apply to {target.path}, {target.description}: the run "
                         "recorded its own batch", hint="leave it out; it is for traces that tbd did not record")
    if sm_clock_mhz is not None and target.device == "cpu":
        # Said here as well as by the reader: a multi-rank run reads each rank on its own, and a
        # rank that cannot be read becomes a note, not this line.
        raise UsageError(f"--sm-clock-mhz does not apply to {target.path}: the run recorded no GPU (it ran on the CPU)",
                         hint="pass --peak-flops for the CPU's peak")
    return profile_from_run_dir(target.where, peak_flops=peak_flops, sm_clock_mhz=sm_clock_mhz,
                                memory_bandwidth=memory_bandwidth)


def load_result(target: str | os.PathLike) -> Result:
    """What `tbd report TARGET` renders: the Profile, Sweep or Comparison at `target`.

    Raises:
        UsageError: `target` does not exist, or is not a run, profile, sweep or comparison.
        ResultFormatError: the file is corrupt or of an unknown schema (the key named).
    """
    return load_target(open_target(target), REPORT)


def profile_at(path: str | os.PathLike) -> Profile:
    """The Profile of a run directory or a profile.json (any name), validated: `tbd.load_profile`."""
    return load_target(open_target(Path(path)), API)
