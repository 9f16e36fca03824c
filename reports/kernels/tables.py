"""The kernel tables: by time with roofline columns, the two rankings, the Nsight Compute commands
(`tbd kernels`), and one group in full (`tbd kernels --kernel`).

`time_table` and `rankings` are also the kernel part of the main report (`reports/terminal.py`).
Renders `KernelRow`s that analysis grouped, measured and ranked; nothing here computes a figure
(docs/architecture.md). Names are data: escaped (`printable`), shortened at identifier boundaries for the
tables (`kernels.short_names`), given in full in the detail view.

The ncu commands are printed to be pasted into a POSIX shell: the metric list they share (some
900 characters) is set once as `TBD_NCU_METRICS` and each command reads `"$TBD_NCU_METRICS"`, and
long lines are broken between arguments with a backslash, which the shell joins again. Only the
text changes: profile.json and `--json` keep each command's full argv.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Callable, Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.errors import UsageError
from tbd.core.profile_result import KernelRow, Profile
from tbd.reports.console import (
    ABOVE_PEAK_MARK,
    MIN_NAME_CHARS,
    above_peak,
    console_text,
    kernel_noun,
    legend_grid,
    name_room,
    new_console,
    plain_table,
)
from tbd.reports.kernels.short_names import short_kernel_name, unique_short_names
from tbd.reports.numbers import (
    fmt_bandwidth,
    fmt_byte_amount,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_intensity,
    fmt_pct,
    fmt_rate,
)
from tbd.reports.printable import printable

NA = "n/a"
#: Optional columns make way until the names get this many characters (or all they need): about what
#: `short_kernel_name` needs to keep a kernel's function name and the argument telling variants apart.
NAME_ROOM = 28
#: The time table's optional columns, dropped in this order when the names lack room: FLOP/s and Mean
#: first, since they follow from Util % and from Time / Calls.
_OPTIONAL_TIME_COLUMNS = ("FLOP/s", "Mean", "Roof %", "Bound")
#: The shell variable holding the metric list every printed ncu command collects.
METRICS_VAR = "TBD_NCU_METRICS"
#: Continuation lines of a command are indented by this much (a shell reads the spaces as separators).
_CONTINUED = "    "
_SOURCES = {"gpu_table": "GPU table", "measured_copy": "measured copy", "user": "given with --memory-bandwidth"}


def _cell_pct(value) -> str:
    """A percentage in a column whose header already says %."""
    return fmt_pct(value, suffix="")


def _util(row: KernelRow) -> str:
    """The Util % cell: three significant digits, flagged when analysis found it above its peak."""
    return _cell_pct(row.util_pct) + (f" {ABOVE_PEAK_MARK}" if above_peak(row) else "")


def _over_100(value) -> bool:
    return isinstance(value, (int, float)) and value > 100.0


def _above_roof(row: KernelRow) -> bool:
    """Whether the group's roofline or bandwidth share is above 100 % (its roofline_note says why)."""
    return _over_100(row.roofline_pct) or _over_100(row.bandwidth_util_pct)


def _roof(row: KernelRow) -> str:
    """The Roof % cell, flagged above 100 % as Util % is above the peak."""
    return _cell_pct(row.roofline_pct) + (f" {ABOVE_PEAK_MARK}" if _over_100(row.roofline_pct) else "")


def _bw(row: KernelRow) -> str:
    """The BW % cell, flagged above 100 %."""
    return _cell_pct(row.bandwidth_util_pct) + (f" {ABOVE_PEAK_MARK}" if _over_100(row.bandwidth_util_pct) else "")


#: The time table's columns before Name, left to right, and how each row fills them.
_TIME_COLUMNS: dict[str, Callable[[KernelRow], str]] = {
    "Calls": lambda r: fmt_count(r.calls), "Time": lambda r: fmt_duration(r.time_s),
    "Mean": lambda r: fmt_duration(r.mean_s), "Time %": lambda r: _cell_pct(r.time_share_pct),
    "FLOP/s": lambda r: fmt_rate(r.flops_per_s), "Util %": _util, "Bound": lambda r: printable(r.bound or NA),
    "Roof %": _roof}


