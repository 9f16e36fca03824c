"""One self-contained HTML page per result: a run (`profile_html`), a sweep (`sweep_html`), a comparison
(`comparison_html`).

The run's page holds what the terminal report holds (reports/terminal.py), top to bottom: the header
(a PARTIAL banner with the reason, NOT STABLE when so), the metrics, memory by category, the kernel
groups by time, the two rankings, the op groups, the notes and the run's figures. Every figure comes
from the record as analysis wrote it; this module only chooses units, order and markup (docs/architecture.md:
reports/ computes nothing). A null figure reads "n/a — <reason>". Each function returns the
page's text; writing it (atomically) is the caller's job.
"""

from __future__ import annotations

from tbd.core.profile_result import MEMORY_CATEGORIES, PARTIAL, FlopUtil, KernelRow, Memory, Profile, Value
from tbd.reports.console import ABOVE_PEAK_MARK, above_peak, fmt_window, kernel_noun
from tbd.reports.figures.run_figures import run_title
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
from tbd.reports.numbers import NA, fmt_bandwidth, fmt_bytes_si, fmt_count, fmt_duration, fmt_pct, fmt_rate, fmt_sig
from tbd.reports.printable import printable
from tbd.reports.quality_text import machine_parts, throughput_detail

__all__ = ["comparison_html", "profile_html", "sweep_html"]
#: Kernel groups, ranked groups and op groups shown per table.
DEFAULT_TOP = 15
#: Room for a kernel name in a table cell; the full name unfolds beneath it.
NAME_CHARS = 60
_PEAK_SOURCES = {"gpu_table": "GPU table", "hardware_model": "hardware model", "user": "given with --peak-flops",
                 "measured_gemm": "measured GEMM ceiling", "none": "none"}


def profile_html(profile: Profile, title: str | None = None, *, top: int = DEFAULT_TOP) -> str:
    """The run as one self-contained HTML page.

    Args: profile: a finished Profile; title: the page's title (default: "tbd · model (framework),
        batch N, device"); top: rows per kernel, ranking and op table.
    Returns: the HTML document.
    """
    title = title or f"tbd · {run_title(profile)}"
    noun = kernel_noun(profile)
    body = [_header(profile, title), _metrics(profile), _memory(profile.metrics.memory_bytes),
            _kernels(profile, noun, top), _rankings(profile, noun, top), _op_groups(profile, top),
            cluster_section(profile.cluster) if profile.cluster is not None else "",
            section("Notes", notes_list(profile.notes) or "<p>none</p>", anchor="notes"),
            figures_section(run_figures(profile))]
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
             ("Device", f"{spec.get('device') or NA} — {device_name}"), ("Status", profile.status),
             *_iteration_facts(profile)]
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
    parts += [facts(pairs), "</header>"]
    return "\n".join(parts)


def _iteration_facts(profile: Profile) -> list[tuple[str, str]]:
    """Warm-up, stability and the windows; for a trace, its ProfilerSteps."""
    it = profile.iterations
    if it is None:
        return [("Iterations", f"{NA} — no iteration was recorded")]
    if it.source == "trace":
        return [("Iterations", f"{len(it.times_s)} ProfilerSteps from the trace; warm-up and stability not checked")]
    # warmup_detected is False both for a given warm-up and for a detector that ran out of budget.
    how = "detected" if it.warmup_detected else ("not detected" if it.stable is False else "given")  # None: given
    return [("Warm-up", f"{it.warmup} iterations in {fmt_duration(it.warmup_s)} ({how})"),
            ("Stable", "yes" if it.stable else "NO" if it.stable is False else "not checked"),
            ("Windows", f"timing iterations {fmt_window(it.timing_window)} · trace iterations "
                        f"{fmt_window(it.trace_window)}"), *_machine_facts(profile)]


def _machine_facts(profile: Profile) -> list[tuple[str, str]]:
    """The measurement-quality record in one line; its warnings are among the notes."""
    return [] if profile.quality is None else [("Machine", " · ".join(machine_parts(profile.quality, fmt_rate)))]


def _value_row(label: str, value: Value, detail: str) -> list:
    return [label, maybe(fmt_pct(value.value), value.value, value.reason), "" if value.value is None else detail]


