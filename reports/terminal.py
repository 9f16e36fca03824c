"""The terminal report: a finished `Profile` as text, a kernel engineer's first screen.

Sections, top to bottom: header (run, device, status; a PARTIAL run gets a loud banner), the
iterations line (warm-up, stability, windows), the metrics table, memory, the kernels by time, the
ranking (by the time that could be won back; or, `--ranking table-v`, the paper's Table V: compute-bound, then
memory-bound), the recommendations the figures show, notes. Every figure comes from the Profile as analysis computed it; this
module only chooses units and layout (docs/architecture.md: reports/ computes nothing). A null
figure prints as "n/a — <reason>".
"""

from __future__ import annotations

import math
import re
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tbd.core.errors import UsageError
from tbd.core.profile_result import (
    MEMORY_CATEGORIES,
    PARTIAL,
    FlopUtil,
    GpuIdle,
    Iterations,
    Memory,
    NoFlopFormula,
    Profile,
    Quality,
    Value,
)
from tbd.reports.cluster_text import render_cluster
from tbd.reports.console import (
    NA,
    console_text,
    fmt_window,
    kernel_noun,
    legend_grid,
    listed,
    new_console,
    plain_table,
    shorten_middle,
)
from tbd.reports.counters_text import counters_section
from tbd.reports.kernels.tables import RECOVERABLE, rankings, time_table
from tbd.reports.numbers import byte_counts_in_words, fmt_bytes, fmt_pct_cell, fmt_seconds_cell
from tbd.reports.printable import printable
from tbd.reports.quality_text import machine_parts, throughput_detail

LOUD = "bold white on red"
_GAP_NAME_CHARS = 60
_FLOP_UNITS = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"))


def fmt_flops(value: float | None, suffix: str = "FLOP/s") -> str:
    """A FLOP count or rate with a decimal prefix, e.g. "66.9 TFLOP/s"."""
    if value is None or not math.isfinite(value):
        return NA
    for size, prefix in _FLOP_UNITS:
        if abs(value) >= size:
            return f"{value / size:.1f} {prefix}{suffix}"
    return f"{value:.0f} {suffix}"


def _fmt_rate(value: float) -> str:
    # At least three significant digits: 5.43 images/s, 1,843.2 sentences/s.
    if not math.isfinite(value):
        return NA
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"


def _na(reason: str | None) -> str:
    return f"{NA} — {printable(reason)}" if reason else NA


def _header(profile: Profile) -> list[RenderableType]:
    spec, env = profile.spec, profile.environment
    gpu = env.get("gpu") or {}
    cpu = env.get("cpu") or {}
    batch = spec.get("batch")
    # A profile made by `tbd analyze` names the trace it read instead of a run.
    line = Text("tbd analyze · " if spec.get("trace") else "tbd profile · ", style="bold")
    # Each field capped on its own (printable), so a capped one says its own length.
    line.append(" · ".join([f"{printable(spec.get('model', NA))} ({printable(spec.get('framework', NA))})",
                            f"batch {printable(batch if batch is not None else NA)}",
                            printable(spec.get("precision", NA))]))
    line.append(" · ")
    device = Text(f"device: {printable(spec.get('device', NA))} — "
                  f"{printable(gpu.get('name') or cpu.get('model') or NA)}")
    if profile.status != PARTIAL:
        line.append(profile.status)
        return [line, device]
    line.append("PARTIAL", style=LOUD)
    # docs/architecture.md: a partial profile "says why in notes". tbd/cli/run_analysis.py puts it first as "partial: <why>";
    # other writers may not prefix it, so the first note stands in for the reason then.
    why = [n[len("partial:"):].strip() for n in profile.notes if n.lower().startswith("partial:")]
    reason = printable((why or profile.notes or ["no reason recorded"])[0])
    banner = Text(f"!! PARTIAL RUN: {reason}. Figures cover only what was gathered before it stopped. !!",
                  style=LOUD)
    return [line, banner, device]