def _fit_columns(console: Console, build: Callable[[list[str], list[str]], Table], names: list[str],
                 optional: Sequence[str]) -> tuple[Table, list[str]]:
    """`build(names, dropped)`'s table with the fewest `optional` columns dropped (in order) that leaves the
    names NAME_ROOM characters, or all that the longest needs; returns it and the columns dropped."""
    need = min(NAME_ROOM, max(len(printable(n)) for n in names))
    dropped: list[str] = []
    for column in optional:
        if name_room(console, lambda empty: build(empty, dropped), len(names)) >= need:
            break
        dropped.append(column)
    # Not fit_names' one name at a time: the shortened names must stay unique within the table.
    room = max(MIN_NAME_CHARS, name_room(console, lambda empty: build(empty, dropped), len(names)))
    return build(unique_short_names([printable(n) for n in names], room), dropped), dropped


def _kernel_table() -> Table:
    """A kernel table: two spaces between columns rather than three, a character more for the names per column."""
    return plain_table(collapse_padding=True)


def time_table(console: Console, profile: Profile, top: int) -> list[RenderableType]:
    """The `top` longest groups with their share, FLOP utilization and place on the roofline, and a legend."""
    noun = kernel_noun(profile)
    rows = profile.kernels[:top]
    title = Text(f"{noun.capitalize()} by time ({len(rows)} of {len(profile.kernels)})", style="bold")
    if not rows:
        return [title, Text(f"  none: the trace window recorded no {noun}")]

    def build(names: list[str], dropped: list[str]) -> Table:
        table = _kernel_table()
        shown = [h for h in _TIME_COLUMNS if h not in dropped]
        for h in shown:
            table.add_column(h, justify="left" if h == "Bound" else "right")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for row, name in zip(rows, names):
            table.add_row(*(Text(_TIME_COLUMNS[h](row)) for h in shown), Text(name))
        return table

    table, dropped = _fit_columns(console, build, [r.name for r in rows], _OPTIONAL_TIME_COLUMNS)
    # "Time %" is what the paper's Table V heads "Duration (%)": a newcomer reading both needs to know they agree.
    legend = [("Time %", f"the group's share of the summed {noun[:-1]} time in the trace window (the paper's Table V "
                         "calls it Duration %)"),
              ("Util %", "FLOPs / (peak FLOP/s of its precision x time); n/a: no FLOP formula, or no peak")]
    if any(above_peak(r) for r in rows):
        legend.append((ABOVE_PEAK_MARK, "above its precision's peak: a fast algorithm (Winograd, FFT) does fewer "
                                        "operations than the direct count, or the precision or peak is misdetected; "
                                        "not in the threshold"))
    if "Roof %" not in dropped and any(_above_roof(r) and not above_peak(r) for r in rows):
        legend.append((f"Roof % {ABOVE_PEAK_MARK}", "above the memory bandwidth: the estimated bytes exceed what DRAM "
                                                    "moves in the time, so part came from cache (L2), e.g. an input "
                                                    "that is an expanded view; not in the threshold"))
    if "Bound" not in dropped:
        legend.append(("Bound", "compute or memory on this device's roofline (bytes: inputs read + outputs written "
                                "once, an estimate)"))
    if "Roof %" not in dropped:
        legend.append(("Roof %", "achieved FLOP/s over what the roofline allows at its intensity (for data "
                                 "movement, the bandwidth share)"))
    return [title, table, legend_grid(legend)]


#: The rankings a report shows (`--ranking`): the time that could be won back (the default), or the paper's Table V.
RECOVERABLE = "recoverable"
TABLE_V = "table-v"
RANKINGS = (RECOVERABLE, TABLE_V)


