"""`tbd compare`: a finished `Comparison` as terminal text or CSV. Formatting only (analysis/compare_runs.py
computes every figure and ratio)."""

from __future__ import annotations

import dataclasses
import io

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.comparison import ComparedRun, Comparison, Gap, MetricComparison
from tbd.reports.console import NA, console_text, fit_names, listed, new_console, plain_table
from tbd.reports.csv_cells import SafeWriter
from tbd.reports.numbers import fmt_bandwidth, fmt_duration, fmt_pct, fmt_rate, fmt_sig
from tbd.reports.printable import printable
from tbd.reports.terminal import fmt_bytes


def fmt_ratio(value: float | None) -> str:
    """A ratio to the first run: 2.1 -> "2.10x"."""
    text = fmt_sig(value, 3)
    return text if text == NA else f"{text}x"


def unit_of(metric: MetricComparison, run: int | None) -> str:
    """Run `run`'s unit of the figure: its own where the runs' differ (`MetricComparison.units`)."""
    return metric.units[run] if metric.units and run is not None else metric.unit


def fmt_metric(metric: MetricComparison, value: float | None, run: int | None = None) -> str:
    """One metric value in its unit ("27.5 ms", "41.2 %", "1.5 GiB", "1,234 images/s"); `run`: whose value,
    for a figure whose unit differs between runs (throughput: images/s and sentences/s)."""
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
    return f"{fmt_sig(value, 4)} {unit_of(metric, run)}".rstrip()


def fmt_interval(low: float | None, high: float | None) -> str:
    """A ratio's 95 % interval: "1.81x-2.45x", "0.0217x-unbounded"; "" without one."""
    if low is None:
        return ""
    return f"{fmt_ratio(low)}-{'unbounded' if high is None else fmt_ratio(high)}"


def quality_word(run: ComparedRun) -> str:
    """The run's measurement quality in one word: "reliable", "UNRELIABLE" or "unknown" (no quality record)."""
    return {True: "reliable", False: "UNRELIABLE"}.get(run.reliable, "unknown")


def unreliable_clause(comparison: Comparison, gap: Gap) -> str | None:
    """"A is UNRELIABLE: the ratio may be far off" when either run of the gap is unreliable, else None."""
    runs = [r for r in comparison.runs if r.label in (comparison.runs[0].label, gap.label) and r.reliable is False]
    if not runs:
        return None
    who = " and ".join(r.label for r in runs)
    return f"{who} {'is' if len(runs) == 1 else 'are'} UNRELIABLE (see the notes): the ratio may be far off"


def speed_clause(gap: Gap) -> str:
    """"this workload ran 2.10x as fast (throughput; 95 % interval 1.81x-2.45x)", or why there is no ratio."""
    if gap.speed_ratio is None:
        return f"speed ratio n/a ({gap.speed_reason})"
    if gap.speed_ratio_low is not None:
        interval = f"95 % interval {fmt_interval(gap.speed_ratio_low, gap.speed_ratio_high)}"
        if gap.speed_interval_reason:
            interval += f", {gap.speed_interval_reason}"
    else:
        interval = gap.speed_interval_reason or "no interval"
    return f"this workload ran {fmt_ratio(gap.speed_ratio)} as fast ({gap.speed_basis}; {interval})"


def gap_sentence(comparison: Comparison, gap: Gap) -> str:
    """"B has 3.20x A's FP32 peak; this workload ran 2.10x faster (throughput; 95 % interval 1.81x-2.45x);
    60.0 % of the kernel-time change per iteration is in aten::convolution_backward." from the Gap's fields."""
    ref = comparison.runs[0].label
    parts = [f"{gap.label} has {fmt_ratio(gap.peak_ratio)} {ref}'s FP32 peak" if gap.peak_ratio is not None
             else f"{gap.label}'s FP32 peak ratio to {ref} is unknown"]
    parts.append(speed_clause(gap))
    caveat = unreliable_clause(comparison, gap)
    if caveat and gap.speed_ratio is not None:
        parts.append(caveat)
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
    comparison = _printable_names(comparison)
    console = new_console(width, color)
    out: list[RenderableType | None] = [
        Text(f"tbd compare · {len(comparison.runs)} runs · ratios are to {comparison.runs[0].label}", style="bold"),
        _runs_table(comparison), *_sources(comparison), None]
    if comparison.differences:
        out += [Text("Not only the device differs: " + printable("; ".join(comparison.differences)), style="bold"),
                None]
    warnings = [*unlike_lines(comparison), *unreliable_lines(comparison)]
    shown, more = listed(warnings, "warnings")
    out += [Text(printable(line), style="bold") for line in shown] + ([more] if more is not None else [])
    out += [None] if warnings else []
    out += [_metrics_table(comparison), None]
    out += [Text(gap_sentence(comparison, g)) for g in comparison.gaps] + [None]
    if comparison.ops:
        out += [Text(f"Kernel time per iteration by launching op (utilization in parentheses), the {top} largest "
                     "changes"), _ops_table(console, comparison, top), None]
    notes, more = listed(comparison.notes)
    out += [Text(f"note: {printable(n)}") for n in notes] + ([more] if more is not None else [])
    return console_text(console, out)


