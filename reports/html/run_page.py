"""One self-contained HTML page per result: a run (`profile_html`), a sweep (`sweep_html`), a comparison
(`comparison_html`).

The run's page holds what the terminal report holds (reports/terminal.py), top to bottom: the header
(a PARTIAL banner with the reason, NOT STABLE when so), the iterations and machine lines, the metrics, memory by
category, the kernel groups by time, the two rankings, the op groups, the notes and the run's figures. The lines
under the header, the metrics rows and the memory reasons are the terminal's own text (`run_lines`,
`metric_rows`, `memory_reason_lines`), so the page and the terminal show the same figures in the same words;
the page adds what a table cell has room for (exact byte counts, the other precisions' peaks, the memory
bandwidth). Every figure comes from the record as analysis wrote it; this module only chooses units, order and
markup (docs/architecture.md: reports/ computes nothing). A null figure reads "n/a — <reason>". Each function
returns the page's text; writing it (atomically) is the caller's job.
"""

from __future__ import annotations

from tbd.core.profile_result import MEMORY_CATEGORIES, PARTIAL, KernelRow, Memory, Profile
from tbd.reports.console import ABOVE_PEAK_MARK, above_peak, kernel_noun
from tbd.reports.figures.run_figures import figure_gaps, run_title
from tbd.reports.figures.saving import run_figures
from tbd.reports.html.cluster_section import cluster_section
from tbd.reports.html.comparison_page import comparison_html
from tbd.reports.html.page import (
    Cell,
    banner,
    bytes_cell,
    esc,
    facts,
    figures_section,
    maybe,
    na_cell,
    notes_list,
    num,
    page,
    section,
    table,
)
from tbd.reports.html.sweep_page import sweep_html
from tbd.reports.kernels.short_names import short_kernel_name
from tbd.reports.numbers import (
    NA,
    fmt_bandwidth,
    fmt_byte_amount,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_pct,
    fmt_rate,
)
from tbd.reports.printable import printable
from tbd.reports.terminal import memory_reason_lines, metric_rows, run_lines

__all__ = ["comparison_html", "profile_html", "sweep_html"]
#: Kernel groups, ranked groups and op groups shown per table.
DEFAULT_TOP = 15
#: Room for a kernel name in a table cell; the full name unfolds beneath it.
NAME_CHARS = 60


def profile_html(profile: Profile, title: str | None = None, *, top: int = DEFAULT_TOP) -> str:
    """The run as one self-contained HTML page.

    Args: profile: a finished Profile; title: the page's title (default: "tbd · model (framework),
        batch N, device"); top: rows per kernel, ranking and op table.
    Returns: the HTML document.
    """
    title = title or f"tbd · {run_title(profile)}"
    noun = kernel_noun(profile)
    body = [_header(profile, title), _metrics(profile), _memory(profile.metrics.memory_bytes),
            _kernels(profile, noun, top), _rankings(profile, noun, top), _recommendations(profile),
            _op_groups(profile, top),
            cluster_section(profile.cluster) if profile.cluster is not None else "",
            section("Notes", notes_list(profile.notes) or "<p>none</p>", anchor="notes"),
            figures_section(run_figures(profile), figure_gaps(profile))]
    return page(title, body)


def _partial_reason(profile: Profile) -> str:
    """Why a partial run stopped: the note saying "partial: ...", else the first note."""
    why = [n[len("partial:"):].strip() for n in profile.notes if n.lower().startswith("partial:")]
    return printable((why or profile.notes or ["no reason recorded"])[0])


