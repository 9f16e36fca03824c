"""`tbd kernels`: the kernel table with roofline columns, the two rankings with their Nsight
Compute commands, and one group in full (`--kernel`).

Renders `KernelRow`s that analysis grouped, measured and ranked; nothing here computes a figure
(STYLE.md). Names are data: escaped (`printable`), shortened at identifier boundaries for the
tables (`kernel_names`), given in full in the detail view.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tbd.profile import KernelRow, Profile
from tbd.reports.kernel_names import short_kernel_name
from tbd.reports.kernels_table import (
    ABOVE_PEAK_MARK,
    console_text,
    fit_names,
    fmt_util,
    kernel_noun,
    new_console,
    plain_table,
    util_caption,
)
from tbd.reports.numbers import fmt_bandwidth, fmt_count, fmt_duration, fmt_intensity, fmt_pct, fmt_rate
from tbd.reports.printable import printable

NA = "n/a"
#: Consoles at least this wide get the Mean and FLOP/s columns too.
WIDE = 110


def _cell_pct(value) -> str:
    """A percentage in a column whose header already says %."""
    return fmt_pct(value, suffix="")


def _util(row: KernelRow) -> str:
    """The Util % cell: three significant digits, flagged like the report's when above its peak."""
    flagged = fmt_util(row).endswith(ABOVE_PEAK_MARK)
    return _cell_pct(row.util_pct) + (f" {ABOVE_PEAK_MARK}" if flagged else "")


def _bound(row: KernelRow) -> str:
    return row.bound or NA


def _time_table(console: Console, profile: Profile, top: int) -> list[RenderableType]:
    noun = kernel_noun(profile)
    rows = profile.kernels[:top]
    title = Text(f"{noun.capitalize()} by time ({len(rows)} of {len(profile.kernels)})", style="bold")
    if not rows:
        return [title, Text(f"  none: the trace window recorded no {noun}")]
    wide = console.width >= WIDE

    def build(names: list[str]) -> Table:
        table = plain_table()
        headers = ["Calls", "Time", *(["Mean"] if wide else []), "Time %", *(["FLOP/s"] if wide else []),
                   "Util %", "Bound", "Roof %"]
        for h in headers:
            table.add_column(h, justify="right" if h != "Bound" else "left")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for row, name in zip(rows, names):
            cells = [fmt_count(row.calls), fmt_duration(row.time_s), *([fmt_duration(row.mean_s)] if wide else []),
                     _cell_pct(row.time_share_pct), *([fmt_rate(row.flops_per_s)] if wide else []), _util(row),
                     _bound(row), _cell_pct(row.roofline_pct), name]
            table.add_row(*(Text(c) for c in cells))
        return table

    caption = Text(f"Time %: share of the summed {noun[:-1]} time in the trace window. " + util_caption(rows)
                   + "\nBound: compute or memory on this device's roofline (bytes: inputs read + outputs written once, "
                   "an estimate); Roof %: achieved FLOP/s over the roofline's bound (bandwidth share for data "
                   f"movement). `tbd kernels RUN --kernel REGEX` shows one {noun[:-1]} in full.", style="dim")
    return [title, fit_names(console, build, [r.name for r in rows], short_kernel_name), caption]


def _ranking(console: Console, profile: Profile, rows: Sequence[KernelRow], all_rows: int, title: str,
             threshold: str, share_header: str, share_of) -> list[RenderableType]:
    head = Text(f"{title}: {len(rows)} of {all_rows}", style="bold")
    caption = Text(f"Threshold: {threshold}; longest first.", style="dim")
    if not rows:
        return [head, Text("  none below the threshold"), caption]

    def build(names: list[str]) -> Table:
        table = plain_table()
        for h in ("#", "Time %", share_header, "Roof %"):
            table.add_column(h, justify="right")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for i, (row, name) in enumerate(zip(rows, names), 1):
            table.add_row(*(Text(c) for c in (str(i), _cell_pct(row.time_share_pct), share_of(row),
                                               _cell_pct(row.roofline_pct), name)))
        return table

    return [head, fit_names(console, build, [r.name for r in rows], short_kernel_name), caption]


