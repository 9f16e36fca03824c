"""Renders the suite table of `tbd suite`.

Two short tables rather than one wide one: a row per model with each framework a column of
one-word cells (whether it runs here), then a row per model saying what it is and what data it
imitates. Every column's cells are a few words, so nothing is folded mid-word at 80 columns, and
the whole suite fits one screen at 120. Headers never wrap (`no_wrap`); only the data-set column
wraps, between words.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from tbd.reports.console import console_text, new_console, plain_table
from tbd.reports.printable import printable

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
    console = new_console(width, False)
    return console_text(console, [Text("The TBD suite: models x frameworks", style="bold"), runs, legend, None,
                                  about])