def _metrics(profile: Profile) -> str:
    """The paper's metrics, each with what it is measured over or why it is null."""
    m = profile.metrics
    tp, flop = m.throughput, m.flop_util_pct
    also = ", ".join(f"{fmt_sig(v)} {printable(unit)}" for unit, v in tp.also.items())
    rows = [["Throughput", maybe(f"{fmt_sig(tp.value)} {printable(tp.unit)}", tp.value, tp.reason),
             throughput_detail(tp, also, fmt_sig, fmt_pct)],
            *([_value_row("GPU busy", m.gpu_busy_pct, "union of kernel intervals / trace-window wall time")]
              if m.gpu_busy_traced_pct is None else
              [_value_row("GPU busy", m.gpu_busy_pct, "kernel time per traced iteration / untraced iteration time "
                          "(timing window)"),
               _value_row("GPU busy, as traced", m.gpu_busy_traced_pct, "union of kernel intervals / traced "
                          "wall time, which the tracer stretches on the host")]),
            _value_row("NVML utilization.gpu", m.gpu_busy_nvml_pct, "driver samples, timing window"),
            ["FLOP utilization", maybe(fmt_pct(flop.value), flop.value, flop.reason),
             f"{flop.source}: {fmt_rate(flop.flops, 'FLOP')} in {fmt_duration(flop.busy_s)} busy"
             if flop.value is not None else ""],
            *_flop_term_rows(flop),
            ["Peak FLOP/s used (FP32)", maybe(fmt_rate(flop.peak_flops), flop.peak_flops, flop.hardware_peak_reason),
             _peak_detail(flop)],
            *_flop_gap_rows(profile, flop),
            _value_row("CPU utilization", m.cpu_util_pct, "all cores, timing window")]
    bandwidth = m.memory_bandwidth
    if bandwidth is not None:
        source = {"gpu_table": "GPU table", "measured_copy": "measured copy"}.get(bandwidth.source, bandwidth.source)
        rows.append(["Memory bandwidth", maybe(fmt_bandwidth(bandwidth.value), bandwidth.value, bandwidth.reason),
                     f"{source}: {bandwidth.reason}" if bandwidth.value is not None and bandwidth.reason else source])
    return section("Metrics", table(["Metric", "Value", "Detail"], rows), anchor="metrics")


def _peak_detail(flop: FlopUtil) -> str:
    """Where the FP32 peak came from, and the other precisions' peaks."""
    text = _PEAK_SOURCES.get(flop.peak_source, printable(flop.peak_source))
    if flop.peak_formula:
        text += f": {printable(flop.peak_formula)}"
    if flop.peak_source == "measured_gemm":
        hardware = fmt_rate(flop.hardware_peak_flops) if flop.hardware_peak_flops is not None else \
            f"{NA} — {printable(flop.hardware_peak_reason)}"
        text += f"; hardware model {hardware}"
    elif flop.measured_ceiling_flops is not None:
        text += f"; measured GEMM ceiling {fmt_rate(flop.measured_ceiling_flops)}"
    others = [f"{printable(p)} {fmt_rate(v)}" for p, v in flop.peaks_by_precision.items() if p != "fp32"]
    return text + (f"; other precisions: {', '.join(others)}" if others else "")


def _flop_term_rows(flop: FlopUtil) -> list[list]:
    """The FLOP utilization's terms, as the terminal shows them: each precision's FLOPs and the peak it is held
    to, the share above peak with the capped figure, the FLOPs of groups not listed."""
    rows = []
    for w in flop.by_precision:
        at = (f"at {fmt_rate(w.peak_flops)} peak: {fmt_duration(w.seconds_at_peak)} at peak" if w.peak_flops
              else "no peak for it: left out of the utilization")
        rows.append([f"· {printable(w.precision) or 'precision unknown'}", num(fmt_rate(w.flops, "FLOP")),
                     f"{fmt_pct(w.share_pct)} of the FLOPs, {at}"])
    if flop.above_peak_flops_pct is not None:
        capped = f"{fmt_pct(flop.value_capped_pct)} with them capped at 100 %" if flop.value_capped_pct is not None \
            else "capped: n/a"
        rows.append(["· above peak", num(fmt_pct(flop.above_peak_flops_pct)),
                     f"of the FLOPs in kernel groups above their peak (Winograd, FFT: fewer operations than "
                     f"counted); {capped}"])
    if flop.flops_unlisted:
        rows.append(["· not listed", num(fmt_rate(flop.flops_unlisted, "FLOP")),
                     "in kernel groups past the profile's kernel list"])
    return rows


