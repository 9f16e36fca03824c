"""`tbd report --csv`: a profile's figures as one long CSV table for scripts and pandas.

One row per figure: its key (as in profile.json, dotted), value (unformatted, SI units: s, bytes,
%, FLOP/s), unit and, for a null, the reason. The kernel rows have their own CSV (`tbd kernels --csv`).
"""

from __future__ import annotations

import csv
import io

from tbd.profile import MEMORY_CATEGORIES, Profile

CSV_COLUMNS = ("key", "value", "unit", "reason")


def _rows(profile: Profile) -> list[tuple[str, float | int | None, str, str | None]]:
    m = profile.metrics
    tp, fu, mem = m.throughput, m.flop_util_pct, m.memory_bytes
    rows = [("throughput", tp.value, tp.unit, tp.reason)]
    rows += [(f"throughput.{unit}", value, unit, None) for unit, value in tp.also.items()]
    for key in ("gpu_busy_pct", "gpu_busy_nvml_pct", "cpu_util_pct"):
        v = getattr(m, key)
        rows.append((key, v.value, "%", v.reason))
    rows += [("flop_util_pct", fu.value, "%", fu.reason), ("flop_util_pct.peak_flops", fu.peak_flops, "FLOP/s", None),
             ("flop_util_pct.measured_ceiling_flops", fu.measured_ceiling_flops, "FLOP/s", None),
             ("flop_util_pct.flops", fu.flops, "FLOP", None), ("flop_util_pct.busy_s", fu.busy_s, "s", None),
             ("flop_util_pct.kernel_average_pct", fu.kernel_average_pct, "%", None)]
    if m.memory_bandwidth is not None:
        rows.append(("memory_bandwidth", m.memory_bandwidth.value, "B/s", m.memory_bandwidth.reason))
    for cat in (*MEMORY_CATEGORIES, "allocator_peak"):
        rows.append((f"memory_bytes.{cat}", getattr(mem, cat), "bytes", mem.reasons.get(cat)))
    rows += [(f"memory_bytes.at_peak.{cat}", value, "bytes", None) for cat, value in mem.at_peak.items()]
    it = profile.iterations
    if it is not None:
        rows += [("iterations.warmup", it.warmup, "iterations", None), ("iterations.warmup_s", it.warmup_s, "s", None)]
    rows += [("throughput.spread_pct", tp.spread_pct, "%", None),
             ("throughput.interval_pct", tp.interval_pct, "%", None)] if tp.repeats else []
    q = profile.quality
    if q is not None:
        rows += [("quality.reliable", int(q.reliable), "bool", None),
                 ("quality.other_load_cores", q.other_load_cores, "cores", None),
                 ("quality.workload_cores", q.workload_cores, "cores", None),
                 ("quality.gemm_ceiling_flops.before", q.gemm_ceiling_flops.get("before"), "FLOP/s", None),
                 ("quality.gemm_ceiling_flops.after", q.gemm_ceiling_flops.get("after"), "FLOP/s", None),
                 ("quality.gemm_spread_pct", q.gemm_spread_pct, "%", q.reasons.get("gemm_spread_pct"))]
    return rows


def profile_csv(profile: Profile) -> str:
    """Every figure of the profile as a CSV row: key, value, unit, reason."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for key, value, unit, reason in _rows(profile):
        cell = "" if value is None else repr(float(value)) if isinstance(value, float) else str(value)
        writer.writerow([key, cell, unit, reason or ""])
    return out.getvalue()
