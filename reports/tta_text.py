"""`tbd tta`: a finished `TtaResult` as terminal text (fits 80 columns) or CSV. Formatting only:
the scores are mlperf-logging's or DAWNBench's rules' (profilers/mlperf, analysis/dawnbench_scoring.py),
the ratios and run summaries analysis/time_to_accuracy.py's."""

from __future__ import annotations

import io

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tbd.core.tta_result import TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.reports.console import NA, console_text, listed, new_console, plain_table
from tbd.reports.csv_cells import SafeWriter
from tbd.reports.numbers import fmt_duration, fmt_sig
from tbd.reports.printable import printable


def fmt_ratio(value: float | None) -> str:
    text = fmt_sig(value, 3)
    return "" if text == NA else f"{text}x"


def fmt_score(value: float | None, unit: str) -> str:
    """A score in its source's unit: "114.8 min", "2.95 h", "0.83 ms"."""
    return NA if value is None else f"{fmt_sig(value, 4)} {unit}"


def fmt_hours(seconds: float | None) -> str:
    return NA if seconds is None else f"{fmt_sig(seconds / 3600.0, 3)} h"


def fmt_energy(joules: float | None) -> str:
    if joules is None:
        return NA
    if joules >= 1e6:
        return f"{fmt_sig(joules / 1e6, 3)} MJ"
    return f"{fmt_sig(joules / 1e3, 3)} kJ" if joules >= 1e3 else f"{fmt_sig(joules, 3)} J"


def fmt_usd(value: float | None) -> str:
    if value is None:
        return NA
    return f"${value:,.2f}" if value >= 0.01 else f"${fmt_sig(value, 3)}"


def render_tta(result: TtaResult, *, width: int, color: bool | None) -> str:
    """Each table: its heading, the systems side by side, where the time went; then what could not be read."""
    console = new_console(width, color)
    out: list[RenderableType | None] = []
    for table in result.tables:
        out += [Text(_heading(table), style="bold", overflow="fold")]
        if table.target_source:
            out.append(Text(f"target: {printable(table.target_source)}", overflow="fold"))
        if table.source == "mlperf":
            out += [_mlperf_table(table), None, Text("Where the time went (mean of the runs counted)"),
                    _split_table(table)]
        elif table.source == "tbd" and len(table.systems) > 1:
            out.append(_batch_table(table))
        elif table.source == "tbd":
            for system in table.systems:
                out += [_runs_table(system), None, *_over_runs(system)]
        elif table.systems and table.systems[0].score_unit == "ms":
            out.append(_inference_table(table))
        else:
            out.append(_dawnbench_table(table))
        notes, more = listed(table.notes)
        out += _system_notes(table) + [Text(f"note: {printable(n)}", overflow="fold") for n in notes]
        out += ([more] if more is not None else []) + [None]
    if not result.tables:
        out += [Text("No MLPerf result or DAWNBench entry could be scored."), None]
    if result.problems:
        out.append(Text("Could not read (the rest is reported):", style="bold"))
        problems, more = listed(result.problems, "files that could not be read")
        out += [Text(f"  {printable(p.path)}: {printable(p.reason)}", overflow="fold") for p in problems]
        out += [more] if more is not None else []
    return console_text(console, out)


def _heading(table: TtaTable) -> str:
    first = table.systems[0].label if table.systems else NA
    if table.source == "mlperf":
        where = f"MLPerf Training {table.ruleset} · {table.benchmark}"
        if table.ruleset_source and table.ruleset_source.startswith("assumed"):
            where += f" (ruleset {table.ruleset_source})"
    elif table.source == "tbd":
        return printable(f"tbd train · {table.benchmark} · {sum(len(s.runs) for s in table.systems)} runs")
    else:
        where = f"DAWNBench · {table.benchmark}"
    return printable(f"{where} · {len(table.systems)} system{'s' * (len(table.systems) != 1)} · ratios to {first}")


def _label_column(t: Table, name: str = "System") -> None:
    t.add_column(name, overflow="fold", min_width=12, ratio=1)


def _mlperf_table(table: TtaTable) -> Table:
    t = plain_table()
    _label_column(t)
    t.add_column("Accelerators", overflow="fold", min_width=9, ratio=1)
    energy = any(s.energy_j is not None for s in table.systems)
    for header in ("Time", "x", "Acc-h", "x", *(("Energy",) if energy else ()), "Runs"):
        t.add_column(header, justify="right", no_wrap=True)
    for s in table.systems:
        used = sum(r.used for r in s.runs)
        accel = NA if s.accelerator is None else (f"{s.accelerator_count} x {s.accelerator}" if s.accelerator_count
                                                   else s.accelerator)
        time = fmt_score(s.score, s.score_unit) if s.score is not None else f"{NA}*"
        cells = [printable(s.label), printable(accel), time, fmt_ratio(s.ratio_time),
                 fmt_hours(s.accelerator_time_s), fmt_ratio(s.ratio_accelerator_time)]
        if energy:
            cells.append(fmt_energy(s.energy_j) + (f" {fmt_ratio(s.ratio_energy)}" if s.ratio_energy is not None
                                                    else ""))
        t.add_row(*cells, f"{used}/{len(s.runs)}")
    return t