def rankings(console: Console, profile: Profile, top: int, ranking: str = RECOVERABLE) -> list[RenderableType]:
    """The ranking `ranking` names, `top` rows, then, apart, the groups whose bound is unknown, which no
    ranking can judge. RECOVERABLE: every group with a known bound by the time reaching its roof would win back,
    most first. TABLE_V: the compute-bound groups below the average FLOP utilization (the paper's Table V),
    then the memory-bound ones below the average bandwidth utilization."""
    if ranking not in RANKINGS:
        raise UsageError(f"--ranking {ranking!r} is not one of {', '.join(RANKINGS)}")
    noun = kernel_noun(profile)
    unknown = _bound_unknown(console, profile.bound_unknown_kernels[:top], len(profile.bound_unknown_kernels), noun)
    older = not profile.recoverable_kernels and any(
        r.bound and r.roofline_pct is not None and r.roofline_pct <= 100 and r.recoverable_s is None
        for r in profile.kernels)
    if ranking == RECOVERABLE and not older:
        return [*_recoverable(console, profile, top, noun), *([Text(""), *unknown] if unknown else [])]
    # A profile.json written before the won-back ranking holds Table V's alone: shown, said why.
    why = [Text("This profile.json predates the ranking by the time that could be won back: the paper's Table V "
                "follows (`tbd analyze` on the run computes it).", style="dim"), Text("")] \
        if ranking == RECOVERABLE else []
    compute = _ranking(console, profile.low_util_kernels[:top], len(profile.low_util_kernels),
                       f"Compute-bound {noun} below the average FLOP utilization (the paper's Table V)",
                       _flop_threshold(profile), "Util %", _util)
    memory = _ranking(console, profile.low_bandwidth_kernels[:top], len(profile.low_bandwidth_kernels),
                      f"Memory-bound {noun} below the average bandwidth utilization",
                      _bandwidth_threshold(profile, noun), "BW %", _bw)
    return [*why, *compute, Text(""), *memory, *([Text(""), *unknown] if unknown else [])]


def _recoverable(console: Console, profile: Profile, top: int, noun: str) -> list[RenderableType]:
    """The default ranking: the groups by the time reaching their roof would win back, most first."""
    rows = profile.recoverable_kernels[:top]
    head = Text(f"Where the time can be won back: {noun} by time x (1 - Roof %)", style="bold")
    if not rows:
        why = (f"the trace window recorded no {noun}" if not profile.kernels else "no group's bound is known"
               if profile.bound_unknown_kernels else "no group within 100 % of its roof")
        return [head, Text(f"  none: {why}")]

    def build(names: list[str], dropped: list[str]) -> Table:
        table = _kernel_table()
        shown = [h for h in ("#", "Win", "Win %", "Time %", "Bound", "Roof %") if h not in dropped]
        for h in shown:
            table.add_column(h, justify="left" if h == "Bound" else "right")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for i, (row, name) in enumerate(zip(rows, names), 1):
            cells = {"#": str(i), "Win": fmt_duration(row.recoverable_s), "Win %": _cell_pct(row.recoverable_pct),
                     "Time %": _cell_pct(row.time_share_pct), "Bound": printable(row.bound or NA),
                     "Roof %": _cell_pct(row.roofline_pct)}
            table.add_row(*(Text(cells[h]) for h in shown), Text(name))
        return table

    table, _ = _fit_columns(console, build, [r.name for r in rows], ("Win", "Bound"))
    caption = Text(f"{len(rows)} of {len(profile.recoverable_kernels)}, most first. Win: the group's time x "
                   f"(1 - Roof %), what reaching its roof would save; Win %: that share of the summed {noun[:-1]} "
                   "time. Groups above 100 % of their roof (a misestimate) are left out. `--ranking table-v`: the "
                   "paper's Table V instead.", style="dim")
    return [head, table, caption]


def _flop_threshold(profile: Profile) -> str:
    flop = profile.metrics.flop_util_pct
    if flop.kernel_average_pct is None:
        # Without a peak, the FLOP utilization's own reason names the fix (--peak-flops, a GPU table row).
        why = flop.reason if flop.peak_flops is None and flop.reason else flop.kernel_average_reason
        return f"{NA} ({printable(why or flop.reason or 'no peak')})"
    return f"{fmt_pct(flop.kernel_average_pct)}, the busy-time-weighted average FLOP utilization"


