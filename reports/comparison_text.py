"""`tbd compare`: a finished `Comparison` as terminal text or CSV. Formatting only (analysis/compare_runs.py
computes every figure and ratio)."""

from __future__ import annotations

import csv
import io

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.comparison import Comparison, Gap, MetricComparison
from tbd.reports.console import NA, console_text, fit_names, new_console, plain_table
from tbd.reports.numbers import fmt_bandwidth, fmt_duration, fmt_pct, fmt_rate, fmt_sig
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes


def fmt_ratio(value: float | None) -> str:
    """A ratio to the first run: 2.1 -> "2.10x"."""
    text = fmt_sig(value, 3)
    return text if text == NA else f"{text}x"


def fmt_metric(metric: MetricComparison, value: float | None) -> str:
    """One metric value in its unit ("27.5 ms", "41.2 %", "1.5 GiB", "1,234 images/s")."""
    if value is None:
        return NA
    if metric.unit == "%":
        return fmt_pct(value)
    if metric.unit == "s":
        return fmt_duration(value)
    if metric.unit == "bytes":
        return fmt_bytes(int(value))
    if metric.unit == "ranks":  # a count (the cluster's world size)
        return f"{int(value):,} ranks"
    return f"{fmt_sig(value, 4)} {metric.unit}".rstrip()


def gap_sentence(comparison: Comparison, gap: Gap) -> str:
    """"B has 3.20x A's FP32 peak; this workload ran 2.10x faster (throughput); 60.0 % of the
    kernel-time change per iteration is in aten::convolution_backward." from the Gap's fields."""
    ref = comparison.runs[0].label
    parts = [f"{gap.label} has {fmt_ratio(gap.peak_ratio)} {ref}'s FP32 peak" if gap.peak_ratio is not None
             else f"{gap.label}'s FP32 peak ratio to {ref} is unknown"]
    if gap.speed_ratio is not None:
        parts.append(f"this workload ran {fmt_ratio(gap.speed_ratio)} as fast ({gap.speed_basis})")
    else:
        parts.append(f"speed ratio n/a ({gap.speed_reason})")
    if gap.kernel_time_delta_s is not None and gap.top_op is not None:
        way = "less" if gap.kernel_time_delta_s < 0 else "more"
        change = f"it spends {fmt_duration(abs(gap.kernel_time_delta_s))} {way} kernel time per iteration"
        if gap.top_op_share_pct is not None:
            parts.append(f"{change}, {fmt_pct(gap.top_op_share_pct)} of that in {gap.top_op}")
        else:
            parts.append(f"{change} (a small net change); the largest change is in {gap.top_op} "
                         f"({_signed_duration(gap.top_op_delta_s)})")
    return printable("; ".join(parts) + ".")


def render_comparison(comparison: Comparison, *, width: int, color: bool | None, top: int = 10) -> str:
    """The comparison as terminal text: runs, what differs, metrics with ratios, the gaps, ops, notes."""
    console = new_console(width, color)
    out: list[RenderableType | None] = [
        Text(f"tbd compare · {len(comparison.runs)} runs · ratios are to {comparison.runs[0].label}", style="bold"),
        _runs_table(comparison), *_sources(comparison), None]
    if comparison.differences:
        out += [Text("Not only the device differs: " + printable("; ".join(comparison.differences)), style="bold"),
                None]
    out += [_metrics_table(comparison), None]
    out += [Text(gap_sentence(comparison, g)) for g in comparison.gaps] + [None]
    if comparison.ops:
        out += [Text(f"Kernel time per iteration by launching op (utilization in parentheses), the {top} largest "
                     "changes"), _ops_table(console, comparison, top), None]
    out += [Text(f"note: {printable(n)}") for n in comparison.notes]
    return console_text(console, out)