def _iterations(profile: Profile) -> list[RenderableType]:
    it = profile.iterations
    if it is not None and it.source == "trace":
        return _trace_iterations(it)
    if it is None:
        return [Text("iterations: n/a — no iteration was recorded")]
    # The progress bar counts warm-up iterations run; the detector finds the stable phase's start
    # some iterations before it decides (docs/warmup.md), so the line gives both. A profile from
    # before `warmup_run` knew only the start.
    run = it.warmup_run if it.warmup_run is not None else it.warmup
    ran = f"warm-up: {run} iterations run in {it.warmup_run_time_s:.2f} s"
    if it.stable is False:  # the detector's budget ran out (warmup_detected False, or True in older profiles)
        line = Text(f"{ran} · stable: ")
        line.append("NO", style=LOUD)
        line.append(", no stable phase found")
    elif not it.warmup_detected:  # --warmup: nothing was checked (older profiles said stable: true regardless)
        line = Text(f"{ran} (given by --warmup) · stable: not checked")
    else:
        line = Text(f"{ran} · stable from iteration {it.warmup} (detected)")
    windows = Text(f"windows: timing iterations {fmt_window(it.timing_window)}"
                   f" · trace iterations {fmt_window(it.trace_window)}")
    if it.stable is not False:
        return [line, windows]
    return [line, Text("!! NOT STABLE: iteration times never settled during warm-up; every figure is flagged !!",
                       style=LOUD), windows]


def _trace_iterations(it: Iterations) -> list[RenderableType]:
    """A trace's ProfilerStep spans: how many, which, and their lengths (nothing about warm-up)."""
    steps = it.step_numbers or []
    which = f"#{steps[0]}–#{steps[-1]}" if len(steps) > 1 else (f"#{steps[0]}" if steps else "")
    times = it.times_s
    mean = sum(times) / len(times) if times else None
    spread = f" ({fmt_seconds_cell(min(times))}–{fmt_seconds_cell(max(times))})" if len(times) > 1 else ""
    return [Text(f"iterations: {len(times)} ProfilerSteps from the trace {which}, {fmt_seconds_cell(mean)} each on "
                 f"average{spread}; warm-up and stability not checked (a trace alone)")]


def _flop_term_rows(flop: FlopUtil) -> list[tuple[str, str, str]]:
    """The headline's terms: each precision's FLOPs at its peak, the share above peak, the FLOPs not listed."""
    rows = []
    for w in flop.by_precision:
        at = (f"at {fmt_flops(w.peak_flops)} -> {fmt_seconds_cell(w.seconds_at_peak)} at peak" if w.peak_flops
              else "no peak for it: left out of the utilization")
        rows.append((f"· {w.precision or 'precision unknown'}", fmt_flops(w.flops, "FLOP"),
                     f"{fmt_pct_cell(w.share_pct)} % of the FLOPs, {at}"))
    if flop.above_peak_flops_pct is not None:
        capped = (f"{fmt_pct_cell(flop.value_capped_pct)} % with them capped at 100 %"
                  if flop.value_capped_pct is not None else "capped: n/a")
        rows.append(("· above peak", f"{fmt_pct_cell(flop.above_peak_flops_pct)} %",
                     f"of the FLOPs in kernel groups above their peak (a fast algorithm such as Winograd or FFT "
                     f"does fewer operations than counted); {capped}"))
    if flop.flops_unlisted:
        rows.append(("· not listed", fmt_flops(flop.flops_unlisted, "FLOP"),
                     "in kernel groups past the profile's kernel list (the listed groups' FLOPs and these add up "
                     "to the total)"))
    return rows


def _peak_detail(flop: FlopUtil) -> str:
    if flop.peak_source == "measured_gemm":
        used = "GEMM ceiling"  # the measured one: docs/architecture.md, peak FLOP/s
        hw = fmt_flops(flop.hardware_peak_flops) if flop.hardware_peak_flops is not None \
            else _na(flop.hardware_peak_reason)
        return f"{used}; hardware model {hw}"
    if flop.peak_source == "gpu_table":
        return f"GPU table: {printable(flop.peak_formula)}" if flop.peak_formula else "GPU table"
    if flop.peak_source == "user":
        return "given with --peak-flops"
    ceiling = fmt_flops(flop.measured_ceiling_flops)
    return f"hardware model; GEMM ceiling {ceiling}"