def _header(profile: Profile, title: str) -> str:
    """Title, the loud banners, and what ran where."""
    spec, env = profile.spec, profile.environment
    device_name = (env.get("gpu") or {}).get("name") or (env.get("cpu") or {}).get("model") or NA
    batch = spec.get("batch")
    pairs = [("Model", f"{spec.get('model') or NA} ({spec.get('framework') or NA})"),
             ("Batch", NA if batch is None else str(batch)), ("Precision", str(spec.get("precision") or NA)),
             ("Device", f"{spec.get('device') or NA} — {device_name}"), ("Status", profile.status)]
    if spec.get("trace"):
        pairs.insert(0, ("Trace", str(spec["trace"])))
    parts = [f"<header>\n<h1>{esc(title)}</h1>"]
    if profile.status == PARTIAL:
        parts.append(banner(f"PARTIAL RUN: {_partial_reason(profile)}. Figures cover only what was gathered "
                            "before it stopped."))
    it = profile.iterations
    if it is not None and it.source != "trace" and it.stable is False:
        parts.append(banner("NOT STABLE: iteration times never settled during warm-up; every figure is flagged",
                            warn=True))
    lines = "".join(f"<li>{esc(line)}</li>" for line in run_lines(profile))
    parts += [facts(pairs), f'<ul class="lines" id="run-lines">{lines}</ul>', "</header>"]
    return "\n".join(parts)


def _recommendations(profile: Profile) -> str:
    """The recommendations analysis found the figures show, as the terminal lists them; none: no section."""
    if not profile.recommendations:
        return ""
    return section("Recommendations", notes_list([printable(r.text) for r in profile.recommendations]),
                   anchor="recommendations")


def _metrics(profile: Profile) -> str:
    """The terminal's metrics rows word for word, then what the terminal leaves out: the other precisions' peaks
    and the memory bandwidth."""
    rows = [[label, num(value) if value != NA else na_cell(None), detail]
            for label, value, detail in metric_rows(profile)]
    flop = profile.metrics.flop_util_pct
    others = [f"{printable(p)} {fmt_rate(v)}" for p, v in flop.peaks_by_precision.items() if p != "fp32"]
    if others:
        rows.append(["Peak FLOP/s, other precisions", "", ", ".join(others)])
    bandwidth = profile.metrics.memory_bandwidth
    if bandwidth is not None:
        source = {"gpu_table": "GPU table", "measured_copy": "measured copy"}.get(bandwidth.source, bandwidth.source)
        rows.append(["Memory bandwidth", maybe(fmt_bandwidth(bandwidth.value), bandwidth.value, bandwidth.reason),
                     f"{source}: {bandwidth.reason}" if bandwidth.value is not None and bandwidth.reason else source])
    return section("Metrics", table(["Metric", "Value", "Detail"], rows), anchor="metrics")


def _memory(mem: Memory) -> str:
    """Each category's own peak and the split at the allocator's peak as the terminal shows them (its units, its
    "(analytic)" marks, its reasons under the table), the exact bytes beside them."""
    rows = []
    for name in (*MEMORY_CATEGORIES, "unattributed"):
        own = Cell("—") if name == "unattributed" else _bytes(getattr(mem, name), mem.reasons.get(name),
                                                               analytic=mem.sources.get(name) == "analytic")
        at_peak = mem.at_peak.get(name)
        at_peak_cell = _bytes(at_peak, mem.reasons.get("at_peak") if not mem.at_peak else None)
        rows.append([name.replace("_", " "), own, _exact(getattr(mem, name, None)), at_peak_cell, _exact(at_peak)])
    peak = _bytes(mem.allocator_peak, mem.reasons.get("allocator_peak"))
    footer = ["allocator peak", peak, _exact(mem.allocator_peak), peak, _exact(mem.allocator_peak)]
    parts = [table(["Category", "Own peak", "bytes", "At allocator peak", "bytes"], rows, footer=footer),
             notes_list(memory_reason_lines(mem)), _torch_memory(mem.cross_check)]
    return section("Memory by category", '<p class="sub">Own peak: each category\'s highest over the trace window, '
                   "each at its own moment. At allocator peak: live at the allocator's highest moment; adds up to "
                   "it (unattributed: what tbd could not put in a category).</p>", *parts, anchor="memory")


