"""Measured counters beside the analytic figures: ncu launches or CUPTI ranges merged into kernel rows.

Pure. A measured launch is matched to a kernel group by name: exactly, else by the name without
its parameter list (ncu prints "void f<T>(...)" demangled in full, or "f" as the function base,
where Kineto writes the full demangled name). Measured work is per launch, so it is set against
the group's analytic FLOPs and bytes per call: a kernel's calls of one iteration do the same work
when their shapes repeat, which is what the comparison assumes, and what the difference shows
when they do not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from tbd.profile import KernelRow


@dataclass(frozen=True)
class MeasuredLaunch:
    """One profiled launch: its kernel name and what the counters say it did (None: not measured)."""

    name: str
    flops: float | None  # FP16 + FP32 + FP64 FLOPs from the SASS instruction counters
    flops_by_precision: dict[str, float]
    tensor_ops: float | None  # tensor-pipe work, where the counter gives it
    dram_bytes: float | None


_PARAMS = re.compile(r"\(.*\)\s*$")


def base_name(name: str) -> str:
    """A kernel name without a leading "void " and its trailing parameter list."""
    return _PARAMS.sub("", name.removeprefix("void ")).strip()


def merge_measured(rows: list[KernelRow], launches: list[MeasuredLaunch], source: str) -> tuple[list[KernelRow], int]:
    """`rows` with `measured` set where launches match; and how many launches matched no row."""
    by_name = {r.name: r.name for r in rows}
    by_base: dict[str, str] = {}
    for r in rows:
        by_base.setdefault(base_name(r.name), r.name)
    matched: dict[str, list[MeasuredLaunch]] = {}
    unmatched = 0
    for launch in launches:
        key = by_name.get(launch.name) or by_base.get(base_name(launch.name)) or by_base.get(launch.name)
        if key is None:
            unmatched += 1
            continue
        matched.setdefault(key, []).append(launch)
    return [replace(r, measured=_measured(r, matched[r.name], source)) if r.name in matched else r
            for r in rows], unmatched


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