def _cpu_detail(quality: Quality | None) -> str:
    if quality is None or quality.workload_cores is None or quality.other_load_cores is None:
        return "all cores, timing window"
    spread = ""
    low_high = quality.cpu_util_range_pct
    if len(quality.repeats) > 1 and low_high:
        spread = f" ({fmt_pct_cell(low_high[0])}–{fmt_pct_cell(low_high[1])} % over the {len(quality.repeats)} windows)"
    return (f"all cores, timing windows{spread}: this workload {quality.workload_cores:.2f} cores, other "
            f"processes {quality.other_load_cores:.2f}")


def _measurement(profile: Profile) -> list[RenderableType]:
    """One line on the machine during the windows; what makes figures unreliable is in the notes."""
    if profile.quality is None:
        return []
    *parts, verdict = machine_parts(profile.quality, fmt_flops)
    line = Text("machine: " + " · ".join(parts) + " · ")
    line.append(verdict, style="" if profile.quality.reliable else LOUD)
    return [line]


GPU_BUSY_DETAIL = "kernel-interval union / wall time"
GPU_BUSY_RUN_DETAIL = "kernel time per traced iteration / untraced iteration time (timing window)"
GPU_BUSY_TRACED_DETAIL = "kernel-interval union / traced wall time, which the tracer stretches on the host"


def metric_rows(profile: Profile) -> list[tuple[str, str, str]]:
    """The metrics table's rows as text: (metric, value, detail), in the order printed.

    The run page (reports/html/run_page.py) shows these same strings, so the two never disagree.
    """
    m = profile.metrics
    noun = kernel_noun(profile)
    rows: list[tuple[str, str, str]] = []
    tp = m.throughput
    also = printable(", ".join(f"{_fmt_rate(v)} {unit}" for unit, v in tp.also.items()))
    rows.append(("Throughput", printable(f"{_fmt_rate(tp.value)} {tp.unit}") if tp.value is not None else NA,
                 _na(tp.reason) if tp.value is None else throughput_detail(tp, also, _fmt_rate,
                                                                           lambda v: f"{fmt_pct_cell(v)} %")))
    busy: list[tuple[str, Value, str]] = [
        ("GPU busy", m.gpu_busy_pct, GPU_BUSY_DETAIL if m.gpu_busy_traced_pct is None else GPU_BUSY_RUN_DETAIL),
        *([("GPU busy, as traced", m.gpu_busy_traced_pct, GPU_BUSY_TRACED_DETAIL)]
          if m.gpu_busy_traced_pct is not None else []),
        ("NVML utilization.gpu", m.gpu_busy_nvml_pct, "driver samples, timing window"),
    ]
    rows += [(label, *_value_cells(value, detail)) for label, value, detail in busy]
    rows += _idle_rows(m.gpu_idle)
    flop = m.flop_util_pct
    if flop.value is not None:
        detail = f"{flop.source}: {fmt_flops(flop.flops, 'FLOP')} in {fmt_seconds_cell(flop.busy_s)} busy"
        if flop.by_precision:
            detail += ": the seconds at peak below over the busy time"
        rows.append(("FLOP utilization", f"{fmt_pct_cell(flop.value)} %", detail))
    else:
        rows.append(("FLOP utilization", NA, _na(flop.reason)))
    rows += _flop_term_rows(flop)
    peak = fmt_flops(flop.peak_flops) if flop.peak_flops is not None else NA
    rows.append(("FP32 peak FLOP/s", peak, _peak_detail(flop) if flop.peak_flops is not None
                 else _na(flop.hardware_peak_reason)))
    if flop.unattributed_busy_pct is not None:
        rows.append(("No FLOP formula", f"{fmt_pct_cell(flop.unattributed_busy_pct)} %",
                     f"busy time in {noun} with no FLOP formula" + (", by cause:" if m.no_flop_formula and
                                                                    m.no_flop_formula.causes else "")))
        rows += _flop_gap_rows(m.no_flop_formula)
    else:
        rows.append(("No FLOP formula", NA, _na(flop.reason)))
    rows.append(("CPU utilization", *_value_cells(m.cpu_util_pct, _cpu_detail(profile.quality))))
    return rows


def _metrics(profile: Profile) -> list[RenderableType]:
    table = plain_table()
    table.add_column("Metric")
    table.add_column("Value", justify="right", no_wrap=True)
    table.add_column("Detail")
    for row in metric_rows(profile):  # a detail quotes the profile's own words (a source, a reason): made printable
        table.add_row(*(printable(cell) if isinstance(cell, str) else cell for cell in row))
    return [Text("Metrics", style="bold"), table]