def _bandwidth_threshold(profile: Profile, noun: str) -> str:
    bw = profile.metrics.memory_bandwidth
    if bw is None:
        return f"{NA} (memory bandwidth unknown)"
    if bw.value is None:
        return f"{NA} ({printable(bw.reason or 'memory bandwidth unknown')})"
    if bw.kernel_average_pct is None:
        return f"{NA} ({printable(bw.kernel_average_reason or f'no memory-bound {noun} with known bytes')})"
    return f"{fmt_pct(bw.kernel_average_pct)} of {fmt_bandwidth(bw.value)}, the average of the memory-bound {noun}"


def _bound_unknown(console: Console, rows: Sequence[KernelRow], listed: int, noun: str) -> list[RenderableType]:
    """The groups neither ranking can judge, their bound unknown: share, utilization, and why (a key into the
    reasons under the table, each said once)."""
    if not rows:
        return []
    keys: dict[str, str] = {}
    for row in rows:
        keys.setdefault(printable(row.roofline_note or "unknown"), chr(ord("a") + len(keys)) if len(keys) < 26
                        else str(len(keys) + 1))

    def build(names: list[str], dropped: list[str]) -> Table:
        table = _kernel_table()
        for h in ("#", "Time %", "Util %", "Why"):
            table.add_column(h, justify="left" if h == "Why" else "right")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for i, (row, name) in enumerate(zip(rows, names), 1):
            table.add_row(Text(str(i)), Text(_cell_pct(row.time_share_pct)), Text(_util(row)),
                          Text(keys[printable(row.roofline_note or "unknown")]), Text(name))
        return table

    table, _ = _fit_columns(console, build, [r.name for r in rows], ())
    caption = Text(f"{len(rows)} of {listed}, longest first: neither compute- nor memory-bound can be told, so "
                   "no ranking holds them.", style="dim")
    return [Text(f"{noun.capitalize()} whose bound is unknown", style="bold"), table, caption,
            legend_grid([(key, reason) for reason, key in keys.items()])]


def _ranking(console: Console, rows: Sequence[KernelRow], ranked: int, title: str, threshold: str,
             share_header: str, share_of: Callable[[KernelRow], str]) -> list[RenderableType]:
    # The count goes in the caption, first, where a wrap cannot split it: the title alone fits 80 columns.
    head = Text(title, style="bold")
    if not rows:
        return [head, Text("  none below the threshold"), Text(f"Threshold: {threshold}.", style="dim")]
    caption = Text(f"{len(rows)} of {ranked}, longest first. Threshold: {threshold}.", style="dim")

    def build(names: list[str], dropped: list[str]) -> Table:
        table = _kernel_table()
        shown = [h for h in ("#", "Time %", share_header, "Roof %") if h not in dropped]
        for h in shown:
            table.add_column(h, justify="right")
        table.add_column("Name", no_wrap=True, overflow="ellipsis")
        for i, (row, name) in enumerate(zip(rows, names), 1):
            cells = {"#": str(i), "Time %": _cell_pct(row.time_share_pct), share_header: share_of(row),
                     "Roof %": _cell_pct(row.roofline_pct)}
            table.add_row(*(Text(cells[h]) for h in shown), Text(name))
        return table

    table, _ = _fit_columns(console, build, [r.name for r in rows], ("Roof %",))
    return [head, table, caption]