def _runs_table(comparison: Comparison) -> Table:
    t = plain_table()
    t.add_column("Run")
    t.add_column("Device", overflow="fold", min_width=12)
    for header in ("Units", "Memory", "FP32 peak", "Bandwidth", "Batch"):
        t.add_column(header, justify="right", no_wrap=True)
    t.add_column("Model", overflow="fold", min_width=12)
    for run in comparison.runs:
        units = NA if run.compute_units is None else f"{run.compute_units} {run.compute_unit_name}"
        memory = NA if run.device_memory_bytes is None else fmt_bytes(run.device_memory_bytes)
        t.add_row(run.label, printable(f"{run.device or NA}: {run.device_name or NA}"), units, memory,
                  fmt_rate(run.peak_fp32_flops), fmt_bandwidth(run.memory_bandwidth),
                  NA if run.batch is None else str(run.batch), printable(f"{run.model or NA} ({run.framework or NA})"))
    return t


def _sources(comparison: Comparison) -> list[RenderableType]:
    return [Text(f"{run.label}: {printable(run.source)}", overflow="fold") for run in comparison.runs]


def _metrics_table(comparison: Comparison) -> Table:
    t = plain_table()
    t.add_column("Metric")
    for run in comparison.runs:
        t.add_column(run.label, justify="right")
    for m in comparison.metrics:
        if all(v is None for v in m.values):
            continue  # a figure no run has (NVML on CPU runs) says nothing side by side
        cells = [fmt_metric(m, m.values[0])]
        cells += [fmt_metric(m, v) + ("" if r is None else f" ({fmt_ratio(r)})") for v, r in zip(m.values[1:],
                                                                                              m.ratios[1:])]
        label = m.label + (f" ({m.unit})" if m.key == "throughput" else "")
        t.add_row(label, *cells)
    return t


def _ops_table(console, comparison: Comparison, top: int) -> Table:
    rows = comparison.ops[:top]
    later = comparison.runs[1:]

    def build(names: list[str]) -> Table:
        t = plain_table()
        for run in comparison.runs:
            t.add_column(run.label, justify="right")
        for run in later:
            t.add_column(f"Δ {run.label}", justify="right")
            t.add_column("of gap", justify="right")
        t.add_column("Op", overflow="ellipsis", no_wrap=True)
        for row, name in zip(rows, names):
            cells = [_op_time(t_s, u) for t_s, u in zip(row.time_per_iteration_s, row.util_pct)]
            for i in range(1, len(comparison.runs)):
                cells += [_signed_duration(row.delta_s[i]), fmt_pct(row.gap_share_pct[i])]
            t.add_row(*cells, name)
        return t
    return fit_names(console, build, [r.op for r in rows])


def _op_time(seconds: float | None, util: float | None) -> str:
    text = fmt_duration(seconds)
    return text if util is None else f"{text} ({fmt_pct(util)})"


def _signed_duration(seconds: float | None) -> str:
    if seconds is None:
        return NA
    return ("-" if seconds < 0 else "+") + fmt_duration(abs(seconds))


#: CSV columns: one row per (metric or op, run), long format for pandas.
CSV_COLUMNS = ("section", "key", "label", "unit", "run", "source", "value", "ratio_to_first", "reason", "util_pct",
               "delta_s", "gap_share_pct")


def comparison_csv(comparison: Comparison) -> str:
    """Every metric and op of every run as one CSV row, numbers unformatted."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    runs = comparison.runs
    for m in comparison.metrics:
        for i, run in enumerate(runs):
            writer.writerow(["metric", m.key, m.label, m.unit, run.label, run.source, _cell(m.values[i]),
                             _cell(m.ratios[i]), m.reasons[i] or "", "", "", ""])
    for o in comparison.ops:
        for i, run in enumerate(runs):
            writer.writerow(["op", o.op, o.op, "s/iteration", run.label, run.source, _cell(o.time_per_iteration_s[i]),
                             "", "", _cell(o.util_pct[i]), _cell(o.delta_s[i]), _cell(o.gap_share_pct[i])])
    return out.getvalue()


def _cell(value) -> str:
    return "" if value is None else repr(float(value))