def run_lines(profile: Profile) -> list[str]:
    """The lines under the header as plain text: warm-up and stability, the windows, the machine.

    The run page shows them word for word; the loud NOT STABLE line is left out (a page shows it as a banner).
    """
    return [t.plain for t in (*_iterations(profile), *_measurement(profile))
            if isinstance(t, Text) and not t.plain.startswith("!!")]


def memory_reason_lines(mem: Memory) -> list[str]:
    """The reasons under the memory table as printed, one clause said once ("weights, gradients: n/a — why")."""
    return [printable(f"{', '.join(names)}: {text}") for names, text in _memory_reasons(mem)]


_GAP_LABELS = {"communication": "· communication", "compiled_region": "· compiled regions",
               "shapes_not_recorded": "· shapes not recorded", "shapes_unreadable": "· shapes unreadable",
               "no_launch_op": "· no launching op", "no_formula": "· no formula"}


def _flop_gap_rows(gaps: NoFlopFormula | None) -> list[tuple[str, str, str]]:
    """One row per cause of kernel time without FLOPs: label, share, what it is (and its top ops)."""
    if gaps is None:
        return []
    rows = []
    for gap in gaps.causes:
        detail = printable(gap.detail)
        if gap.cause == "communication" and gaps.communication_overlap_pct is not None:
            detail += f"; {fmt_pct_cell(gaps.communication_overlap_pct)} % of their time overlaps other kernels"
        elif gap.cause in ("no_formula", "shapes_not_recorded", "shapes_unreadable") and gap.ops:
            # Op names shortened: this cell wraps, and a name thousands of characters long would fill screens.
            detail += ": " + ", ".join(f"{shorten_middle(printable(o['name']), _GAP_NAME_CHARS)} {fmt_pct_cell(o['pct'])} %"
                                       for o in gap.ops)
        label = _GAP_LABELS.get(gap.cause, f"· {shorten_middle(printable(gap.cause), _GAP_NAME_CHARS)}")
        rows.append((label, f"{fmt_pct_cell(gap.pct)} %", detail))
    return rows


_IDLE_LABELS = {"host_bound": ("· host bound", "next kernel launched after the GPU ran dry"),
                "synchronisation": ("· synchronisation", "host blocked in a Synchronize call, then launching"),
                "memcpy": ("· memcpy", "a memcpy or memset ran, no kernel"),
                "launch_gap": ("· launch gaps", "next kernel queued, gap < {gap}"),
                "other": ("· other", "next kernel queued, waited longer: an event, another stream")}


def _idle_rows(idle: GpuIdle | None) -> list[tuple[str, str, str]]:
    """GPU idle time in the trace window and its causes (analysis.idle_time), each a share of the idle time."""
    if idle is None:
        return []
    rows = [("GPU idle", f"{fmt_pct_cell(idle.idle_pct)} %",
             f"{fmt_seconds_cell(idle.idle_s)} of {fmt_seconds_cell(idle.window_s)} traced, {idle.gaps} gaps"
             + (", by cause:" if idle.idle_s else ""))]
    if not idle.idle_s:
        return rows
    unread = []
    for cause, seconds in idle.seconds.items():
        if seconds is None:
            unread.append(cause)
            continue
        label, detail = _IDLE_LABELS[cause]
        share = idle.share_pct.get(cause)
        rows.append((label, f"{fmt_pct_cell(share)} %" if share is not None else NA,
                     f"{fmt_seconds_cell(seconds)}: " + detail.format(gap=fmt_seconds_cell(idle.launch_gap_ns / 1e9))))
    if unread:
        short = {"synchronisation": "sync"}  # the label column stays as narrow as the other metrics' names
        rows.append(("· " + ", ".join(short.get(c, c) for c in unread), NA,
                     f"{', '.join(unread)}: not in this trace's records, inside the others"))
    return rows


def _value_cells(value: Value, detail: str) -> tuple[str, str]:
    if value.value is None:
        return NA, _na(value.reason)
    return f"{fmt_pct_cell(value.value)} %", detail