def render_kernel_report(profile: Profile, *, top: int = 10, width: int = 100, color: bool | None = False,
                         ranking: str = RECOVERABLE) -> str:
    """The device line, the kernel table and the ranking `ranking` names (`top` rows each), and the ncu command
    of each ranked group. Raises UsageError if top < 1."""
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    console = new_console(width, color)
    noun = kernel_noun(profile)
    pointer = Text(f"`tbd kernels RUN --kernel REGEX` shows one {noun[:-1]} in full.", style="dim")
    parts: list[RenderableType] = [*_header(profile, width), Text(""), *time_table(console, profile, top), pointer,
                                   Text(""), *rankings(console, profile, top, ranking)]
    if ranking == RECOVERABLE and profile.recoverable_kernels:
        ranked = [(f"won-back #{i}", r) for i, r in enumerate(profile.recoverable_kernels[:top], 1)]
    else:
        ranked = [(f"compute-bound #{i}", r) for i, r in enumerate(profile.low_util_kernels[:top], 1)]
        ranked += [(f"memory-bound #{i}", r) for i, r in enumerate(profile.low_bandwidth_kernels[:top], 1)]
    commands = _ncu_section(ranked, width)
    if commands:
        parts += [Text(""), *commands]
    return console_text(console, parts)


def _header(profile: Profile, width: int) -> list[RenderableType]:
    """The device, then its peaks and memory bandwidth: on one line where they fit, else one line each."""
    flop = profile.metrics.flop_util_pct
    bw = profile.metrics.memory_bandwidth
    env = profile.environment if isinstance(profile.environment, dict) else {}
    device = env.get("gpu") or env.get("cpu") or {}
    name = printable(device.get("name") or device.get("model") or profile.spec.get("device") or "device")
    peaks = ", ".join(f"{p} {fmt_rate(v)}" for p, v in sorted(flop.peaks_by_precision.items()))
    bandwidth = f"memory bandwidth {fmt_bandwidth(bw.value) if bw else NA}"
    if bw is not None and bw.value is not None:
        bandwidth += f" ({printable(_SOURCES.get(bw.source, bw.source.replace('_', ' ')))})"
    figures = [f"peaks {peaks or NA}", bandwidth]
    together = " · ".join(figures)
    lines = [name, *([together] if len(together) <= width else figures)]
    return [Text(line, style="dim") for line in lines]


def _ncu_section(ranked: list[tuple[str, KernelRow]], width: int) -> list[RenderableType]:
    """The ncu command of each ranked group under a comment naming its ranking row, the shared metric list
    first: one block a shell can take as it is."""
    argvs = [(label, row, argv) for label, row in ranked if (argv := _ncu_argv(row.ncu)) is not None]
    if not argvs:
        return []
    shared = _shared_metrics([argv for _, _, argv in argvs])
    lines = _metrics_lines(shared, width) if shared is not None else []
    for label, row, argv in argvs:
        lines.append(f"# {label}: " + short_kernel_name(row.name, max(1, width - len(label) - 4)))
        lines += _command_lines(argv, shared, width)
    caption = ["Paste into a shell" + (": the first lines set the metrics every command collects." if shared
                                       is not None else "."), *_placeholder_lines([row for _, row, _ in argvs])]
    return [Text("Measure with Nsight Compute (launches of the last traced iteration)", style="bold"),
            *(Text(c, style="dim") for c in caption), *(Text(line, overflow="fold") for line in lines)]


def _placeholder_lines(rows: Sequence[KernelRow]) -> list[str]:
    """Said once under commands for a trace tbd did not run: the program is a placeholder, and where the
    launch skip counts from (analysis.ncu.FOREIGN_SKIP_FROM)."""
    programs = [r.ncu["target_placeholder"] for r in rows if isinstance(r.ncu, dict) and r.ncu.get("target_placeholder")]
    if not programs:
        return []
    program = printable(str(programs[0]))
    return [f"`{program}` stands for the program that recorded the trace: put its own command there.",
            "--launch-skip counts from the start of the trace's window; ncu counts from the program's start "
            "(no NVTX range marks the window): add each kernel's launches that ran before the window."]


def _ncu_argv(ncu) -> list[str] | None:
    """A ranked group's ncu argv: `argv` as analysis wrote it, else its `command` split as a shell would;
    None where it has neither (a CPU op, a name ncu cannot select) or a profile.json holds something else."""
    if not isinstance(ncu, dict):
        return None
    argv = ncu.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return argv
    command = ncu.get("command")
    if not isinstance(command, str) or not command.strip():
        return None
    try:
        return shlex.split(command)
    except ValueError:  # unbalanced quotes: shown as one word rather than guessed at
        return [command]