def _printable_names(comparison: Comparison) -> Comparison:
    """`comparison` with every label and name a table cell shows made printable (an ESC, a NUL or a bidi mark
    from a saved comparison's labels escaped, a 300k-character label cut), once, before any table is built."""
    return dataclasses.replace(
        comparison,
        runs=[dataclasses.replace(r, label=printable(r.label), quality_warnings=[printable(w) for w in r.quality_warnings])
              for r in comparison.runs],
        metrics=[dataclasses.replace(m, label=printable(m.label), unit=printable(m.unit),
                                     units=[printable(u) for u in m.units]) for m in comparison.metrics],
        ops=[dataclasses.replace(o, op=printable(o.op)) for o in comparison.ops],
        gaps=[dataclasses.replace(g, label=printable(g.label), top_op=None if g.top_op is None else printable(g.top_op),
                                  not_comparable_reason=None if g.not_comparable_reason is None
                                  else printable(g.not_comparable_reason)) for g in comparison.gaps])


def unlike_lines(comparison: Comparison) -> list[str]:
    """One line per run that is not the same workload as the first: no speed ratio, no op attribution."""
    ref = comparison.runs[0].label
    return [f"Not the same workload: {g.label} against {ref} ({g.not_comparable_reason}): the figures stand side by "
            "side, their ratios are not speed-ups, and no change is attributed to ops" for g in comparison.gaps
            if not g.comparable]


def unreliable_lines(comparison: Comparison) -> list[str]:
    """One line per unreliable run, with its first warning (the notes hold them all)."""
    return [f"{r.label} is UNRELIABLE: {r.quality_warnings[0] if r.quality_warnings else 'see its profile'}"
            for r in comparison.runs if r.reliable is False]


def _runs_table(comparison: Comparison) -> Table:
    t = plain_table()
    t.add_column("Run")
    t.add_column("Name", overflow="fold", min_width=12)
    for header in ("Units", "Memory", "FP32 peak", "Bandwidth"):
        t.add_column(header, justify="right", no_wrap=True)
    t.add_column("Quality", no_wrap=True)
    for run in comparison.runs:
        units = NA if run.compute_units is None else f"{run.compute_units} {run.compute_unit_name}"
        memory = NA if run.device_memory_bytes is None else fmt_bytes(run.device_memory_bytes)
        t.add_row(run.label, printable(run.name or NA), units, memory, fmt_rate(run.peak_fp32_flops),
                  fmt_bandwidth(run.memory_bandwidth), quality_word(run))
    return t


def _sources(comparison: Comparison) -> list[RenderableType]:
    """"A: runs/x (pytorch on cuda:0)": where each run came from."""
    return [Text(f"{run.label}: {printable(run.source)} ({printable(run.framework or NA)} on "
                 f"{printable(run.device or NA)})", overflow="fold") for run in comparison.runs]


def fmt_ratio_cell(metric: MetricComparison, i: int) -> str:
    """Run i's ratio to the first with its 95 % interval where the metric has one: "2.10x, 1.81x-2.45x"."""
    text = fmt_ratio(metric.ratios[i])
    if metric.ratio_low and metric.ratio_low[i] is not None:
        text += f", {fmt_interval(metric.ratio_low[i], metric.ratio_high[i])}"
    return text


def _metrics_table(comparison: Comparison) -> Table:
    t = plain_table()
    t.add_column("Metric")
    for run in comparison.runs:
        t.add_column(run.label, justify="right")
    for m in comparison.metrics:
        if all(v is None for v in m.values):
            continue  # a figure no run has (NVML on CPU runs) says nothing side by side
        cells = [fmt_metric(m, m.values[0], 0)]
        cells += [fmt_metric(m, m.values[i], i) + ("" if m.ratios[i] is None else f" ({fmt_ratio_cell(m, i)})")
                  for i in range(1, len(comparison.runs))]
        label = m.label + (f" ({m.unit})" if m.key == "throughput" and not m.units else "")
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
               "delta_s", "gap_share_pct", "run_name", "run_reliable", "ratio_low", "ratio_high")


def comparison_csv(comparison: Comparison) -> str:
    """Every metric and op of every run as one CSV row, numbers unformatted."""
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(CSV_COLUMNS)
    runs = comparison.runs
    for m in comparison.metrics:
        for i, run in enumerate(runs):
            bounds = [_cell(m.ratio_low[i]), _cell(m.ratio_high[i])] if m.ratio_low else ["", ""]
            writer.writerow(["metric", m.key, m.label, unit_of(m, i), run.label, run.source, _cell(m.values[i]),
                             _cell(m.ratios[i]), m.reasons[i] or "", "", "", "", run.name, _reliable(run), *bounds])
    for o in comparison.ops:
        for i, run in enumerate(runs):
            writer.writerow(["op", o.op, o.op, "s/iteration", run.label, run.source, _cell(o.time_per_iteration_s[i]),
                             "", "", _cell(o.util_pct[i]), _cell(o.delta_s[i]), _cell(o.gap_share_pct[i]), run.name,
                             _reliable(run), "", ""])
    return out.getvalue()


def _reliable(run: ComparedRun) -> str:
    """"true", "false" or "" (no quality record), as the JSON's reliable."""
    return "" if run.reliable is None else str(run.reliable).lower()


def _cell(value) -> str:
    return "" if value is None else repr(float(value))
