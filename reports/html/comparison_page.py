"""A comparison (`Comparison`) as one self-contained HTML page.

Top to bottom: the runs (device, model, batch, framework, peak), what differs besides the device
(so a batch change is never read as a speed-up), the gap sentences, the metrics with each run's ratio
to the first, the ops with the largest change, the notes and the comparison figures. The ratios,
deltas and shares are the record's; the sentences are `reports.comparison_text.gap_sentence`, the terminal's.
"""

from __future__ import annotations

from tbd.core.comparison import ComparedRun, Comparison, MetricComparison
from tbd.reports.comparison_text import (
    fmt_metric,
    fmt_ratio_cell,
    gap_sentence,
    quality_word,
    unlike_lines,
    unreliable_lines,
)
from tbd.reports.figures.saving import comparison_figures
from tbd.reports.html.page import Cell, banner, esc, figures_section, na_cell, notes_list, num, page, section, table
from tbd.reports.numbers import NA, fmt_bandwidth, fmt_duration, fmt_pct, fmt_rate
from tbd.reports.printable import printable

#: Ops shown: the record's first (largest absolute change first).
TOP_OPS = 15


def comparison_html(comparison: Comparison, *, top: int = TOP_OPS) -> str:
    """The comparison as one self-contained HTML page.

    Args: comparison: a finished Comparison; top: ops shown in the op table.
    Returns: the HTML document.
    """
    labels = " vs ".join(r.label for r in comparison.runs)
    title = f"tbd compare · {printable(labels)}"
    reference = comparison.runs[0].label if comparison.runs else NA
    differs = banner("Not only the device differs: " + "; ".join(comparison.differences), warn=True) \
        if comparison.differences else ""
    differs += "".join(banner(line, warn=True) for line in (*unlike_lines(comparison), *unreliable_lines(comparison)))
    gaps = notes_list([gap_sentence(comparison, g) for g in comparison.gaps])
    body = [f"<header>\n<h1>{esc(title)}</h1>", f'<p class="sub">Ratios are to run {esc(reference)}.</p>', differs,
            "</header>", section("Runs", _runs(comparison), anchor="runs"),
            section("Where the time went", gaps or "<p>one run: nothing to set against it</p>", anchor="gaps"),
            section("Metrics", _metrics(comparison), anchor="metrics"),
            section("Time per iteration by launching op", _ops(comparison, top), anchor="ops"),
            section("Notes", notes_list(comparison.notes), anchor="notes") if comparison.notes else "",
            figures_section(comparison_figures(comparison))]
    return page(title, body)


def _runs(comparison: Comparison) -> str:
    rows = [[r.label, printable(r.name or NA), printable(r.device or NA), printable(r.device_name or NA),
             printable(r.model or NA), num(NA if r.batch is None else str(r.batch)), printable(r.framework or NA),
             printable(r.status), _quality_cell(r),
             num(fmt_rate(r.peak_fp32_flops), title=f"source: {r.peak_source}" if r.peak_source else None),
             num(fmt_bandwidth(r.memory_bandwidth)), Cell(f"<code>{esc(r.source)}</code>", markup=True)]
            for r in comparison.runs]
    return table(["Run", "Name", "Device", "Device name", "Model", "Batch", "Framework", "Status", "Quality",
                  "FP32 peak", "Bandwidth", "Source"], rows)


def _quality_cell(run: ComparedRun) -> Cell:
    """"reliable", "UNRELIABLE" (its warnings on hover, marked) or "unknown" (why on hover)."""
    word = quality_word(run)
    if run.reliable is False:
        return Cell(word, cls="na unreliable", title="; ".join(run.quality_warnings) or None)
    return Cell(word, title=run.quality_reason) if run.reliable is None else Cell(word)


def _metric_cell(metric: MetricComparison, i: int) -> Cell:
    value = metric.values[i]
    return na_cell(metric.reasons[i]) if value is None else num(fmt_metric(metric, value, i))


def _metrics(comparison: Comparison) -> str:
    """One row per metric: each run's value, and each later run's ratio to the first."""
    later = comparison.runs[1:]
    heads = ["Metric", *(r.label for r in comparison.runs), *(f"{r.label} / {comparison.runs[0].label}"
                                                               for r in later)]
    rows = []
    for m in comparison.metrics:
        better = {True: " (higher is better)", False: " (lower is better)"}.get(m.higher_is_better, "")
        rows.append([printable(m.label) + better, *(_metric_cell(m, i) for i in range(len(comparison.runs))),
                     *(num(fmt_ratio_cell(m, i)) for i in range(1, len(comparison.runs)))])
    return table(heads, rows)


def _ops(comparison: Comparison, top: int) -> str:
    """Each op's time per traced iteration and utilization per run, and each later run's change."""
    if not comparison.ops:
        return f"<p>{esc(NA)} — no op times to compare</p>"
    runs = comparison.runs
    heads = ["Op", *(f"{r.label} time" for r in runs), *(f"{r.label} util %" for r in runs)]
    for r in runs[1:]:
        heads += [f"Δ {r.label}", f"{r.label}: share of gap"]
    rows = []
    for op in comparison.ops[:top]:
        cells = [Cell(f"<code>{esc(op.op)}</code>", markup=True)]
        cells += [num(fmt_duration(t)) if t is not None else Cell("absent", cls="na")
                  for t in op.time_per_iteration_s]
        cells += [num(fmt_pct(u, suffix="")) for u in op.util_pct]
        for i in range(1, len(runs)):
            cells += [num(_signed_duration(op.delta_s[i])), num(fmt_pct(op.gap_share_pct[i]))]
        rows.append(cells)
    caption = f"The {len(rows)} of {len(comparison.ops)} ops with the largest change, kernel (op self) time per " \
              "traced iteration."
    return table(heads, rows, caption=caption)


def _signed_duration(seconds: float | None) -> str:
    """A change of time with its sign: "+1.00 ms", "-18.0 ms"."""
    if seconds is None:
        return NA
    return ("-" if seconds < 0 else "+") + fmt_duration(abs(seconds))
