"""Renders a folder of per-rank traces side by side (`tbd analyze FOLDER`), and its JSON (with the cluster summary)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tbd.core.profile_cluster import Cluster, cluster_json
from tbd.reports.console import NA, console_text, fmt_pct, fmt_seconds, new_console, plain_table
from tbd.reports.printable import printable

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

    Args: ranks, `trace_folder.RankProfile`s in rank order; width, in terminal cells; color, ANSI styling.
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
            fmt_seconds(m.flop_util_pct.busy_s), fmt_pct(m.gpu_busy_pct.value), fmt_pct(m.flop_util_pct.value),
            fmt_pct(m.flop_util_pct.unattributed_busy_pct))))
    caption = Text("Each rank's trace analysed on its own (`tbd analyze TRACE` gives one in full); n/a: see that "
                   "trace's report for the reason.", style="dim")
    title = Text(f"{len(ranks)} traces, side by side", style="bold")
    return console_text(console, [title, table, caption])