def _metrics_of(argv: list[str]) -> str | None:
    """The value after `--metrics`, None without one."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "--metrics":
            return value
    return None


def _shared_metrics(argvs: list[list[str]]) -> str | None:
    """The metric list most commands collect (analysis gives them all the same one), None if none has one."""
    counts = Counter(m for argv in argvs if (m := _metrics_of(argv)) is not None)
    return counts.most_common(1)[0][0] if counts else None


def _single_quoted(text: str) -> str:
    """`text` in single quotes for a shell, a quote inside it closed, escaped and reopened."""
    return "'" + text.replace("'", "'\\''") + "'"


def _metrics_lines(metrics: str, width: int) -> list[str]:
    """`TBD_NCU_METRICS='a,b,…'` in lines of at most `width`, broken after commas into quoted pieces.

    A backslash ending a line joins the next, so `TBD_NCU_METRICS=\\`, `'a,'\\`, `'b'` assign the one
    word `a,b`; no line may start with a space, which would end the assignment there.
    """
    names = metrics.split(",")
    pieces = [n + "," for n in names[:-1]] + names[-1:]
    lines, chunk = [f"{METRICS_VAR}=\\"], ""
    for piece in pieces:
        if chunk and len(_single_quoted(chunk + piece)) + len("\\") > width:
            lines.append(_single_quoted(chunk) + "\\")
            chunk = ""
        chunk += piece
    return [printable(line) for line in [*lines, _single_quoted(chunk)]]


def _command_lines(argv: list[str], shared: str | None, width: int) -> list[str]:
    """`argv` quoted for a shell in lines of at most `width` (where no single argument is longer), broken
    between arguments with ` \\`: an option stays with its value, and the program ncu runs starts a line."""
    words = [printable(shlex.quote(a)) for a in argv]
    if shared is not None:
        words = [f'"${METRICS_VAR}"' if i and argv[i - 1] == "--metrics" and a == shared else w
                 for i, (a, w) in enumerate(zip(argv, words))]
    units, target = [words[0]], None
    i = 1
    while i < len(argv):
        if argv[i].startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            units.append(f"{words[i]} {words[i + 1]}")
            step = 2
        else:
            units.append(words[i])
            step = 1
        if target is None and not argv[i].startswith("-"):
            target = len(units) - 1
        i += step
    lines, line = [], units[0]
    for k, unit in enumerate(units[1:], 1):
        continued = 0 if k == len(units) - 1 else len(" \\")
        if k != target and len(line) + 1 + len(unit) + continued <= width:
            line += " " + unit
        else:
            lines.append(line + " \\")
            line = _CONTINUED + unit
    return lines + [line]


def render_kernel_detail(rows: Sequence[KernelRow], profile: Profile, *, width: int = 100,
                         color: bool | None = False) -> str:
    """Each of `rows` in full: every drill-down figure and the ncu command, one block per group."""
    console = new_console(width, color)
    parts: list[RenderableType] = []
    argvs = [argv for row in rows if (argv := _ncu_argv(row.ncu)) is not None]
    shared = _shared_metrics(argvs)
    for row in rows:
        table = plain_table(show_header=False)
        table.add_column("What", style="bold", no_wrap=True)
        table.add_column("Value", overflow="fold")
        for key, value in _detail_items(row):
            table.add_row(Text(key), Text(value))
        parts += [Text(printable(row.name), style="bold", overflow="fold"), table]
        argv = _ncu_argv(row.ncu)
        if argv is not None:
            parts += [Text(line, overflow="fold") for line in _command_lines(argv, shared, width)]
        parts.append(Text(""))
    parts += [Text(line, style="dim") for line in _placeholder_lines(rows)]
    if shared is not None:
        parts += [Text(f"The commands read the metrics to collect from ${METRICS_VAR}; set it first:", style="dim"),
                  *(Text(line, overflow="fold") for line in _metrics_lines(shared, width))]
    return console_text(console, parts)


def _launch_items(launch) -> list[tuple[str, str]]:
    if not isinstance(launch, dict) or not launch:
        return [("launch", "not recorded in the trace")]

    def dim3(v):
        return "×".join(map(printable, v)) if isinstance(v, (list, tuple)) and v else NA

    registers, shared = launch.get("registers_per_thread"), launch.get("shared_memory_bytes")
    out = [("grid", dim3(launch.get("grid"))), ("block", dim3(launch.get("block"))),
           ("registers/thread", NA if registers is None else fmt_count(registers)),
           ("shared memory/block", fmt_bytes(shared)),
           ("occupancy (trace's estimate)", fmt_pct(launch.get("occupancy_pct")))]
    configs = launch.get("configs")
    if isinstance(configs, int) and configs > 1:
        out.append(("configurations", f"{configs}; this one {fmt_pct(launch.get('share_pct'))} of the time"))
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
        items.append(("launched by" if i == 0 else "and by", f"{printable(op.get('name'))} "
                      f"[{printable(op.get('shapes') or 'shapes not recorded')}] · {fmt_pct(op.get('share_pct'))}"))
        if op.get("stack"):
            items.append(("  Python stack", printable(op["stack"])))
    items += _launch_items(row.launch)
    items += [("bytes moved", f"{fmt_byte_amount(row.bytes)} ({row.bytes_source})" if row.bytes is not None else NA),
              ("arithmetic intensity", fmt_intensity(row.intensity)),
              ("bandwidth utilization", fmt_pct(row.bandwidth_util_pct)),
              ("roofline", f"{row.bound}-bound; attainable {fmt_rate(row.attainable_flops_per_s)}; achieved "
                           f"{fmt_pct(row.roofline_pct)} of it" if row.bound else
               f"{NA} ({printable(row.roofline_note or 'unknown')})")]
    if row.bound and row.roofline_note:  # a share above 100 %: why
        items.append(("  why", printable(row.roofline_note)))
    if row.measured:
        items.append(("measured", printable(_measured_text(row.measured))))
    if isinstance(row.ncu, dict):
        items.append(("Nsight Compute", _ncu_selection(row.ncu)))
    return items


def _ncu_selection(ncu: dict) -> str:
    """Which launches the group's ncu command measures (the command itself follows the table)."""
    if _ncu_argv(ncu) is None:
        return f"{NA} ({printable(ncu.get('reason') or 'no command')})"
    count, in_step = ncu.get("launch_count"), ncu.get("launches_in_step")
    partial = (f" ({printable(count)} of the iteration's {printable(in_step)} launches: the others interleave with "
               "another instance of the same function)") if isinstance(in_step, int) and isinstance(count, int) \
        and in_step > count else ""
    return (f"launch skip {printable(ncu.get('launch_skip', NA))}, count {printable(count if count is not None else NA)}"
            f"{partial}, counted from {printable(ncu.get('skip_counts_from') or NA)}; the command below")


def _signed_pct(value) -> str:
    """A difference with its sign ("+4.2 %"), n/a unless a finite number."""
    finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return f"{value:+.3g} %" if finite else NA


def _measured_text(m: dict) -> str:
    parts = [f"{m.get('source')}, {m.get('launches')} launches"]
    if m.get("flops") is not None:
        parts.append(f"FLOPs {fmt_count(m['flops'])} per launch (analytic {fmt_count(m.get('analytic_flops'))}; "
                     f"difference {_signed_pct(m.get('flops_difference_pct'))})")
    if m.get("dram_bytes") is not None:
        parts.append(f"DRAM {fmt_byte_amount(m['dram_bytes'])} per launch (analytic "
                     f"{fmt_byte_amount(m.get('analytic_bytes'))}; difference {_signed_pct(m.get('bytes_difference_pct'))})")
    return "; ".join(parts)
