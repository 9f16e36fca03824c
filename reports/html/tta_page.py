"""A time-to-accuracy result (`TtaResult`) as one self-contained HTML page.

Top to bottom: what was read (sources, the scoring tools' versions), then per benchmark or task its heading
(source, ruleset, target and where the target comes from), the systems side by side with their ratios to the
first, each system's runs unfolding beneath (used or why dropped, status, time split), the table's figures,
and at the end what could not be read. Every figure is the record's: scores are written in the unit their
source states them in, ratios are the record's; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Callable

from tbd.core.tta_result import TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.reports.comparison_text import fmt_ratio
from tbd.reports.figures.tta_figures import SOURCE_NAMES, is_inference, table_slugs, tta_table_figures
from tbd.reports.html.page import (
    MAX_LIST_ITEMS,
    Cell,
    banner,
    esc,
    facts,
    inline_svg,
    na_cell,
    notes_list,
    num,
    page,
    section,
    table,
)
from tbd.reports.numbers import NA, fmt_count, fmt_duration, fmt_sig
from tbd.reports.printable import printable

#: Units as a score cell writes them after the figure ("12.3 min", "4.56 h", "7.89 ms").
SCORE_UNIT_NAMES = {"min": "min", "h": "h", "ms": "ms/item"}


def tta_html(result: TtaResult) -> str:
    """The time-to-accuracy result as one self-contained HTML page.

    Args: result: a finished TtaResult.
    Returns: the HTML document: header, one section per table (systems, runs, figures), then the
        "could not read" section when a file or tool failed.
    """
    names = ", ".join(t.benchmark for t in result.tables) or "no benchmark"
    title = f"tbd tta · {printable(names)}"
    warn = banner(f"{len(result.problems)} of the inputs could not be read: see \u201ccould not read\u201d below",
                  warn=True) if result.problems else ""
    body = [f"<header>\n<h1>{esc(title)}</h1>", facts(_facts(result)), warn, "</header>"]
    body += [_table_section(t, slug) for t, slug in zip(result.tables, table_slugs(result))]
    if not result.tables:
        body.append(f"<p>{esc(NA)} — no benchmark could be read</p>")
    if result.problems:
        rows = [[Cell(f"<code>{esc(p.path)}</code>", markup=True), p.reason] for p in result.problems]
        body.append(section("Could not read", table(["Path", "Reason"], rows), anchor="problems"))
    return page(title, body)


def _facts(result: TtaResult) -> list[tuple[str, str]]:
    pairs = [("Read", "; ".join(result.sources) or NA),
             ("Tables", f"{len(result.tables)}: " + ", ".join(t.benchmark for t in result.tables)
              if result.tables else "none")]
    if result.tool:
        pairs.append(("Scored by", ", ".join(f"{name} {version}" for name, version in result.tool.items())))
    return pairs


def _target(tbl: TtaTable) -> str:
    """"0.759 top5Accuracy — MLPerf compliance rules", or "none" when the table names no target."""
    if tbl.target is None:
        return "none"
    metric = f" {tbl.metric}" if tbl.metric else ""
    return printable(f"{fmt_sig(tbl.target)}{metric}" + (f" — {tbl.target_source}" if tbl.target_source else ""))


def _table_section(tbl: TtaTable, slug: str) -> str:
    source = SOURCE_NAMES.get(tbl.source, tbl.source)
    heading = f"{tbl.benchmark} — {source}" + (f" {tbl.ruleset}" if tbl.ruleset else "")
    pairs = [("Source", source)]
    if tbl.source == "mlperf" or tbl.ruleset:
        ruleset = tbl.ruleset or NA
        pairs.append(("Ruleset", ruleset + (f" (from {tbl.ruleset_source})" if tbl.ruleset_source else "")))
    if tbl.metric:
        pairs.append(("Metric", tbl.metric))
    pairs.append(("Target", _target(tbl)))
    if tbl.systems:
        pairs.append(("Ratios are to", tbl.systems[0].label))
    figures = tta_table_figures(tbl, slug)
    shown = tbl.systems[:MAX_LIST_ITEMS]  # a folder of thousands of systems: the runs of the first only
    more = len(tbl.systems) - len(shown)
    cut = f"\u2026 and the runs of {fmt_count(more)} more systems not shown (the JSON and CSV output hold every one)"
    parts = [facts(pairs), _systems(tbl), notes_list(_system_notes(tbl)), *(_runs(tbl, s) for s in shown),
             f'<p class="caption more">{esc(cut)}</p>' if more > 0 else "", notes_list(tbl.notes),
             *(f'<figure id="figure-{esc(stem)}">{inline_svg(fig, stem)}'
               + (f'<figcaption class="na">{esc(figures.notes[stem])}</figcaption>' if stem in figures.notes else "")
               + "</figure>" for stem, fig in figures.items())]
    return section(heading, *parts, anchor=f"table-{slug}")


# -- the systems side by side ----------------------------------------------------------------------------


def _value(value: float | None, unit: str, reason: str | None = None) -> Cell:
    """A figure with its unit ("12.3 MJ"), or "n/a — reason"."""
    return na_cell(reason) if value is None else num(f"{fmt_sig(value)} {unit}")


def _accelerators(system: TtaSystem) -> str:
    if system.accelerator is None and system.accelerator_count is None:
        return NA
    count = f"{system.accelerator_count} × " if system.accelerator_count is not None else ""
    return printable(f"{count}{system.accelerator or 'accelerators'}")


def _score(system: TtaSystem) -> Cell:
    unit = SCORE_UNIT_NAMES.get(system.score_unit, printable(system.score_unit))
    return _value(system.score, unit, system.score_reason)


def _accelerator_time(system: TtaSystem) -> Cell:
    """Accelerator-hours: time to target × accelerators, the record's seconds written in hours (when null, the
    reason is the score's, in the cell beside: here only as the tooltip)."""
    seconds = system.accelerator_time_s
    if seconds is None:
        return Cell(NA, title=system.score_reason, cls="num na")
    return num(f"{fmt_sig(seconds / 3600)} accelerator-h")


