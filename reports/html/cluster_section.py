"""The "Cluster" section of a run's HTML page: the cluster summary of a multi-rank job, when the profile has one.

The same figures as the terminal's (reports/cluster_text.py), as analysis/cluster.py wrote them: a
summary list, the scaling table when measured, one row per rank. A null figure reads "n/a — reason".
"""

from __future__ import annotations

from tbd.core.profile_cluster import Cluster, ClusterRank
from tbd.reports.html.page import Cell, bytes_cell, facts, maybe, num, section, table
from tbd.reports.numbers import NA, fmt_duration, fmt_pct, fmt_sig
from tbd.reports.printable import printable


def cluster_section(cluster: Cluster) -> str:
    """The section's HTML (anchor "cluster")."""
    c = cluster
    parts = [facts(_summary(c))]
    if c.scaling:
        parts.append(table(["Processes", "Throughput", "Scaling efficiency", "Source"], [
            [num(str(s.processes)), maybe(_rate(s.throughput, s.unit), s.throughput, s.reason),
             maybe(fmt_pct(s.efficiency_pct), s.efficiency_pct, s.reason), printable(s.source or NA)]
            for s in c.scaling], caption="efficiency = throughput(n) / (n × throughput(1))"))
    parts.append(table(
        ["Rank", "Host", "Backend", "Throughput", "Iteration", "GPU busy", "FLOP util", "Peak memory", "Comm / step",
         "Compute / step", "Overlap / step", "Comm share", "Overlap", "Exposed comm"],
        [_row(c, r) for r in c.ranks],
        caption="Comm: union of the rank's NCCL/RCCL kernels (on a CPU, its backend's collective spans) in its trace "
                "window; Compute: of every other kernel (on a CPU, the top-level ops of the threads that run no "
                "collective); shares are of the trace window, Overlap of the communication. * the straggler: most "
                "compute per step."))
    return section("Cluster", *parts, anchor="cluster")


def _summary(c: Cluster) -> list[tuple[str, str]]:
    world = NA if c.world_size is None else str(c.world_size)
    nodes = "" if c.nnodes is None else f", {c.nnodes} node{'s' if c.nnodes != 1 else ''}"
    straggler = NA if c.straggler_lag_s is None else (
        f"rank {c.straggler_rank if c.straggler_rank is not None else printable(c.straggler_source)}: "
        f"{fmt_duration(c.straggler_lag_s)} more compute per step than the others' median")
    pairs = [("World size", f"{world} ({c.ranks_measured} measured{nodes})"), ("Backend", c.backend or NA),
             ("Global throughput", _or_reason(_rate(c.global_throughput, c.throughput_unit), c.global_throughput,
                                              c.reasons.get("global_throughput"))),
             ("Communication share", _or_reason(f"{fmt_pct(c.comm_share_mean_pct)} mean, "
                                                f"{fmt_pct(c.comm_share_max_pct)} max", c.comm_share_mean_pct,
                                                c.reasons.get("comm_share_mean_pct"))),
             ("Overlap with compute", _or_reason(f"{fmt_pct(c.overlap_mean_pct)} of communication (mean)",
                                                 c.overlap_mean_pct, c.reasons.get("overlap_mean_pct"))),
             ("Exposed communication", _or_reason(f"{fmt_pct(c.exposed_comm_share_mean_pct)} of the window (mean)",
                                                  c.exposed_comm_share_mean_pct,
                                                  c.reasons.get("exposed_comm_share_mean_pct"))),
             ("Straggler", _or_reason(straggler, c.straggler_lag_s, c.reasons.get("straggler_rank")))]
    if not c.scaling:
        pairs.append(("Scaling", f"{NA} — {c.scaling_reason}" if c.scaling_reason else NA))
    return pairs


def _row(c: Cluster, r: ClusterRank) -> list:
    why = r.reasons.get
    star = " *" if c.straggler_source is not None and r.source == c.straggler_source else ""
    return [Cell((NA if r.rank is None else str(r.rank)) + star, title=r.source), r.host or NA, r.backend_kind or NA,
            maybe(_rate(r.throughput, r.throughput_unit), r.throughput, why("throughput")),
            maybe(fmt_duration(r.iteration_s), r.iteration_s, why("iteration_s")),
            maybe(fmt_pct(r.busy_pct), r.busy_pct, why("busy_pct")),
            maybe(fmt_pct(r.flop_util_pct), r.flop_util_pct, why("flop_util_pct")),
            bytes_cell(r.allocator_peak_bytes, why("allocator_peak_bytes")),
            *(maybe(fmt_duration(v), v, why(k)) for k, v in (("comm_s", r.comm_s), ("compute_s", r.compute_s),
                                                            ("overlap_s", r.overlap_s))),
            *(maybe(fmt_pct(v), v, why(k)) for k, v in (("comm_share_pct", r.comm_share_pct),
                                                       ("overlap_pct", r.overlap_pct),
                                                       ("exposed_comm_share_pct", r.exposed_comm_share_pct)))]


def _rate(value: float | None, unit: str | None) -> str:
    return NA if value is None else f"{fmt_sig(value)} {printable(unit or '')}".rstrip()


def _or_reason(text: str, value, reason: str | None) -> str:
    return text if value is not None else f"{NA} — {printable(reason)}" if reason else NA


__all__ = ["cluster_section"]
