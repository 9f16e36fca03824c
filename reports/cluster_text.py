"""A multi-rank job on the terminal: the cluster summary (`tbd analyze FOLDER`, `tbd report` of a
multi-process run) and the per-rank table of a folder of traces, with that folder's JSON.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.profile_cluster import Cluster, ClusterRank, cluster_json
from tbd.reports.console import console_text, legend_grid, new_console, plain_table
from tbd.reports.numbers import NA, fmt_bytes, fmt_duration, fmt_pct, fmt_pct_cell, fmt_seconds_cell, fmt_sig
from tbd.reports.printable import printable


def render_cluster(cluster: Cluster, *, width: int = 120, color: bool | None = False) -> str:
    """The cluster summary and its per-rank table, as text ending in a newline.

    Args: cluster, a finished `Cluster`; width, in terminal cells; color, ANSI styling (True,
    False for deterministic plain text, None: when stdout is a terminal).
    """
    console = new_console(width, color)
    parts: list[RenderableType | None] = [Text("Cluster", style="bold"), _summary(cluster)]
    if cluster.scaling:
        parts += [None, _scaling(cluster)]
    parts += [None, _ranks(cluster), None, _comm(cluster), _legend()]
    return console_text(console, parts)


def _summary(c: Cluster) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    world = NA if c.world_size is None else str(c.world_size)
    measured = f"{c.ranks_measured} measured" + (f" of {world}" if c.world_size is not None else "")
    nodes = "" if c.nnodes is None else f", {c.nnodes} node{'s' if c.nnodes != 1 else ''}"
    rows = [
        ("world size", f"{world} ranks ({measured}{nodes})"),
        ("backend", printable(c.backend) if c.backend else NA),
        ("global throughput", _with_reason(_rate(c.global_throughput, c.throughput_unit),
                                           c.reasons.get("global_throughput"))),
        ("communication", _with_reason(f"{fmt_pct(c.comm_share_mean_pct)} of the trace window, mean over ranks "
                                       f"(max {fmt_pct(c.comm_share_max_pct)})", c.reasons.get("comm_share_mean_pct"))),
        ("overlap", _with_reason(f"{fmt_pct(c.overlap_mean_pct)} of communication ran beside compute (mean)",
                                 c.reasons.get("overlap_mean_pct"))),
        ("exposed", _with_reason(f"{fmt_pct(c.exposed_comm_share_mean_pct)} of the trace window communicating with "
                                 "no compute beside (mean)", c.reasons.get("exposed_comm_share_mean_pct"))),
        ("straggler", _with_reason(_straggler(c), c.reasons.get("straggler_rank"))),
    ]
    if not c.scaling:
        rows.append(("scaling", NA + (f" ({printable(c.scaling_reason)})" if c.scaling_reason else "")))
    for term, text in rows:
        grid.add_row(Text(term), Text(text))
    return grid


def _straggler(c: Cluster) -> str:
    if c.straggler_rank is None and c.straggler_source is None:
        return NA
    who = f"rank {c.straggler_rank}" if c.straggler_rank is not None else printable(c.straggler_source or "")
    return f"{who}: {fmt_duration(c.straggler_lag_s)} more compute per step than the others' median"


def _scaling(c: Cluster) -> Table:
    table = plain_table(title="Scaling", title_justify="left")
    for header in ("Processes", "Throughput", "Efficiency", "Source"):
        table.add_column(header, justify="left" if header == "Source" else "right")
    for row in c.scaling:
        efficiency = fmt_pct(row.efficiency_pct) if row.efficiency_pct is not None else \
            NA + (f" ({printable(row.reason)})" if row.reason else "")
        table.add_row(*(Text(x) for x in (str(row.processes), _rate(row.throughput, row.unit), efficiency,
                                          printable(row.source) if row.source else NA)))
    return table


def _ranks(c: Cluster) -> Table:
    """Each rank's own figures."""
    table = plain_table()
    units = {r.throughput_unit for r in c.ranks}
    one_unit = len(units) == 1
    for header in ("Rank", "Host", f"Throughput ({printable(next(iter(units)))})" if one_unit else "Throughput",
                   "Iteration", "Busy %", "FLOP %", "Peak memory"):
        table.add_column(header, justify="left" if header == "Host" else "right")
    for r in c.ranks:
        throughput = fmt_sig(r.throughput) if one_unit else _rate(r.throughput, r.throughput_unit)
        table.add_row(*(Text(x) for x in (
            _rank(c, r), printable(r.host) if r.host else NA, throughput, fmt_duration(r.iteration_s),
            _pct(r.busy_pct), _pct(r.flop_util_pct), fmt_bytes(r.allocator_peak_bytes))))
    return table


