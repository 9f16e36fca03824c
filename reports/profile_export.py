"""`tbd report --csv`: a profile's figures as one long CSV table for scripts and pandas.

One row per figure: its key (as in profile.json, dotted), value (unformatted, SI units: s, bytes,
%, FLOP/s), unit and, for a null, the reason. The kernel rows have their own CSV (`tbd kernels --csv`).
"""

from __future__ import annotations

from tbd.core.profile_result import MEMORY_CATEGORIES, Profile
from tbd.reports.csv_cells import csv_text

CSV_COLUMNS = ("key", "value", "unit", "reason")


def _rows(profile: Profile) -> list[tuple[str, float | int | None, str, str | None]]:
    m = profile.metrics
    tp, fu, mem = m.throughput, m.flop_util_pct, m.memory_bytes
    rows = [("throughput", tp.value, tp.unit, tp.reason)]
    rows += [(f"throughput.{unit}", value, unit, None) for unit, value in tp.also.items()]
    for key in ("gpu_busy_pct", "gpu_busy_traced_pct", "gpu_busy_nvml_pct", "cpu_util_pct"):
        v = getattr(m, key)
        if v is not None:
            rows.append((key, v.value, "%", v.reason))
    rows += [("flop_util_pct", fu.value, "%", fu.reason), ("flop_util_pct.peak_flops", fu.peak_flops, "FLOP/s", None),
             ("flop_util_pct.measured_ceiling_flops", fu.measured_ceiling_flops, "FLOP/s", None),
             ("flop_util_pct.flops", fu.flops, "FLOP", None), ("flop_util_pct.busy_s", fu.busy_s, "s", None),
             ("flop_util_pct.kernel_average_pct", fu.kernel_average_pct, "%", None)]
    for w in fu.by_precision:
        key = f"flop_util_pct.by_precision.{w.precision or 'unknown'}"
        rows += [(f"{key}.flops", w.flops, "FLOP", None),
                 (f"{key}.peak_flops", w.peak_flops, "FLOP/s", None if w.peak_flops else "no peak for this precision"),
                 (f"{key}.seconds_at_peak", w.seconds_at_peak, "s", None)]
    if fu.above_peak_flops_pct is not None:
        rows += [("flop_util_pct.above_peak_flops_pct", fu.above_peak_flops_pct, "%", None),
                 ("flop_util_pct.value_capped_pct", fu.value_capped_pct, "%", None)]
    rows.append(("flop_util_pct.flops_unlisted", fu.flops_unlisted, "FLOP", None))
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
    if profile.cluster is not None:
        rows += _cluster_rows(profile.cluster)
    return rows


def _cluster_rows(c) -> list[tuple[str, float | int | None, str, str | None]]:
    """The cluster section of a multi-rank profile: its summary, then each rank's and each scaling point's."""
    unit = f"{c.throughput_unit or 'samples'}"
    rows = [("cluster.world_size", c.world_size, "ranks", c.reasons.get("world_size")),
            ("cluster.global_throughput", c.global_throughput, unit, c.reasons.get("global_throughput")),
            ("cluster.comm_share_mean_pct", c.comm_share_mean_pct, "%", c.reasons.get("comm_share_mean_pct")),
            ("cluster.comm_share_max_pct", c.comm_share_max_pct, "%", c.reasons.get("comm_share_max_pct")),
            ("cluster.overlap_mean_pct", c.overlap_mean_pct, "%", c.reasons.get("overlap_mean_pct")),
            ("cluster.exposed_comm_share_mean_pct", c.exposed_comm_share_mean_pct, "%",
             c.reasons.get("exposed_comm_share_mean_pct")),
            ("cluster.straggler_rank", c.straggler_rank, "rank", c.reasons.get("straggler_rank")),
            ("cluster.straggler_lag_s", c.straggler_lag_s, "s", c.reasons.get("straggler_lag_s"))]
    for r in c.ranks:
        key = f"cluster.rank{r.rank if r.rank is not None else '?'}"
        rows += [(f"{key}.throughput", r.throughput, unit, r.reasons.get("throughput")),
                 (f"{key}.comm_share_pct", r.comm_share_pct, "%", r.reasons.get("comm_share_pct")),
                 (f"{key}.overlap_pct", r.overlap_pct, "%", r.reasons.get("overlap_pct")),
                 (f"{key}.comm_s", r.comm_s, "s/step", r.reasons.get("comm_s")),
                 (f"{key}.compute_s", r.compute_s, "s/step", r.reasons.get("compute_s"))]
    for point in c.scaling:
        rows += [(f"cluster.scaling.p{point.processes}.throughput", point.throughput, unit, point.reason),
                 (f"cluster.scaling.p{point.processes}.efficiency_pct", point.efficiency_pct, "%", point.reason)]
    return rows


def profile_csv(profile: Profile) -> str:
    """Every figure of the profile as a CSV row: key, value, unit, reason."""
    return csv_text(CSV_COLUMNS, ([key, "" if value is None else repr(float(value)) if isinstance(value, float)
                                   else str(value), unit, reason or ""] for key, value, unit, reason in _rows(profile)))