def _split_table(table: TtaTable) -> Table:
    t = plain_table()
    _label_column(t)
    for header in ("Init", "Train", "Eval", "To converge", "Samples/s"):
        t.add_column(header, justify="right", no_wrap=True)
    for s in table.systems:
        converge = NA if s.to_converge is None else f"{fmt_sig(s.to_converge, 4)} {s.converge_unit or ''}".rstrip()
        t.add_row(printable(s.label), fmt_duration(s.init_s), fmt_duration(s.train_s), fmt_duration(s.eval_s),
                  converge, fmt_sig(s.samples_per_s, 4))
    return t


def _batch_table(table: TtaTable) -> Table:
    """`tbd sweep --tta`: each batch's time to target (olympic mean) beside its throughput."""
    t = plain_table()
    t.add_column("Batch", justify="right")
    for header in ("Time", "x", "Samples/s", "Epochs", "Samples", "Converged", "CV"):
        t.add_column(header, justify="right", no_wrap=True)
    for s in table.systems:
        converged = sum(r.status == "success" for r in s.runs)
        t.add_row(NA if s.global_batch_size is None else f"{s.global_batch_size:.0f}",
                  fmt_duration(s.time_to_target_s) if s.score is not None else
                  f"{NA}*", fmt_ratio(s.ratio_time), fmt_sig(s.samples_per_s, 4), fmt_sig(s.epochs_to_target, 3),
                  fmt_sig(s.samples_to_target, 4), f"{converged}/{len(s.runs)}",
                  NA if s.time_cv_pct is None else f"{fmt_sig(s.time_cv_pct, 3)} %")
    return t


def _runs_table(system: TtaSystem) -> Table:
    """tbd train's runs: MLPerf's time (run_start to run_stop, eval included), DAWNBench's (without eval),
    the terms of the run."""
    t = plain_table()
    t.add_column("Run")
    for header in ("Status", "Time", "w/o eval", "Epochs", "Samples", "Eval", "Init"):
        t.add_column(header, justify="right", no_wrap=True)
    for r in system.runs:
        without = r.run_s - r.eval_s if r.run_s is not None and r.eval_s is not None else None
        t.add_row(_name(r).replace("result_", "").replace(".txt", ""),
                  (r.status or NA) + ("" if r.used or r.status != "success" else " (dropped)"),
                  fmt_duration(r.run_s), fmt_duration(without), fmt_sig(r.epochs_to_converge, 4),
                  fmt_sig(r.samples_to_converge, 4), fmt_duration(r.eval_s), fmt_duration(r.init_s))
    return t


def _over_runs(s: TtaSystem) -> list[RenderableType]:
    lines = [f"Time to target (MLPerf olympic mean): {fmt_score(s.score, 'min') if s.score is not None else NA}"
             + (f" ({s.score_reason})" if s.score is None and s.score_reason else ""),
             f"Converged runs: min {fmt_duration(s.time_min_s)}, median {fmt_duration(s.time_median_s)}, "
             f"max {fmt_duration(s.time_max_s)}, coefficient of variation {fmt_sig(s.time_cv_pct, 3)} %",
             f"Term by term (means): {fmt_sig(s.samples_to_target, 4)} samples to target at "
             f"{fmt_sig(s.samples_per_s, 4)} samples/s (median epoch) -> {fmt_duration(s.train_s)} training, + "
             f"{fmt_duration(s.eval_s)} evaluation = time to target; init {fmt_duration(s.init_s)} (untimed); "
             f"without evaluation (DAWNBench) {fmt_duration(s.time_without_eval_s)}",
             "tbd's profiler, one training step of the same configuration: "
             + (f"{fmt_sig(s.profiled_samples_per_s, 4)} samples/s in the stable phase"
                + (f" (windows spread {fmt_sig(s.profiled_spread_pct, 2)} %)" if s.profiled_spread_pct is not None
                   else "")
                + (f" -> {fmt_duration(s.profiled_train_s)} for the samples to target" if s.profiled_train_s
                   is not None else "")
                if s.profiled_samples_per_s is not None else f"{NA} ({s.profiled_reason})"),
             f"Energy to target: {fmt_energy(s.energy_j)}"
             + (f", {fmt_sig(s.energy_per_sample_j * 1e3, 3)} mJ per sample ({s.energy_reason})"
                if s.energy_per_sample_j is not None else f" ({s.energy_reason})"),
             f"Cost to target: {fmt_usd(s.cost_usd) if s.cost_usd is not None else f'{NA} ({s.cost_reason})'}; "
             f"inference latency at accuracy: {fmt_sig(s.latency_ms, 3)} ms per item (held-out, one at a time)"]
    return [Text(printable(line), overflow="fold") for line in lines]