def _bytes(value: int | None, reason: str | None, analytic: bool = False) -> Cell:
    """Bytes as the terminal prints them ("1.50 GiB", "(analytic)" when inferred), the exact count or the reason
    in the tooltip."""
    if value is None:
        return Cell(NA, title=reason, cls="na")
    return num(fmt_bytes(value) + (" (analytic)" if analytic else ""), title=f"{fmt_count(value)} bytes")


def _exact(value) -> Cell:
    return num(fmt_count(value)) if value is not None else num("")


def _torch_memory(cross: dict | None) -> str:
    """PyTorch's memory-profiler categories beside ours, as recorded; its reason when it did not run (the terminal's
    words)."""
    if not cross:
        return ""
    peaks = cross.get("peak_bytes")
    if not isinstance(peaks, dict):
        reason = cross.get("reason")
        why = na_cell(reason if isinstance(reason, str) else None).text
        return f"<p>PyTorch cross-check: {esc(why)}</p>"
    at_peak, maps_to = cross.get("at_peak") or {}, cross.get("maps_to") or {}
    rows = [[printable(name), printable(str(maps_to.get(name, "—"))).replace("_", " "), bytes_cell(peak),
             bytes_cell(at_peak.get(name))] for name, peak in peaks.items()]
    return table(["PyTorch category", "Ours", "Own peak", "At torch's peak"], rows,
                 footer=["total at torch's peak", "", "", bytes_cell(cross.get("total_peak_bytes"))],
                 caption=f"PyTorch memory profiler cross-check (device {printable(cross.get('device', NA))})")


def kernel_name_cell(name: str) -> Cell:
    """A kernel's short name, its full name unfolding beneath (both escaped: C++ names hold < and >)."""
    short = short_kernel_name(name, NAME_CHARS)
    if short == printable(name):
        return Cell(f"<code>{esc(name)}</code>", markup=True)
    return Cell(f"<details><summary><code>{esc(short)}</code></summary><code>{esc(name)}</code></details>",
                markup=True)


def _util_cell(row: KernelRow) -> Cell:
    if row.util_pct is None:
        return na_cell(row.util_note)
    if above_peak(row):
        return num(f"{fmt_pct(row.util_pct, suffix='')} {ABOVE_PEAK_MARK}", title=row.util_note)
    return num(fmt_pct(row.util_pct, suffix=""))


def _share_cell(value: float | None, note: str | None) -> Cell:
    """A Roof % or bandwidth % cell, flagged above 100 % as the terminal flags it (the note says why)."""
    if isinstance(value, (int, float)) and value > 100.0:
        return num(f"{fmt_pct(value, suffix='')} {ABOVE_PEAK_MARK}", title=note)
    return num(fmt_pct(value, suffix=""))


def _kernels(profile: Profile, noun: str, top: int) -> str:
    """The kernel groups by time, longest first."""
    rows = [[num(str(i)), kernel_name_cell(k.name), num(fmt_count(k.calls)), num(fmt_duration(k.time_s)),
             num(fmt_pct(k.time_share_pct, suffix="")), _util_cell(k), printable(k.precision),
             Cell(k.bound) if k.bound else na_cell(k.roofline_note), _share_cell(k.roofline_pct, k.roofline_note)]
            for i, k in enumerate(profile.kernels[:top], 1)]
    if not rows:
        return section(f"{noun.capitalize()} by time", f"<p>{esc(NA)} — no {esc(noun)} in the trace window</p>",
                       anchor="kernels")
    heads = ["#", noun[:-1].capitalize(), "Calls", "Time", "Share %", "Util %", "Precision", "Bound", "Roof %"]
    caption = (f"The top {len(rows)} of {len(profile.kernels)} {noun} groups by time in the trace window. "
               f"{ABOVE_PEAK_MARK}: above its precision's peak (precision or peak misdetected), not ranked.")
    return section(f"{noun.capitalize()} by time", table(heads, rows, caption=caption), anchor="kernels")