def _memory(mem: Memory) -> list[RenderableType]:
    names = [*MEMORY_CATEGORIES, "unattributed"]
    # box.SIMPLE draws a rule above the footer: the total sits under the parts that add up to it.
    table = plain_table(box=box.SIMPLE, show_footer=True)
    table.add_column("Category", footer="allocator peak")
    table.add_column("Own peak", justify="right", footer=fmt_bytes(mem.allocator_peak))
    table.add_column("At allocator peak", justify="right", footer=fmt_bytes(mem.allocator_peak))
    for name in names:
        own_cell = "—" if name == "unattributed" else fmt_bytes(getattr(mem, name))
        if mem.sources.get(name) == "analytic" and getattr(mem, name, None) is not None:
            own_cell += " (analytic)"  # from the graph's inferred shapes, not an allocator record
        table.add_row(name.replace("_", " "), own_cell, fmt_bytes(mem.at_peak.get(name)))
    title = Text("Memory", style="bold")
    title.append(": each category's own peak, and the split at the allocator's peak")
    out: list[RenderableType] = [title, table, legend_grid(_MEMORY_LEGEND)]
    for names_, text in _memory_reasons(mem):
        # Wrapped lines stay indented under their own reason, apart from the table.
        out.append(Padding(Text(printable(f"{', '.join(names_)}: {text}")), (0, 0, 0, 2)))
    return out + _torch_memory(mem.cross_check)


#: What the memory table's terms mean (analysis/memory/pytorch.py computes them; a newcomer asked).
_MEMORY_LEGEND = (
    ("Own peak", "each category's highest, each at its own moment"),
    ("At allocator peak", "live at the allocator's highest moment; adds up to it"),
    ("unattributed", "bytes tbd could not put in a category (peak minus the rest)"),
)
#: Reasons name memory fields as profile.json spells them; a reader gets the table's words. Done here, not in
#: analysis, so that profile.json files written before keep reading well too.
_FIELD_WORDS = (
    (re.compile(r"\bat_peak\[['\"](\w+)['\"]\]"), lambda m: f"{m[1].replace('_', ' ')} at the allocator's peak"),
    (re.compile(r"\b(?:the )?allocator_peak\b"), lambda m: "the allocator peak"),
    (re.compile(r"\bat_peak\b"), lambda m: "the split at the allocator's peak"),
    (re.compile(r"\b(feature_maps|optimizer_state|non_trainable)\b"), lambda m: m[1].replace("_", " ")),
    (re.compile(r"\bunattributed = "), lambda m: "unattributed is "),
)
_REASON_LABELS = {"at_peak": "at allocator peak", "allocator_peak": "allocator peak"}


def _reason_words(text: str) -> str:
    """A memory reason in plain English: field names in words, exact byte counts in binary units."""
    for pattern, words in _FIELD_WORDS:
        text = pattern.sub(words, text)
    return byte_counts_in_words(text)