def _flop_gap_rows(profile: Profile, flop: FlopUtil) -> list[list]:
    """The share of kernel time without FLOPs, then one row per cause."""
    noun = kernel_noun(profile)
    rows = [["No FLOP formula", maybe(fmt_pct(flop.unattributed_busy_pct), flop.unattributed_busy_pct, flop.reason),
             f"busy time in {noun} with no FLOP formula" if flop.unattributed_busy_pct is not None else ""]]
    gaps = profile.metrics.no_flop_formula
    for gap in gaps.causes if gaps else []:
        ops = ", ".join(f"{printable(o['name'])} {fmt_pct(o['pct'])}" for o in gap.ops[:5])
        rows.append([f"· {gap.cause.replace('_', ' ')}", num(fmt_pct(gap.pct)),
                     printable(gap.detail) + (f": {ops}" if ops else "")])
    return rows


def _memory(mem: Memory) -> str:
    """Each category's own peak and the split at the allocator's peak, human units beside exact bytes."""
    rows = []
    for name in (*MEMORY_CATEGORIES, "unattributed"):
        own = Cell("—") if name == "unattributed" else bytes_cell(getattr(mem, name), mem.reasons.get(name))
        at_peak = mem.at_peak.get(name)
        at_peak_cell = bytes_cell(at_peak, mem.reasons.get("at_peak") if not mem.at_peak else None)
        rows.append([name.replace("_", " "), own, _exact(getattr(mem, name, None)), at_peak_cell, _exact(at_peak)])
    peak = bytes_cell(mem.allocator_peak, mem.reasons.get("allocator_peak"))
    footer = ["allocator peak", peak, _exact(mem.allocator_peak), peak, _exact(mem.allocator_peak)]
    # A null category's reason is in its cell; what is left qualifies figures that exist (or has no cell).
    reasons = [f"{name.replace('_', ' ')}: {printable(reason)}" for name, reason in mem.reasons.items()
               if not (name in MEMORY_CATEGORIES and getattr(mem, name) is None)]
    parts = [table(["Category", "Own peak", "bytes", "At allocator peak", "bytes"], rows, footer=footer),
             notes_list(reasons), _torch_memory(mem.cross_check)]
    return section("Memory by category", '<p class="sub">Each category\'s own peak over the trace window, and '
                   "the split at the allocator's peak.</p>", *parts, anchor="memory")


def _exact(value) -> Cell:
    return num(fmt_count(value)) if value is not None else num("")


def _torch_memory(cross: dict | None) -> str:
    """PyTorch's memory-profiler categories beside ours, as recorded; its reason when it did not run."""
    if not cross:
        return ""
    peaks = cross.get("peak_bytes")
    if not isinstance(peaks, dict):
        reason = cross.get("reason")
        why = na_cell(reason if isinstance(reason, str) else None).text
        return f"<p>PyTorch memory profiler cross-check: {esc(why)}</p>"
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


def _kernels(profile: Profile, noun: str, top: int) -> str:
    """The kernel groups by time, longest first."""
    rows = [[num(str(i)), kernel_name_cell(k.name), num(fmt_count(k.calls)), num(fmt_duration(k.time_s)),
             num(fmt_pct(k.time_share_pct, suffix="")), _util_cell(k), printable(k.precision),
             Cell(k.bound) if k.bound else na_cell(k.roofline_note), num(fmt_pct(k.roofline_pct, suffix=""))]
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
                num(fmt_pct(k.time_share_pct, suffix="")), _util_cell(k), num(fmt_pct(k.roofline_pct, suffix="")),
                printable(k.precision)] for k in profile.low_util_kernels[:top]]
    memory = [[kernel_name_cell(k.name), num(fmt_count(k.calls)), num(fmt_duration(k.time_s)),
               num(fmt_pct(k.time_share_pct, suffix="")), num(fmt_pct(k.bandwidth_util_pct, suffix="")),
               num(fmt_bytes_si(k.bytes)), num(fmt_pct(k.roofline_pct, suffix=""))]
              for k in profile.low_bandwidth_kernels[:top]]
    name = noun[:-1].capitalize()
    return section(
        "Low-utilization rankings",
        f"<h3>Compute-bound {esc(noun)} below the average FLOP utilization ({esc(fmt_pct(flop_threshold))})</h3>",
        table([name, "Calls", "Time", "Share %", "Util %", "Roof %", "Precision"], compute)
        if compute else "<p>none</p>",
        f"<h3>Memory-bound {esc(noun)} below the average bandwidth utilization "
        f"({esc(fmt_pct(bandwidth.kernel_average_pct if bandwidth else None))})</h3>",
        table([name, "Calls", "Time", "Share %", "Bandwidth %", "Bytes", "Roof %"], memory)
        if memory else "<p>none</p>", anchor="rankings")


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