def _dawnbench_table(table: TtaTable) -> Table:
    t = plain_table()
    _label_column(t, "Entry")
    t.add_column("Hardware", overflow="fold", min_width=9, ratio=1)
    for header in ("Time", "x", "Epoch", "Cost", "x"):
        t.add_column(header, justify="right", no_wrap=True)
    for s in table.systems:
        t.add_row(printable(s.label), printable(s.accelerator or NA),
                  fmt_score(s.score, s.score_unit) if s.score is not None else f"{NA}*", fmt_ratio(s.ratio_time),
                  fmt_sig(s.epochs_to_target, 4), fmt_usd(s.cost_usd), fmt_ratio(s.ratio_cost))
    return t


def _inference_table(table: TtaTable) -> Table:
    t = plain_table()
    _label_column(t, "Entry")
    t.add_column("Hardware", overflow="fold", min_width=9, ratio=1)
    for header in ("Latency", "x", "Cost/item", "x", "Accuracy"):
        t.add_column(header, justify="right", no_wrap=True)
    for s in table.systems:
        t.add_row(printable(s.label), printable(s.accelerator or NA), fmt_score(s.latency_ms, "ms"),
                  fmt_ratio(s.ratio_time), fmt_usd(s.cost_per_item_usd), fmt_ratio(s.ratio_cost),
                  fmt_sig(s.accuracy, 4))
    return t


def _system_notes(table: TtaTable) -> list[RenderableType]:
    lines = []
    for s in table.systems:
        said = ([f"no score: {s.score_reason}"] if s.score is None and s.score_reason else []) + list(s.notes)
        if s.energy_j is None and s.energy_reason and table.source == "mlperf" and "no MLPerf Power" not in \
                s.energy_reason:
            said.append(f"energy: {s.energy_reason}")
        dropped = [r for r in s.runs if not r.used and r.dropped_reason and "olympic" not in r.dropped_reason]
        said += [f"{_name(r)} {r.dropped_reason}" for r in dropped]
        shown, more = listed(said, f"notes on {printable(s.label)}")
        lines += [Text(f"* {printable(s.label)}: {printable(line)}", overflow="fold") for line in shown]
        lines += [more] if more is not None else []
    return lines


def _name(run: TtaRun) -> str:
    return run.file.replace("\\", "/").rsplit("/", 1)[-1]


#: CSV columns: one row per system, then one per run of it (`row` says which), numbers unformatted.
CSV_COLUMNS = ("row", "source", "benchmark", "ruleset", "target", "system", "path", "accelerator",
               "accelerator_count", "score", "score_unit", "time_to_target_s", "ratio_time", "accelerator_time_s",
               "ratio_accelerator_time", "energy_j", "ratio_energy", "cost_usd", "ratio_cost", "latency_ms",
               "cost_per_item_usd", "to_converge", "converge_unit", "run_file", "used", "dropped_reason", "status",
               "init_s", "train_s", "eval_s", "samples_per_s", "reason")


def tta_csv(result: TtaResult) -> str:
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(CSV_COLUMNS)
    for table in result.tables:
        head = [table.source, table.benchmark, table.ruleset or "", _cell(table.target)]
        for s in table.systems:
            writer.writerow(["system", *head, s.label, s.path, s.accelerator or "", _cell(s.accelerator_count),
                             _cell(s.score), s.score_unit, _cell(s.time_to_target_s), _cell(s.ratio_time),
                             _cell(s.accelerator_time_s), _cell(s.ratio_accelerator_time), _cell(s.energy_j),
                             _cell(s.ratio_energy), _cell(s.cost_usd), _cell(s.ratio_cost), _cell(s.latency_ms),
                             _cell(s.cost_per_item_usd), _cell(s.to_converge), s.converge_unit or "", "", "", "",
                             "", _cell(s.init_s), _cell(s.train_s), _cell(s.eval_s), _cell(s.samples_per_s),
                             s.score_reason or ""])
            for r in s.runs:
                writer.writerow(["run", *head, s.label, s.path, s.accelerator or "", _cell(s.accelerator_count),
                                 _cell(r.score), s.score_unit, _cell(r.run_s), "", "", "", _cell(r.energy_j), "",
                                 "", "", "", "", _cell(r.to_converge), s.converge_unit or "", r.file,
                                 "1" if r.used else "0", r.dropped_reason or "", r.status or "", _cell(r.init_s),
                                 _cell(r.train_s), _cell(r.eval_s), "", r.score_reason or ""])
    for p in result.problems:
        writer.writerow(["problem", "", "", "", "", "", p.path, *[""] * (len(CSV_COLUMNS) - 8), p.reason])
    return out.getvalue()


def _cell(value) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else repr(float(value))
