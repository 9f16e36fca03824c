"""Measured counters beside the analytic figures: ncu launches or CUPTI ranges merged into kernel rows.

Pure. A measured launch is matched to a kernel group by name: exactly (a CUPTI range is named by
Kineto's demangler, as the trace's kernels are); else by `canonical_name`, which reads ncu's
demangler and Kineto's alike (ncu prints "void f<(int)4, (bool)0>(int, T2)" where Kineto prints
"void f<4, false>(int, float*)"); else by the bare function name (`kernel_function_name`, what
ncu prints with its "function" name base) when exactly one group has it. A launch that matches
no group, or only groups that cannot be told apart, is counted as unmatched, never guessed.
Measured work is per launch, so it is set against the group's analytic FLOPs and bytes per call:
a kernel's calls of one iteration do the same work when their shapes repeat, which is what the
comparison assumes, and what the difference shows when they do not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from tbd.analysis.ncu_command import kernel_function_name
from tbd.core.profile import KernelRow, Profile


@dataclass(frozen=True)
class MeasuredLaunch:
    """One profiled launch: its kernel name and what the counters say it did (None: not measured)."""

    name: str
    flops: float | None  # FP16 + FP32 + FP64 FLOPs from the SASS instruction counters
    flops_by_precision: dict[str, float]
    tensor_ops: float | None  # tensor-pipe work, where the counter gives it
    dram_bytes: float | None


# ncu's demangler (EDG style) against Kineto's (GCC's): integer literals cast, "(bool)0", lambdas.
_INT_CAST = re.compile(r"\((?:unsigned |signed )?(?:char|short|int|long long|long)\)(?=-?\d)")
_LITERAL_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NCU_LAMBDA = re.compile(r"\[lambda\(([^()\[\]]*)\) \(instance (\d+)\)\]")
_CONST_BEFORE = re.compile(r"\bconst ((?:\w+::)*\w+)")
_SPACE = re.compile(r"\s*([^\w\s])\s*")
_INNER_VOID = re.compile(r"(?<=[<,])void ")
_PARAM_LIST = re.compile(r"(?<=[\w>\])])\((?:[^()]|\(\))+\)")


def canonical_name(name: str) -> str:
    """`name` as both demanglers agree on it: no "void ", no parameter list (ncu prints the parameters
    as template placeholders: "(int, T2, T3)"), casts on integer literals and literal suffixes dropped
    ("(int)4", "4u" -> "4"), "(bool)0/1" as false/true, ncu's "[lambda(int) (instance 1)]" as
    "{lambda(int)#1}", "<unnamed>" and "(anonymous namespace)" alike, "const T" as "T const", spaces only
    between two words ("char *" and "char*", "> >" and ">>" alike), and the parameter lists of the
    functions named inside template arguments emptied ("gpu_kernel_impl<F>(at::TensorIteratorBase&,
    F const&)" and ncu's "void gpu_kernel_impl<F>(at::TensorIteratorBase &, const T1 &)" alike)."""
    text = " ".join(name.split()).removeprefix("void ")
    text = text.replace("<unnamed>", "{anonymous}").replace("(anonymous namespace)", "{anonymous}")
    text = text.replace("(bool)0", "false").replace("(bool)1", "true")
    text = _NCU_LAMBDA.sub(r"{lambda(\1)#\2}", text)
    text = _LITERAL_SUFFIX.sub(r"\1", _INT_CAST.sub("", text))
    text = _CONST_BEFORE.sub(r"\1 const", text)
    text = _INNER_VOID.sub("", _SPACE.sub(r"\1", text))
    while True:  # parameter lists emptied, innermost first: ncu prints them with placeholders ("const T1&")
        emptied = _PARAM_LIST.sub("()", text)
        if emptied == text:
            break
        text = emptied
    return text.removesuffix("()")


def merge_measured(rows: list[KernelRow], launches: list[MeasuredLaunch], source: str) -> tuple[list[KernelRow], int]:
    """`rows` with `measured` set where launches match (module docstring); and how many launches matched no row.

    `rows` must be every group a launch may belong to: a launch matched by its function name alone goes
    to the one row that has it, which a subset (a ranking) may hold where the whole table holds several.
    For a profile's lists use `merge_measured_lists`."""
    by_name = {r.name for r in rows}
    by_canonical = _unique((canonical_name(r.name), r.name) for r in rows)
    by_function = _unique((kernel_function_name(r.name), r.name) for r in rows)
    matched: dict[str, list[MeasuredLaunch]] = {}
    unmatched = 0
    for launch in launches:
        if launch.name in by_name:
            key = launch.name
        else:
            canonical = canonical_name(launch.name)
            key = by_canonical[canonical] if canonical in by_canonical \
                else by_function.get(kernel_function_name(launch.name))
        if key is None:
            unmatched += 1
            continue
        matched.setdefault(key, []).append(launch)
    return [replace(r, measured=_measured(r, matched[r.name], source)) if r.name in matched else r
            for r in rows], unmatched


def merge_measured_lists(row_lists: list[list[KernelRow]], launches: list[MeasuredLaunch],
                         source: str) -> tuple[list[list[KernelRow]], int]:
    """`merge_measured` over several lists of one profile's rows (every group, the rankings) at once: a
    launch is matched among all their groups, so a row merges the same launches in every list (a
    ranking alone may hold one instance of a function name where the whole table holds several)."""
    union = list({r.name: r for rows in row_lists for r in rows}.values())
    merged, unmatched = merge_measured(union, launches, source)
    measured = {r.name: r.measured for r in merged if r.measured is not None}
    return [[replace(r, measured=measured[r.name]) if r.name in measured else r for r in rows]
            for rows in row_lists], unmatched


def merged_profile(profile: Profile, launches: list[MeasuredLaunch], source: str) -> tuple[Profile, int]:
    """`profile` with `launches` merged into every row list (`merge_measured_lists`); and how many
    launches matched no row."""
    (kernels, low, low_bw), unmatched = merge_measured_lists(
        [profile.kernels, profile.low_util_kernels, profile.low_bandwidth_kernels], launches, source)
    return replace(profile, kernels=kernels, low_util_kernels=low, low_bandwidth_kernels=low_bw), unmatched


def _unique(pairs) -> dict[str, str | None]:
    """key -> the one row name with it; None for a key that several rows share."""
    out: dict[str, str | None] = {}
    for key, name in pairs:
        out[key] = name if out.get(key, name) == name else None
    return out


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _difference_pct(measured: float | None, analytic: float | None) -> float | None:
    if measured is None or analytic is None or analytic <= 0:
        return None
    return 100.0 * (measured - analytic) / analytic


def _measured(row: KernelRow, launches: list[MeasuredLaunch], source: str) -> dict:
    flops = _mean([x.flops for x in launches])
    dram = _mean([x.dram_bytes for x in launches])
    analytic_flops = row.flops / row.calls if row.flops is not None and row.calls else None
    analytic_bytes = row.bytes / row.calls if row.bytes is not None and row.calls else None
    precisions = sorted({p for x in launches for p in x.flops_by_precision})
    return {"source": source, "launches": len(launches), "flops": flops,
            "flops_by_precision": {p: _mean([x.flops_by_precision.get(p) for x in launches]) for p in precisions},
            "tensor_ops": _mean([x.tensor_ops for x in launches]), "dram_bytes": dram,
            "analytic_flops": analytic_flops, "analytic_bytes": analytic_bytes,
            "flops_difference_pct": _difference_pct(flops, analytic_flops),
            "bytes_difference_pct": _difference_pct(dram, analytic_bytes),
            "intensity": flops / dram if flops is not None and dram else None}