def _ncu_lines(rows: Sequence[KernelRow], label: str) -> list[RenderableType]:
    out = []
    for i, row in enumerate(rows, 1):
        if row.ncu and row.ncu.get("command"):
            out.append(Text(f"  {label}{i}: {printable(row.ncu['command'])}", overflow="fold"))
    return [Text("Measure with Nsight Compute (launches of the last traced iteration):", style="bold"), *out] \
        if out else []


def render_kernel_report(profile: Profile, *, top: int = 10, width: int = 100, color: bool | None = False) -> str:
    """The kernel table and both rankings, `top` rows each, with the ncu command of each ranked group."""
    console = new_console(width, color)
    noun = kernel_noun(profile)
    flop = profile.metrics.flop_util_pct
    bw = profile.metrics.memory_bandwidth
    compute, memory = profile.low_util_kernels[:top], profile.low_bandwidth_kernels[:top]
    flop_threshold = (f"{fmt_pct(flop.kernel_average_pct)}, the busy-time-weighted average FLOP utilization"
                      if flop.kernel_average_pct is not None else f"{NA} ({printable(flop.reason or 'no peak')})")
    bw_threshold = (f"{fmt_pct(bw.kernel_average_pct)} of {fmt_bandwidth(bw.value)}, the average of the memory-bound "
                    f"{noun}" if bw is not None and bw.kernel_average_pct is not None else
                    f"{NA} ({printable(bw.reason) if bw is not None and bw.value is None else 'no memory-bound ' + noun + ' with known bytes'})")
    parts: list[RenderableType] = [*_header(profile), *_time_table(console, profile, top), Text("")]
    parts += _ranking(console, profile, compute, len(profile.low_util_kernels),
                      f"Compute-bound {noun} below the average FLOP utilization (the paper's Table V)", flop_threshold,
                      "Util %", _util)
    parts += [Text("")]
    parts += _ranking(console, profile, memory, len(profile.low_bandwidth_kernels),
                      f"Memory-bound {noun} below the average bandwidth utilization", bw_threshold, "BW %",
                      lambda r: _cell_pct(r.bandwidth_util_pct))
    ncu = _ncu_lines(compute, "C") + _ncu_lines(memory, "M")
    if ncu:
        parts += [Text(""), *ncu]
    return console_text(console, parts)


def _header(profile: Profile) -> list[RenderableType]:
    flop = profile.metrics.flop_util_pct
    bw = profile.metrics.memory_bandwidth
    device = (profile.environment.get("gpu") or profile.environment.get("cpu") or {}) \
        if isinstance(profile.environment, dict) else {}
    name = printable(device.get("name") or device.get("model") or profile.spec.get("device") or "device")
    peaks = ", ".join(f"{p} {fmt_rate(v)}" for p, v in sorted(flop.peaks_by_precision.items()))
    line = f"{name} · peaks {peaks or NA} · memory bandwidth {fmt_bandwidth(bw.value) if bw else NA}"
    if bw is not None and bw.value is not None:
        line += f" ({bw.source.replace('_', ' ')})"
    return [Text(line, style="dim"), Text("")]


def render_kernel_detail(rows: Sequence[KernelRow], profile: Profile, *, width: int = 100,
                         color: bool | None = False) -> str:
    """Each of `rows` in full: every drill-down figure and the ncu command, one block per group."""
    console = new_console(width, color)
    parts: list[RenderableType] = []
    for row in rows:
        table = plain_table(show_header=False)
        table.add_column("What", style="bold", no_wrap=True)
        table.add_column("Value", overflow="fold")
        for key, value in _detail_items(row):
            table.add_row(Text(key), Text(value))
        parts += [Text(printable(row.name), style="bold", overflow="fold"), table, Text("")]
    return console_text(console, parts)


