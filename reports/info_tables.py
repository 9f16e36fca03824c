"""The tables of the commands that describe this machine and the suite: `tbd env` (frameworks, their
interpreters and GPUs), `tbd gpus` (the GPU table's peaks per precision, bandwidth and memory) and
`tbd suite` (every model x framework, and whether it runs here).

The suite table is two short tables rather than one wide one: a row per model with each framework
a column of one-word cells (whether it runs here), then a row per model saying what it is and what
data it imitates. Every column's cells are a few words, so nothing is folded mid-word at 80
columns, and the whole suite fits one screen at 120. Headers never wrap (`no_wrap`); only the
data-set column wraps, between words.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from rich.table import Table
from rich.text import Text

from tbd.reports.console import console_text, legend_grid, new_console, plain_table
from tbd.reports.printable import printable


def render_env(rows: list[dict], *, width: int = 120) -> str:
    """Frameworks x (usable, version, GPU) as plain text, then each framework's interpreter (or why it is
    not usable) on a line of its own: a path or an install hint is too long for a cell at 80 columns.

    rows: `tbd.cli.commands.env.env_rows()`'s (framework, usable, version, python, gpu, reason).
    """
    table = plain_table(collapse_padding=True)
    for name in ("Framework", "Usable", "Version", "GPU it would use"):
        table.add_column(name, no_wrap=name != "GPU it would use")
    for r in rows:
        table.add_row(*(Text(printable(v)) for v in (
            r["framework"], "yes" if r["usable"] else "no", r["version"] or "-",
            r["gpu"] or ("none (CPU)" if r["usable"] else "-"))))
    # A path folds only where it is longer than the line; the words around it wrap between words.
    details = Table.grid(padding=(0, 1))
    details.add_column(no_wrap=True)
    details.add_column(overflow="fold")
    for r in rows:
        reason = f"{r['python']}" if r["python"] else "-"
        if not r["usable"]:
            reason = f"not usable: {r['reason'] or 'no reason given'}" + (f" ({r['python']})" if r["python"] else "")
        details.add_row(Text(printable(f"{r['framework']}:")), Text(printable(reason)))
    console = new_console(width, False)
    return console_text(console, [table, None, Text("Interpreters", style="bold"), details])


# (header, key of the row's "peak_flops")
PEAK_COLUMNS = (("FP64", "fp64"), ("FP64 TC", "fp64_tensor"), ("FP32", "fp32"), ("TF32", "tf32"),
                ("FP16", "fp16"), ("BF16", "bf16"), ("FP8", "fp8"), ("INT8", "int8"))
ABSENT = "—"
#: The GPU table's columns after the name, left to right.
GPU_COLUMNS = ("Arch", "CC", "SMs/CUs", "MHz", *(h for h, _ in PEAK_COLUMNS), "TiB/s", "GiB")
#: Dropped in this order until the table fits the width: the clock and unit counts first (the peaks
#: follow from them), then what deep-learning training uses least; GPU, FP32, FP16, TiB/s and GiB stay.
GPU_OPTIONAL_COLUMNS = ("MHz", "SMs/CUs", "FP64 TC", "Arch", "FP64", "CC", "INT8", "FP8", "TF32", "BF16")
#: The vendor prefixes a row's name loses: each vendor's rows come under a line naming it.
VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}


def _four_digits(value: float) -> str:
    """Four significant digits, halves rounded up, never rounding the integer part (19.5 -> "19.50",
    494.7 -> "494.7", 1978.9 -> "1979")."""
    places = max(0, 4 - len(str(int(value))))
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _capability(cc) -> str:
    return f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) else str(cc)


def _vendor(row: dict) -> str:
    return VENDOR_NAMES.get(row["vendor"], str(row["vendor"]))


def short_gpu_name(row: dict) -> str:
    """The row's name without its vendor's prefix ("NVIDIA A100-SXM4-80GB" -> "A100-SXM4-80GB")."""
    prefix = _vendor(row) + " "
    name = str(row["name"])
    return name[len(prefix):] if name.startswith(prefix) else name


def _gpu_cells(row: dict) -> dict[str, str]:
    """Every optional column's cell of one row."""
    peaks = row["peak_flops"]
    return {"Arch": str(row["architecture"]), "CC": _capability(row["compute_capability"]),
            "SMs/CUs": str(row["sm_count"]), "MHz": str(row["boost_clock_mhz"]),
            **{h: _four_digits(peaks[k] / 1e12) if k in peaks else ABSENT for h, k in PEAK_COLUMNS},
            "TiB/s": _four_digits(row["memory_bandwidth_bytes_per_s"] / 2**40),  # binary, as every byte figure
            "GiB": f"{row['memory_bytes'] / 2**30:g}"}


def _gpu_table(rows: list[dict], dropped: list[str]) -> Table:
    """The GPU table without the `dropped` columns: a line per vendor, then its GPUs."""
    shown = [h for h in GPU_COLUMNS if h not in dropped]
    table = plain_table(collapse_padding=True)
    table.add_column("GPU", no_wrap=True)
    for h in shown:
        table.add_column(h, justify="left" if h == "Arch" else "right", no_wrap=True)
    vendor = None
    for r in rows:
        if _vendor(r) != vendor:
            vendor = _vendor(r)
            table.add_row(Text(printable(vendor), style="bold"), *("" for _ in shown))
        cells = _gpu_cells(r)
        table.add_row(Text(printable(short_gpu_name(r))), *(Text(cells[h]) for h in shown))
    return table