def _rankings(profile: Profile, noun: str, top: int) -> str:
    """The two low-utilization rankings (the paper's Table V; the memory-bound one), with their thresholds."""
    flop_threshold = profile.metrics.flop_util_pct.kernel_average_pct
    bandwidth = profile.metrics.memory_bandwidth
    compute = [[kernel_name_cell(k.name), num(fmt_count(k.calls)), num(fmt_duration(k.time_s)),
                num(fmt_pct(k.time_share_pct, suffix="")), _util_cell(k), _share_cell(k.roofline_pct, k.roofline_note),
                printable(k.precision)] for k in profile.low_util_kernels[:top]]
    memory = [[kernel_name_cell(k.name), num(fmt_count(k.calls)), num(fmt_duration(k.time_s)),
               num(fmt_pct(k.time_share_pct, suffix="")), _share_cell(k.bandwidth_util_pct, k.roofline_note),
               num(fmt_byte_amount(k.bytes)), _share_cell(k.roofline_pct, k.roofline_note)]
              for k in profile.low_bandwidth_kernels[:top]]
    name = noun[:-1].capitalize()
    return section(
        "Low-utilization rankings", _recoverable(profile, noun, top),
        f"<h3>Compute-bound {esc(noun)} below the average FLOP utilization ({esc(fmt_pct(flop_threshold))})</h3>",
        table([name, "Calls", "Time", "Share %", "Util %", "Roof %", "Precision"], compute)
        if compute else "<p>none</p>",
        f"<h3>Memory-bound {esc(noun)} below the average bandwidth utilization "
        f"({esc(fmt_pct(bandwidth.kernel_average_pct if bandwidth else None))})</h3>",
        table([name, "Calls", "Time", "Share %", "Bandwidth %", "Bytes", "Roof %"], memory)
        if memory else "<p>none</p>", anchor="rankings")


def _recoverable(profile: Profile, noun: str, top: int) -> str:
    """The default ranking, as `tbd kernels` and the terminal give it: the time reaching the roof would win back."""
    heading = f"<h3>Where the time can be won back: {esc(noun)} by time x (1 - Roof %)</h3>"
    rows = [[num(str(i)), kernel_name_cell(k.name), num(fmt_duration(k.recoverable_s)),
             num(fmt_pct(k.recoverable_pct, suffix="")), num(fmt_pct(k.time_share_pct, suffix="")),
             Cell(k.bound or NA), _share_cell(k.roofline_pct, k.roofline_note)]
            for i, k in enumerate(profile.recoverable_kernels[:top], 1)]
    if not rows:
        return heading + "<p>none</p>"
    caption = (f"{len(rows)} of {len(profile.recoverable_kernels)}, most first. Win: the group's time x (1 - Roof %), "
               f"what reaching its roof would save; Win %: that share of the summed {noun[:-1]} time. Then the "
               "paper's Table V and the memory-bound view.")
    return heading + table(["#", noun[:-1].capitalize(), "Win", "Win %", "Share %", "Bound", "Roof %"], rows,
                           caption=caption)


def _op_groups(profile: Profile, top: int) -> str:
    """Kernel (op self) time by launching op, longest first."""
    if not profile.op_groups:
        return section("Time by launching op", f"<p>{esc(NA)} — the profile has no op groups</p>", anchor="ops")
    rows = [[Cell(f"<code>{esc(g.name)}</code>", markup=True), num(fmt_count(g.calls)), num(fmt_duration(g.time_s)),
             num(fmt_pct(g.time_share_pct, suffix="")), num(fmt_rate(g.flops, "FLOP")),
             num(fmt_pct(g.util_pct, suffix=""))] for g in profile.op_groups[:top]]
    return section("Time by launching op", table(["Op", "Calls", "Time", "Share %", "FLOPs", "Util %"], rows,
                                                 caption=f"The top {len(rows)} of {len(profile.op_groups)} ops."),
                   anchor="ops")
