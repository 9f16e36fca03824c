"""The run page shows the terminal's figures in the terminal's words (issue 28: the page said "Warm-up 1 iterations
in 31.3 ms" where the text said "20 iterations run in 0.21 s, stable from iteration 1", and had no CPU split).

Each profile is rendered both ways; the terminal's text (at 400 columns, so nothing wraps) is read back line by
line, and every headline figure it prints must be on the page as the same string: the lines under the header
(warm-up, windows, machine), every metrics row (value and detail, the CPU split included), the memory table's
own peaks and split at the allocator's peak with its reasons, and the kernel table and both rankings, column by
column. Real runs: the H100 ResNet-50 run (tests/fixtures/h100, re-analysed) and the committed CPU run's
profile.json; then the hand-built profiles of test_reports.py (a CUDA run, a CPU run, a partial one).
"""

from __future__ import annotations

import json
import re

import pytest
from test_html import Page
from test_reports import cpu_profile, cuda_profile, partial_profile
from testpaths import FIXTURES

from tbd.cli.run_analysis import profile_from_run_dir
from tbd.core.profile_result import Profile
from tbd.reports.html.run_page import profile_html
from tbd.reports.terminal import render_profile

H100_RUN = FIXTURES / "h100" / "resnet50-b64"
CPU_RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"
#: A terminal table's column and the page's column that holds the same figure.
SAME_COLUMN = {"Calls": "Calls", "Time": "Time", "Time %": "Share %", "Util %": "Util %", "Bound": "Bound",
               "Roof %": "Roof %", "Win": "Win", "Win %": "Win %"}
_CELLS = re.compile(r"\s{2,}")


def _profiles() -> dict:
    out = {"cuda": cuda_profile, "cpu": cpu_profile, "partial": partial_profile}
    if (CPU_RUN / "profile.json").exists():
        out["cpu_run"] = lambda: Profile.from_dict(json.loads((CPU_RUN / "profile.json").read_text()))
    if (H100_RUN / "trace.pt.trace.json.gz").exists():
        out["h100_run"] = lambda: profile_from_run_dir(H100_RUN)
    return out


@pytest.fixture(scope="module", params=sorted(_profiles()))
def both(request):
    profile = _profiles()[request.param]()
    return request.param, render_profile(profile, width=400).splitlines(), Page(profile_html(profile))


def _block(lines: list[str], start: str) -> list[str]:
    """The lines after the first that starts with `start`, up to the next blank line."""
    i = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next((j for j in range(i + 1, len(lines)) if not lines[j].strip()), len(lines))
    return lines[i + 1:end]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_lines_under_the_header_are_on_the_page(both):
    name, lines, page = both
    under = _block(lines, "tbd ")
    under = [line for line in under if not line.startswith(("!!", "device:"))]
    assert under, name
    for line in under:
        assert _words(line) in page.text, f"{name}: {line!r}"
    if name == "h100_run":  # the issue's own case: the warm-up run, then where the stable phase starts
        assert "warm-up: 20 iterations run in 2.01 s · stable from iteration 1 (detected)" in page.text
        assert "Warm-up 1 iterations" not in page.text


def test_every_metrics_row_has_the_same_value_and_detail(both):
    name, lines, page = both
    rows = _block(lines, "Metrics")[2:]  # under the column heads and the rule
    assert len(rows) >= 6, name
    for line in rows:
        label, value, *detail = _CELLS.split(line.strip(), maxsplit=2)
        assert page.row(label)[1:3] == [value, _words(detail[0]) if detail else ""], f"{name}: {label}"
    cpu = page.row("CPU utilization")[2]
    if name == "h100_run":  # the CPU split the page lacked: this workload's cores against the others'
        assert cpu == ("all cores, timing windows (7.0–7.3 % over the 3 windows): this workload 1.13 cores, other "
                       "processes 0.00")


def test_memory_table_and_reasons_are_the_same(both):
    name, lines, page = both
    block = _block(lines, "Memory")
    heads = _CELLS.split(block[0].strip())
    assert heads == ["Category", "Own peak", "At allocator peak"], name
    table = [line for line in block[2:] if line.strip() and not set(line.strip()) <= {"─"}][:7]
    assert [_CELLS.split(line.strip())[0] for line in table][-1] == "allocator peak", name
    for line in table:
        category, own, at_peak = _CELLS.split(line.strip())
        row = page.row(category)
        assert (row[1], row[3]) == (own, at_peak), f"{name}: {category}"
    reasons = [line for line in block if line.startswith("  ") and not line.startswith("   ")
               and "cross-check" not in line]
    cross = [line for line in block if line.startswith("  PyTorch cross-check:")]
    assert all(_words(line) in page.text for line in cross), name
    for line in reasons:
        assert _words(line) in page.text, f"{name}: {line!r}"


def _terminal_tables(lines: list[str]) -> list[list[list[str]]]:
    """The kernel (or op) table and the default ranking (time to win back): each a header row, then its rows, split
    into cells ([] where the terminal says "none")."""
    tables = []
    for i, line in enumerate(lines[:-3]):
        if lines[i + 1].strip().startswith("none"):
            continue
        if re.match(r"(Kernels|Ops) by time|Where the time can be won back", line):
            head = _CELLS.split(lines[i + 1].strip())
            rows = []
            for row in lines[i + 3:]:
                cells = _CELLS.split(row.strip())
                if len(cells) < len(head) or not row.strip():
                    break
                rows.append(cells)
            tables.append([head, *rows])
    return tables


def test_kernel_table_and_rankings_show_the_same_figures(both):
    name, lines, page = both
    terminal = _terminal_tables(lines)
    by_time = [t for t in page.tables if t and t[0][:3] in (["#", "Kernel", "Calls"], ["#", "Op", "Calls"])]
    win = [t for t in page.tables if t and "Win" in t[0]]
    ours = by_time + win
    non_empty = [t for t in terminal if len(t) > 1]
    assert len(ours) == len(non_empty), name
    for term, html in zip(non_empty, ours):
        checked = 0
        for head, page_head in SAME_COLUMN.items():
            if head not in term[0] or page_head not in html[0]:
                continue
            want = [r[term[0].index(head)] for r in term[1:]]
            got = [c.split(" — ")[0] for c in page.column(html, page_head)[:len(want)]]  # a null's reason follows
            assert got == want, f"{name}: {head}"
            checked += 1
        assert checked >= 3, f"{name}: {term[0]} against {html[0]}"
    for threshold in re.findall(r"Threshold: ([\d.,]+ %)", "\n".join(lines)):
        assert threshold in page.text, name


def test_the_recommendations_are_the_terminal_s(both):
    """Each recommendation the terminal lists (under "Recommendations", one per line at 400 columns) is
    on the page, word for word, in its own section."""
    name, lines, page = both
    anchors = {attrs.get("id") for _, attrs in page.elements}
    if "Recommendations" not in lines:
        assert "recommendations" not in anchors, name
        return
    listed = [_words(line.strip().removeprefix("-")) for line in _block(lines, "Recommendations")]
    assert listed and "recommendations" in anchors, name
    for text in listed:
        assert text in _words(page.text), f"{name}: {text!r}"