def render_gpu_table(rows: list[dict], width: int = 120, color: bool | None = None) -> str:
    """The GPU table as text at `width` columns: a line per GPU, the least needed columns dropped
    (`GPU_OPTIONAL_COLUMNS`, in order) until it fits, and a line naming those dropped.

    Args:
        rows: `tbd.analysis.gpu_table.table_rows()`: peaks in FLOP/s (OP/s for int8), bandwidth in
            bytes/s, memory in bytes. Shown as TFLOP/s (TOP/s), TiB/s and GiB.
        width: characters per line.
        color: True for ANSI styles; False or None for plain text.
    """
    console = new_console(width, bool(color))
    dropped: list[str] = []
    unbounded = console.options.update_width(10 * width)  # the width the table wants, not the one it gets
    for column in GPU_OPTIONAL_COLUMNS:
        if console.measure(_gpu_table(rows, dropped), options=unbounded).maximum <= width:
            break
        dropped.append(column)
    shown = set(GPU_COLUMNS) - set(dropped)
    legend = [("peaks", "dense, no sparsity, in TFLOP/s (INT8: TOP/s)" + ("; TC: tensor cores" * ("FP64 TC" in shown))
                        + f"; {ABSENT}: the vendor publishes none"),
              ("TiB/s", "memory bandwidth; GiB: memory size"
                       + ("; CC: compute capability (AMD: the gfx target)" * ("CC" in shown)))]
    if dropped:
        legend.append(("not shown", f"{', '.join(dropped)} (at {width} columns; a wider terminal shows them)"))
    legend.append(("sources", "tbd gpus --json (with the full names, FLOP/s and bytes)"))
    return console_text(console, [Text("GPUs whose peaks tbd knows", style="bold"), _gpu_table(rows, dropped),
                                  legend_grid(legend)])


#: The cell of a model x framework: it runs here, its framework is missing here, or it has no port.
RUNS, MISSING, NO_PORT = "yes", "no", "—"
LEGEND = ((RUNS, "runs here"), (MISSING, "its framework is not installed here (`tbd env` says how to install it)"),
          (NO_PORT, "not ported to that framework"))


def _cell(row: dict) -> str:
    if row["available"]:
        return RUNS
    return MISSING if row["implemented"] else NO_PORT


def render_suite(rows: list[dict], *, width: int = 120) -> str:
    """The suite as plain text at `width` columns (at least 80 reads without a folded word).

    rows: `tbd.cli.commands.suite.suite_rows()`'s, one per model x framework (model, framework,
    application, dominant_layer, dataset, unit, default_batch, available, implemented).
    """
    frameworks = list(dict.fromkeys(r["framework"] for r in rows))
    models: dict[str, dict] = {}
    cells: dict[tuple[str, str], str] = {}
    for r in rows:
        models.setdefault(r["model"], r)
        cells[r["model"], r["framework"]] = _cell(r)

    runs = plain_table(collapse_padding=True)
    runs.add_column("Model", no_wrap=True)
    for fw in frameworks:
        runs.add_column(fw, no_wrap=True)
    runs.add_column("Batch", justify="right", no_wrap=True)
    runs.add_column("CPU", justify="right", no_wrap=True)
    runs.add_column("Throughput", no_wrap=True)
    runs.add_column("Dominant layer", no_wrap=True)
    for name, r in models.items():
        runs.add_row(*(Text(printable(v)) for v in (name, *(cells.get((name, fw), NO_PORT) for fw in frameworks),
                                                     str(r["default_batch"]), str(r.get("cpu_batch") or
                                                                                  r["default_batch"]),
                                                     r["unit"], r["dominant_layer"])))

    about = plain_table(collapse_padding=True)
    about.add_column("Model", no_wrap=True)
    about.add_column("Application", no_wrap=True)
    about.add_column("Synthetic data shaped like", overflow="fold")
    for name, r in models.items():
        about.add_row(*(Text(printable(v)) for v in (name, r["application"], r["dataset"])))

    # One cell term per line, its meaning wrapping under itself, as the kernel tables' legends do.
    legend = Table.grid(padding=(0, 1))
    legend.add_column(no_wrap=True)
    legend.add_column()
    legend.add_row(Text("Batch:", style="dim"), Text("the default batch; CPU: on the CPU (--batch sets either)",
                                                     style="dim"))
    for term, meaning in LEGEND:
        if term not in cells.values():  # a legend line for a cell the table does not hold is noise
            continue
        legend.add_row(Text(f"{term}:", style="dim"), Text(meaning, style="dim"))
    # tbd train's tasks in one line per kind of task: the suite stays one screen; `tbd train --help`
    # gives each model without a task its reason.
    tasks: dict[str, list[str]] = {}
    for name, r in models.items():
        if r.get("task"):
            tasks.setdefault(r["task"], []).append(name)
    lines = [f"{task} ({', '.join(names)})" for task, names in tasks.items()]
    without = [name for name, r in models.items() if not r.get("task")]
    if without:
        lines.append(f"none yet for {', '.join(without)}")
    train = Text(printable("tbd train tasks (--help: metrics, targets): " + "; ".join(lines)), style="dim")
    console = new_console(width, False)
    return console_text(console, [Text("The TBD suite: models x frameworks", style="bold"), runs, legend, None,
                                  about, train])
