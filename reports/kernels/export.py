"""`tbd kernels --json | --csv`: the kernel rows for scripts and pandas, as profile.json holds them.

JSON keeps every field (nested launch, ops, ncu, measured); CSV flattens one row per group with
the launch configuration and the first launching op in their own columns, numbers unformatted.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tbd.core.profile_result import KernelRow, Profile
from tbd.reports.csv_cells import csv_text

#: CSV columns: the KernelRow scalars, then the flattened nested fields.
_SCALARS = ("name", "calls", "time_s", "mean_s", "time_share_pct", "flops", "flop_source", "flops_per_s", "precision",
            "util_pct", "util_note", "bytes", "bytes_source", "intensity", "bound", "attainable_flops_per_s",
            "roofline_pct", "bandwidth_util_pct", "roofline_note", "uncounted_calls", "uncounted_time_s",
            "recoverable_s", "recoverable_pct")
_FLAT = ("grid", "block", "registers_per_thread", "shared_memory_bytes", "occupancy_pct", "op", "op_shapes",
         "ncu_command", "measured_flops", "measured_dram_bytes")


def kernels_json(profile: Profile, rows: list[KernelRow]) -> dict[str, Any]:
    """The rows; the default ranking (by the time that could be won back, `recoverable_s`, most first) and the
    recommendations; the paper's Table V rankings with the thresholds they were ranked by (or why none); and the
    groups no ranking holds, their bound unknown. Always every row: --top limits the text only."""
    bw = profile.metrics.memory_bandwidth
    return {"schema": profile.schema, "kernels": [asdict(r) for r in rows],
            "recoverable_kernels": [asdict(r) for r in profile.recoverable_kernels],
            "recommendations": [asdict(r) for r in profile.recommendations],
            "low_util_kernels": [asdict(r) for r in profile.low_util_kernels],
            "low_bandwidth_kernels": [asdict(r) for r in profile.low_bandwidth_kernels],
            "bound_unknown_kernels": [asdict(r) for r in profile.bound_unknown_kernels],
            "flop_threshold_pct": profile.metrics.flop_util_pct.kernel_average_pct,
            "flop_threshold_reason": profile.metrics.flop_util_pct.kernel_average_reason,
            "peaks_by_precision": profile.metrics.flop_util_pct.peaks_by_precision,
            "memory_bandwidth": asdict(bw) if bw else None}


def _dim3(value) -> str:
    return "x".join(map(str, value)) if value else ""


def kernels_csv(rows: list[KernelRow]) -> str:
    """One CSV row per kernel group (`_SCALARS`, then the flattened launch, first op, ncu and measured counters);
    numbers unformatted, text cells that a spreadsheet would run as formulas quoted (`csv_cells`)."""
    return csv_text(_SCALARS + _FLAT, (_row(r) for r in rows))


def _row(r: KernelRow) -> list[str]:
    launch = r.launch or {}
    op = r.ops[0] if r.ops else {}
    measured = r.measured or {}
    return [_cell(getattr(r, k)) for k in _SCALARS] + [
        _dim3(launch.get("grid")), _dim3(launch.get("block")), _cell(launch.get("registers_per_thread")),
        _cell(launch.get("shared_memory_bytes")), _cell(launch.get("occupancy_pct")), op.get("name", ""),
        op.get("shapes", ""), (r.ncu or {}).get("command", ""), _cell(measured.get("flops")),
        _cell(measured.get("dram_bytes"))]


def _cell(value) -> str:
    return "" if value is None else repr(float(value)) if isinstance(value, float) else str(value)
