"""One Nsight Compute session that measures the top ranked kernels of a run (`tbd profile --ncu N`).

Each ranked row carries its own command (analysis.kernel_rows), which measures that one group in
the last traced iteration; running N of them would repeat the workload's warm-up N times. One
session instead selects every launch of the chosen groups' function names in the *first* traced
iteration: the kernel filter is the alternation of their function names (ncu's
`--kernel-name-base function`; a C-linkage name is its own function name), the NVTX filter tbd's
trace window, and `--launch-count` the number of launches with those function names that one
traced iteration makes (their groups' calls over the traced iterations). In a stable phase every
iteration launches the same kernels, so the first that many matches are that iteration's. Other
template instances of the same function are measured along (they pass the same filter) and merge
into their own rows.

Pure: the profile's rows in, the plan and its argv out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tbd.analysis.ncu_command import DEFAULT_METRICS, NVTX_RANGE, kernel_function_name, name_regex, ncu_argv
from tbd.core.profile import KernelRow, Profile


@dataclass(frozen=True)
class NcuPlan:
    rows: list[KernelRow]  # the ranked groups aimed at, longest first
    functions: list[str]  # their function names, as the kernel filter's alternatives
    launch_count: int  # launches of those function names in one traced iteration
    argv: list[str]  # the ncu command, the target last


def ranked_rows(profile: Profile, top: int) -> list[KernelRow]:
    """The `top` longest groups of both rankings that have a measuring command (CUDA groups)."""
    seen, rows = set(), []
    for row in sorted(profile.low_util_kernels + profile.low_bandwidth_kernels, key=lambda r: -r.time_s):
        if row.name not in seen and row.ncu and row.ncu.get("command"):
            seen.add(row.name)
            rows.append(row)
    return rows[:top]


def ncu_plan(profile: Profile, top: int, target: list[str], report: str, *, ncu: str = "ncu",
             metrics: tuple[str, ...] = DEFAULT_METRICS) -> NcuPlan | str:
    """The session measuring the `top` ranked groups, or why there is none (a sentence).

    target: the command that repeats the run's windows (analysis.assemble.ncu_target, filled in).
    report: the .ncu-rep path ncu writes (`ncu_command.csv_export_command` prints it as CSV).
    """
    rows = ranked_rows(profile, top)
    if not rows:
        return "no ranked CUDA kernel to measure (a CPU run, or no kernel below the averages)"
    window = profile.iterations.trace_window if profile.iterations else None
    if not window:
        return "the run has no trace window to count launches in"
    iterations = window[-1] - window[0] + 1
    functions = list(dict.fromkeys(kernel_function_name(r.name) for r in rows))
    wanted = set(functions)
    calls = sum(r.calls for r in profile.kernels if kernel_function_name(r.name) in wanted)
    count = max(1, math.ceil(calls / iterations))
    alternatives = "|".join(name_regex(f)[1:-1] for f in functions)  # name_regex anchors each: ^...$
    argv = ncu_argv(f"^({alternatives})$", "function", None, count, NVTX_RANGE, metrics, ncu=ncu)
    argv += ["--export", report, "--force-overwrite"]
    return NcuPlan(rows, functions, count, argv + list(target))