def _ratio(value: float | None) -> Cell:
    return num(fmt_ratio(value))


def _runs_count(system: TtaSystem) -> Cell:
    used = sum(r.used for r in system.runs)
    title = f"the benchmark needs {system.runs_required} runs" if system.runs_required is not None else None
    return num(f"{used}/{len(system.runs)}", title=title)


def _system_cell(system: TtaSystem, reference: bool) -> Cell:
    """The system's label (the first marked as the reference), its details as the tooltip."""
    details = [system.submitter, system.system, system.division, system.availability, system.framework, system.path]
    text = printable(system.label) + (" (reference)" if reference else "")
    return Cell(text, title=" · ".join(printable(d) for d in details if d))


def _rcp(system: TtaSystem) -> Cell:
    if system.rcp is None:
        return Cell(NA)
    factor = system.rcp_scaling_factor
    return Cell(printable(system.rcp), title=f"score scaled by {fmt_sig(factor)}" if factor is not None else None)


def _to_converge(system: TtaSystem) -> Cell:
    if system.to_converge is None:
        return Cell(NA)
    unit = f" {system.converge_unit}" if system.converge_unit else ""
    return num(f"{fmt_sig(system.to_converge)}{printable(unit)}")


#: Columns shown when some system of the table has a value: head, value, cell.
_OPTIONAL: tuple[tuple[str, Callable[[TtaSystem], object], Callable[[TtaSystem], Cell]], ...] = (
    ("Time × accelerators", lambda s: s.accelerator_time_s, _accelerator_time),
    ("Energy", lambda s: s.energy_j, lambda s: _value(_mj(s.energy_j), "MJ", s.energy_reason)),
    ("Cost", lambda s: s.cost_usd, lambda s: _value(s.cost_usd, "USD", s.cost_reason)),
    ("Cost per hour", lambda s: s.cost_per_hour, lambda s: _value(s.cost_per_hour, "USD/h", s.cost_reason)),
    ("Latency", lambda s: s.latency_ms, lambda s: _value(s.latency_ms, "ms", s.score_reason)),
    ("Cost per item", lambda s: s.cost_per_item_usd, lambda s: _value(s.cost_per_item_usd, "USD", s.cost_reason)),
    ("Accuracy", lambda s: s.accuracy, lambda s: num(fmt_sig(s.accuracy))),
    ("Epochs", lambda s: s.epochs_to_target, lambda s: num(fmt_sig(s.epochs_to_target))),
    ("To converge", lambda s: s.to_converge, _to_converge),
    ("Global batch", lambda s: s.global_batch_size, lambda s: num(fmt_count(s.global_batch_size))),
    ("Time / first", lambda s: s.ratio_time, lambda s: _ratio(s.ratio_time)),
    ("Time × accelerators / first", lambda s: s.ratio_accelerator_time, lambda s: _ratio(s.ratio_accelerator_time)),
    ("Energy / first", lambda s: s.ratio_energy, lambda s: _ratio(s.ratio_energy)),
    ("Cost / first", lambda s: s.ratio_cost, lambda s: _ratio(s.ratio_cost)),
    ("RCP", lambda s: s.rcp, _rcp),
)
#: Null in every system of a table, these say why under the table (one line per reason) instead of a column.
_REASONED = (("Energy", lambda s: s.energy_j, lambda s: s.energy_reason),
             ("Cost", lambda s: s.cost_usd if s.score_unit != "ms" else s.cost_per_item_usd, lambda s: s.cost_reason))


