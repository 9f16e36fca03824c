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

import io
from decimal import ROUND_HALF_UP, Decimal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tbd.reports.console import console_text, new_console, plain_table
from tbd.reports.printable import printable


def render_env(rows: list[dict], *, width: int = 120) -> str:
    """Frameworks x (usable, version, interpreter, GPU) as plain text."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("Framework", "Usable", "Version", "Interpreter", "GPU it would use"):
        table.add_column(name, overflow="fold")
    for r in rows:
        usable = "yes" if r["usable"] else f"no: {r['reason']}"
        table.add_row(r["framework"], usable, r["version"] or "-", r["python"] or "-",
                      r["gpu"] or ("none (CPU)" if r["usable"] else "-"))
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


# (header, key of the row's "peak_flops")
PEAK_COLUMNS = (("FP64", "fp64"), ("FP64 TC", "fp64_tensor"), ("FP32", "fp32"), ("TF32", "tf32"),
                ("FP16", "fp16"), ("BF16", "bf16"), ("FP8", "fp8"), ("INT8", "int8"))
ABSENT = "—"


def _four_digits(value: float) -> str:
    """Four significant digits, halves rounded up, never rounding the integer part (19.5 -> "19.50",
    494.7 -> "494.7", 1978.9 -> "1979")."""
    places = max(0, 4 - len(str(int(value))))
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _capability(cc) -> str:
    return f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) else str(cc)


def render_gpu_table(rows: list[dict], width: int = 120, color: bool | None = None) -> str:
    """The GPU table as text at `width` columns.

    Args:
        rows: `tbd.analysis.gpu_table.table_rows()`: peaks in FLOP/s (OP/s for int8), bandwidth in
            bytes/s, memory in bytes. Shown as TFLOP/s (TOP/s), TB/s and GiB.
        width: characters per line.
        color: True for ANSI styles; False or None for plain text.
    """
    table = Table(box=None, header_style="bold", pad_edge=False,
                  title="dense peaks in TFLOP/s (INT8: TOP/s), no sparsity; bandwidth TB/s; memory GiB; "
                        f"{ABSENT} where the vendor publishes none; sources: tbd gpus --json")
    table.add_column("GPU", overflow="fold", ratio=1)
    table.add_column("Vendor/arch", overflow="fold")
    table.add_column("CC")
    table.add_column("SMs/CUs", justify="right")
    table.add_column("MHz", justify="right")
    for header, _ in PEAK_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("TB/s", justify="right")
    table.add_column("GiB", justify="right")
    for r in rows:
        peaks = [_four_digits(r["peak_flops"][k] / 1e12) if k in r["peak_flops"] else ABSENT
                 for _, k in PEAK_COLUMNS]
        table.add_row(r["name"], f"{r['vendor']} {r['architecture']}", _capability(r["compute_capability"]),
                      str(r["sm_count"]), str(r["boost_clock_mhz"]), *peaks,
                      _four_digits(r["memory_bandwidth_bytes_per_s"] / 1e12), f"{r['memory_bytes'] / 2**30:g}")
    out = io.StringIO()
    Console(file=out, width=width, color_system="standard" if color else None, force_terminal=bool(color),
            highlight=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


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