def _clauses(text: str) -> list[str]:
    """`text` split at "; " outside parentheses (a parenthesis may hold a "; " of its own)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


def _memory_reasons(mem: Memory) -> list[tuple[list[str], str]]:
    """The memory reasons as (the figures it explains, text), each clause said once.

    Analysis gives every figure its own full reason, so one cause (TF's missing allocator events, MXNet's
    unsplit storage counter) reaches several figures word for word, and a hook's caveat is appended to
    one reason and is another's whole reason. Clauses shared by the same figures are printed together,
    under all their names; "n/a — " leads where every figure named is null.
    """
    shared: dict[str, list[str]] = {}
    for key, reason in mem.reasons.items():
        for clause in _clauses(str(reason)):
            if key not in shared.setdefault(clause, []):
                shared[clause].append(key)
    lines: dict[tuple[str, ...], list[str]] = {}
    for clause, keys in shared.items():
        lines.setdefault(tuple(keys), []).append(clause)
    out = []
    for keys, clauses in lines.items():
        text = _reason_words("; ".join(clauses))
        null = all(_memory_figure_missing(mem, k) for k in keys)
        out.append(([_REASON_LABELS.get(k, k.replace("_", " ")) for k in keys], _na(text) if null else text))
    return out


def _memory_figure_missing(mem: Memory, key: str) -> bool:
    """Whether the figure a memory reason explains is null (a reason may also qualify one that exists)."""
    if key == "at_peak":
        return all(v is None for v in mem.at_peak.values())
    if key == "unattributed":
        return mem.at_peak.get("unattributed") is None
    if key in (*MEMORY_CATEGORIES, "allocator_peak"):
        return getattr(mem, key) is None
    return False


def _torch_memory(cross: dict[str, Any] | None) -> list[RenderableType]:
    """PyTorch's own memory-profiler categories beside ours (profilers/pytorch/memory.py's shape).

    Shown in torch's categories with the one of ours each maps to: several map to "dynamic", and
    adding their own peaks would not give a peak, so no number is merged here.
    """
    if not cross:
        return []
    peaks = cross.get("peak_bytes")
    if not isinstance(peaks, dict):
        reason = cross.get("reason")
        line = Text(f"PyTorch cross-check: {_na(reason if isinstance(reason, str) else None)}")
        return [Padding(line, (0, 0, 0, 2))]  # a wrapped reason stays indented
    at_peak = cross.get("at_peak") or {}
    maps_to = cross.get("maps_to") or {}
    table = plain_table(box=box.SIMPLE, show_footer=True)
    table.add_column("PyTorch category", footer="total at torch's peak")
    table.add_column("Ours")
    table.add_column("Own peak", justify="right")
    table.add_column("At torch's peak", justify="right", footer=fmt_bytes(cross.get("total_peak_bytes")))
    for name, peak in peaks.items():
        ours = printable(str(maps_to.get(name, "—")).replace("_", " "))
        table.add_row(Text(printable(name)), Text(ours), fmt_bytes(peak), fmt_bytes(at_peak.get(name)))
    title = Text(printable(f"PyTorch memory profiler cross-check (device {cross.get('device', NA)}, torch's "
                           "categories)"), style="bold")
    return [None, title, table]


def _notes(profile: Profile) -> list[RenderableType]:
    if not profile.notes:
        return []
    # A grid, so that a long note wraps under its own text rather than under the dash.
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    notes, more = listed(profile.notes)
    for note in notes:
        grid.add_row("  -", Text(printable(byte_counts_in_words(note))))
    return [Text("Notes", style="bold"), grid, *([more] if more is not None else [])]


def _recommendations(profile: Profile) -> list[RenderableType]:
    """The recommendations analysis found the figures show, each with the figures it rests on in its text."""
    if not profile.recommendations:
        return []
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    recommendations, more = listed(profile.recommendations, "recommendations")
    for rec in recommendations:
        grid.add_row("  -", Text(printable(rec.text)))
    return [Text("Recommendations", style="bold"), grid, *([more] if more is not None else [])]


def _kernels_pointer(profile: Profile) -> Text:
    """Where the rest of the kernel drill-down is: `tbd kernels` (its launch and ncu parts are GPU-only)."""
    what = ("launch configuration, roofline and Nsight Compute commands" if kernel_noun(profile) == "kernels"
            else "launching shapes, Python stacks and roofline of each op")
    return Text(f"`tbd kernels RUN`: {what}.", style="dim")


def render_profile(profile: Profile, *, width: int = 100, color: bool | None = False, top: int = 10,
                   ranking: str = RECOVERABLE) -> str:
    """The whole terminal report for `profile`, as text.

    Args: width, in terminal cells (long kernel names are shortened in the middle to fit);
    color, ANSI styling: True, False (deterministic plain text) or None (if stdout is a terminal);
    top, rows in each kernel table; ranking, the kernel ranking shown (`reports.kernels.tables.RANKINGS`:
    the time that could be won back, or the paper's Table V).
    Returns the rendered text, ending in a newline.
    """
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    console = new_console(width, color)
    parts: list[RenderableType | None] = [
        *_header(profile), *_iterations(profile), *_measurement(profile), None,
        *_metrics(profile), None,
        *counters_section(console, profile.counters, top, fmt_flops), *([None] if profile.counters else []),
        *_memory(profile.metrics.memory_bytes), None,
        *time_table(console, profile, top), None,
        *rankings(console, profile, top, ranking), None,
        *(_recommendations(profile) + [None] if profile.recommendations else []), _kernels_pointer(profile),
    ]
    notes = _notes(profile)
    if notes:
        parts += [None, *notes]
    text = console_text(console, parts)
    if profile.cluster is not None:
        text += "\n" + render_cluster(profile.cluster, width=width, color=color)
    return text


__all__ = ["render_profile", "fmt_bytes", "fmt_flops", "memory_reason_lines", "metric_rows", "run_lines"]