def _comm(c: Cluster) -> Table:
    """Each rank's communication: per step, and as shares."""
    table = plain_table()
    for header in ("Rank", "Backend", "Comm", "Compute", "Overlap", "Comm %", "Overlap %", "Exposed %"):
        table.add_column(header, justify="left" if header == "Backend" else "right")
    for r in c.ranks:
        table.add_row(*(Text(x) for x in (
            _rank(c, r), printable(r.backend_kind) if r.backend_kind else NA, fmt_duration(r.comm_s),
            fmt_duration(r.compute_s), fmt_duration(r.overlap_s), _pct(r.comm_share_pct), _pct(r.overlap_pct),
            _pct(r.exposed_comm_share_pct))))
    return table


def _rank(c: Cluster, r: ClusterRank) -> str:
    straggler = c.straggler_source is not None and r.source == c.straggler_source
    return (NA if r.rank is None else str(r.rank)) + (" *" if straggler else "")


def _pct(value: float | None) -> str:
    return fmt_pct(value, suffix="")


def _legend() -> Table:
    return legend_grid([
        ("Iteration", "median step time; Busy %: GPU busy (formula (1)); FLOP %: FLOP utilization"),
        ("Comm", "per traced step, union of the rank's communication in its trace window (NCCL/RCCL kernels; on a "
                 "CPU, the backend's collective spans); Compute: of every other kernel (on a CPU, the top-level ops "
                 "of the threads that run no collective); Overlap: both at once"),
        ("Comm %", "communication / trace window; Overlap %: of the communication, with compute beside; Exposed %: "
                   "communication with no compute beside / trace window"),
        ("*", "the straggler: most compute per step (in synchronous training every rank's step lasts as long: "
              "the others wait inside the collective)"),
        (NA, "see the rank's own report (`tbd analyze TRACE`) or the JSON's reasons"),
    ])


def _rate(value: float | None, unit: str | None) -> str:
    return NA if value is None else f"{fmt_sig(value)} {printable(unit or '')}".rstrip()


def _with_reason(text: str, reason: str | None) -> str:
    return text if reason is None else f"{NA} ({printable(reason)})"


__all__ = ["render_cluster"]


RANKS_SCHEMA = "tbd.ranks/1"


def ranks_json(ranks, cluster: Cluster | None = None) -> dict[str, Any]:
    """{"schema": "tbd.ranks/1", "ranks": [{"rank", "trace", "profile"}], "cluster"}: each rank's whole
    profile, and the cluster summary (as profile.json's "cluster": docs/profile-json.md) when given."""
    data: dict[str, Any] = {
        "schema": RANKS_SCHEMA,
        "ranks": [{"rank": r.rank, "trace": str(r.trace), "profile": r.profile.to_dict()} for r in ranks]}
    if cluster is not None:
        data["cluster"] = cluster_json(cluster)
    return data


def render_ranks(ranks, *, width: int = 120, color: bool | None = False) -> str:
    """One row per rank: its trace, GPU, steps, GPU busy, FLOP utilization, time without FLOPs.

    Args: ranks, `run_analysis.RankProfile`s in rank order; width, in terminal cells; color, ANSI styling.
    """
    console = new_console(width, color)
    table = plain_table()
    for header, right in (("Rank", True), ("Trace", False), ("GPU", False), ("Steps", True), ("Busy time", True),
                          ("GPU busy %", True), ("FLOP util %", True), ("No FLOP formula %", True)):
        table.add_column(header, justify="right" if right else "left")
    for r in ranks:
        p = r.profile
        m = p.metrics
        gpu = (p.environment.get("gpu") or {}).get("name") or NA
        steps = str(len(p.iterations.times_s)) if p.iterations else NA
        table.add_row(*(Text(c) for c in (
            NA if r.rank is None else str(r.rank), printable(r.trace.name), printable(gpu), steps,
            fmt_seconds_cell(m.flop_util_pct.busy_s), fmt_pct_cell(m.gpu_busy_pct.value), fmt_pct_cell(m.flop_util_pct.value),
            fmt_pct_cell(m.flop_util_pct.unattributed_busy_pct))))
    caption = Text("Each rank's trace analysed on its own (`tbd analyze TRACE` gives one in full); n/a: see that "
                   "trace's report for the reason.", style="dim")
    title = Text(f"{len(ranks)} traces, side by side", style="bold")
    return console_text(console, [title, table, caption])