def _launch_items(launch: dict | None) -> list[tuple[str, str]]:
    if not launch:
        return [("launch", "not recorded in the trace")]

    def dim3(v):
        return "×".join(map(str, v)) if v else NA

    out = [("grid", dim3(launch.get("grid"))), ("block", dim3(launch.get("block"))),
           ("registers/thread", NA if launch.get("registers_per_thread") is None else str(launch["registers_per_thread"])),
           ("shared memory/block", NA if launch.get("shared_memory_bytes") is None
            else f"{fmt_count(launch['shared_memory_bytes'])} B"),
           ("occupancy (trace's estimate)", fmt_pct(launch.get("occupancy_pct")))]
    if launch.get("configs", 1) > 1:
        out.append(("configurations", f"{launch['configs']}; this one {fmt_pct(launch.get('share_pct'))} of the time"))
    return out


def _detail_items(row: KernelRow) -> list[tuple[str, str]]:
    items = [("calls", fmt_count(row.calls)), ("time", f"{fmt_duration(row.time_s)} total, "
                                                     f"{fmt_duration(row.mean_s)} per call"),
             ("share of kernel time", fmt_pct(row.time_share_pct)),
             ("FLOPs", f"{fmt_count(row.flops)} ({row.flop_source})" if row.flops is not None else
              f"{NA} ({printable(row.util_note or 'unknown')})"),
             ("achieved", fmt_rate(row.flops_per_s)), ("precision", printable(row.precision) or NA),
             ("FLOP utilization", _util(row) + " %" if row.util_pct is not None else
              f"{NA} ({printable(row.util_note or 'unknown')})")]
    for i, op in enumerate(row.ops or []):
        items.append(("launched by" if i == 0 else "", f"{printable(op.get('name'))} "
                      f"[{printable(op.get('shapes') or 'shapes not recorded')}] · {fmt_pct(op.get('share_pct'))}"))
        if op.get("stack"):
            items.append(("  Python stack", printable(op["stack"])))
    items += _launch_items(row.launch)
    items += [("bytes moved", f"{fmt_count(row.bytes)} B ({row.bytes_source})" if row.bytes is not None else NA),
              ("arithmetic intensity", fmt_intensity(row.intensity)),
              ("bandwidth utilization", fmt_pct(row.bandwidth_util_pct)),
              ("roofline", f"{row.bound}-bound; attainable {fmt_rate(row.attainable_flops_per_s)}; achieved "
                           f"{fmt_pct(row.roofline_pct)} of it" if row.bound else
               f"{NA} ({printable(row.roofline_note or 'unknown')})")]
    if row.measured:
        m = row.measured
        items.append(("measured", printable(_measured_text(m))))
    if row.ncu and not row.ncu.get("command"):
        items.append(("Nsight Compute", f"{NA} ({printable(row.ncu.get('reason') or 'no command')})"))
    elif row.ncu:
        items.append(("Nsight Compute", printable(row.ncu["command"])))
        items.append(("", f"skip {row.ncu['launch_skip']}, count {row.ncu['launch_count']}, counted from "
                          f"{row.ncu['skip_counts_from']}"))
    return items


def _signed_pct(value) -> str:
    return NA if value is None else f"{value:+.3g} %"


def _measured_text(m: dict) -> str:
    parts = [f"{m.get('source')}, {m.get('launches')} launches"]
    if m.get("flops") is not None:
        parts.append(f"FLOPs {fmt_count(m['flops'])} per launch (analytic {fmt_count(m.get('analytic_flops'))}; "
                     f"difference {_signed_pct(m.get('flops_difference_pct'))})")
    if m.get("dram_bytes") is not None:
        parts.append(f"DRAM bytes {fmt_count(m['dram_bytes'])} per launch (analytic "
                     f"{fmt_count(m.get('analytic_bytes'))}; difference {_signed_pct(m.get('bytes_difference_pct'))})")
    return "; ".join(parts)