def _systems(tbl: TtaTable) -> str:
    """One row per system: label, accelerators, score, then each column some system has a value in."""
    if not tbl.systems:
        return f"<p>{esc(NA)} — the table has no system</p>"
    columns = [c for c in _OPTIONAL if any(c[1](s) is not None for s in tbl.systems)]
    if is_inference(tbl):  # the score is the latency: one column says it
        columns = [c for c in columns if c[0] != "Latency"]
    heads = ["System", "Accelerators", "Score", *(head for head, _, _ in columns), "Runs used"]
    rows = [[_system_cell(s, i == 0), _accelerators(s), _score(s), *(cell(s) for _, _, cell in columns),
             _runs_count(s)] for i, s in enumerate(tbl.systems)]
    absent = []
    for head, value, reason in _REASONED:
        if all(value(s) is None for s in tbl.systems):
            reasons = dict.fromkeys(reason(s) for s in tbl.systems if reason(s))
            absent += [f"{head}: {NA} — {printable(r)}" for r in reasons]
    caption = "Score: as the source states it (MLPerf: result_summarizer's olympic mean of the used runs, minutes; " \
              "DAWNBench: hours to the target, or ms per item for inference). Ratios are the record's, to the first " \
              "system."
    return table(heads, rows, caption=caption) + notes_list(absent)


def _system_notes(tbl: TtaTable) -> list[str]:
    return [f"{printable(s.label)}: {printable(n)}" for s in tbl.systems for n in s.notes]


# -- each system's runs ------------------------------------------------------------------------------------


def _used(run: TtaRun) -> Cell:
    if run.used:
        return Cell("used")
    return Cell("dropped" + (f" — {printable(run.dropped_reason)}" if run.dropped_reason else ""), cls="na")


def _seconds(value: float | None) -> Cell:
    return num(fmt_duration(value)) if value is not None else Cell(NA, cls="num")


def _samples(run: TtaRun) -> Cell:
    if run.samples_to_converge is None:
        return na_cell(run.samples_reason)
    return num(fmt_count(run.samples_to_converge))


def _runs(tbl: TtaTable, system: TtaSystem) -> str:
    """The system's runs in a `<details>`: one row each, its notes beneath."""
    unit = SCORE_UNIT_NAMES.get(system.score_unit, printable(system.score_unit))
    rows = [[Cell(f"<code>{esc(r.file)}</code>", markup=True), _used(r), printable(r.status or NA),
             _value(r.score, unit, r.score_reason), _seconds(r.init_s), _seconds(r.run_s), _seconds(r.train_s),
             _seconds(r.eval_s), num(fmt_sig(r.epochs_to_converge)), _samples(r),
             _value(_mj(r.energy_j), "MJ", r.energy_reason) if r.energy_j is not None or r.energy_reason
             else Cell(NA, cls="num")]
            for r in system.runs]
    heads = ["File", "Used", "Status", "Score", "Init", "Run start to stop", "Train", "Eval", "Epochs to converge",
             "Samples to converge", "Energy"]
    notes = [f"{printable(r.file)}: {printable(n)}" for r in system.runs for n in r.notes]
    used = sum(r.used for r in system.runs)
    summary = f"{printable(system.label)} — {len(system.runs)} runs, {used} used"
    inner = table(heads, rows) + notes_list(notes) if system.runs else f"<p>{esc(NA)} — no run was read</p>"
    return f"<details><summary>{esc(summary)}</summary>\n{inner}\n</details>"


def _mj(joules: float | None) -> float | None:
    """Energy is kept in joules (docs/tta-json.md); a page shows megajoules."""
    return None if joules is None else joules / 1e6
