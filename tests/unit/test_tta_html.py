"""The time-to-accuracy page (reports/html/tta_page.py): parsed with test_html.py's `Page` and checked for
values, escaping, the runs of each system, the figures and the "could not read" section. The record is
test_tta_figures.py's `sample_tta`.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import matplotlib
import pytest
from test_html import FETCHING, Page
from test_tta_figures import LABEL, NULL_REASON, dawnbench_table, mlperf_table, sample_tta

from tbd.reports.html.tta_page import tta_html

matplotlib.use("Agg")


@functools.cache
def rendered() -> str:
    return tta_html(sample_tta())


@pytest.fixture(scope="module")
def text() -> str:
    return rendered()


@pytest.fixture(scope="module")
def page() -> Page:
    return Page(rendered())


def _systems_table(page: Page, first_cell: str) -> list[list[str]]:
    return next(t for t in page.tables if t and t[0][0] == "System" and any(r[0] == first_cell for r in t))


def test_a_whole_self_contained_document(text, page):
    assert text.startswith("<!DOCTYPE html>")
    assert ("meta", {"charset": "utf-8"}) in page.elements
    assert page.title == "tbd tta · resnet, ImageNet inference"
    assert not any(tag in FETCHING or tag == "script" for tag, _ in page.elements)


def test_each_table_has_its_heading_source_ruleset_and_target(page):
    assert "resnet — MLPerf Training 4.0.0" in page.text
    assert "Ruleset 4.0.0 (from path)" in page.text
    assert "Target 0.759 — MLPerf compliance rules" in page.text
    assert "ImageNet inference — DAWNBench" in page.text
    assert "Target 0.930 top5Accuracy — DAWNBench README: 93% top-5" in page.text
    assert "Scored by mlperf-logging 4.1.68" in page.text


def test_systems_show_their_formatted_figures(page):
    reference = f"{LABEL} (reference)"
    systems = _systems_table(page, reference)
    head = systems[0]
    a, b = systems[1], systems[2]
    assert a[0] == reference and b[0] == "mlcommons/dgx_b"
    assert a[head.index("Accelerators")] == "8 × NVIDIA H100"
    assert a[head.index("Score")] == "12.5 min"
    assert b[head.index("Score")] == f"n/a — {NULL_REASON}"
    assert a[head.index("Time × accelerators")] == "1.67 accelerator-h"  # 6,000 accelerator-seconds
    assert b[head.index("Time × accelerators")] == "n/a"  # the reason is the score's, said once
    assert a[head.index("Energy")] == "1,530 MJ" and b[head.index("Energy")] == "n/a — no MLPerf Power log"
    assert a[head.index("Time / first")] == "1.00x" and b[head.index("Time / first")] == "n/a"
    assert [a[head.index("RCP")], b[head.index("RCP")]] == ["Pass", "Missing"]
    assert [a[head.index("Runs used")], b[head.index("Runs used")]] == ["2/3", "2/3"]
    assert "Cost" not in head  # null for every system: its reason is said once, under the table
    assert "Cost: n/a — MLPerf states no cost" in page.text


def test_inference_scores_are_latency_per_item(page):
    systems = _systems_table(page, "Stanford DAWN · ResNet 50 · 1 K80 (reference)")
    head = systems[0]
    assert [r[head.index("Score")] for r in systems[1:]] == ["22.9 ms/item", "5.12 ms/item"]
    assert [r[head.index("Cost per item")] for r in systems[1:]] == ["0.00000240 USD", "0.00000120 USD"]
    assert [r[head.index("Cost / first")] for r in systems[1:]] == ["n/a", "0.500x"]
    assert "Latency" not in head and "Time / first" not in head


def test_each_system_lists_its_runs_in_a_collapsible_block(page):
    summaries = [tag for tag, _ in page.elements if tag == "summary"]
    systems = [s for t in (mlperf_table(), dawnbench_table()) for s in t.systems]
    assert len(summaries) == len(systems)
    assert f"{LABEL} — 3 runs, 2 used" in page.text
    runs = next(t for t in page.tables if t and t[0][0] == "File" and t[1][3] == "12.5 min")
    head = runs[0]
    assert [r[head.index("Used")] for r in runs[1:]] == ["used", "used", "dropped — fastest run (olympic mean)"]
    assert [r[head.index("Init")] for r in runs[1:]] == ["42.0 s"] * 3
    assert [r[head.index("Train")] for r in runs[1:]] == ["720 s", "690 s", "630 s"]
    assert [r[head.index("Eval")] for r in runs[1:]] == ["30.0 s"] * 3
    assert [r[head.index("Energy")] for r in runs[1:]] == ["1,520 MJ", "1,490 MJ", "1,400 MJ"]
    assert runs[1][head.index("Samples to converge")] == "46,122,012"
    assert "dropped — did not converge: run_stop status aborted" in page.text


def test_figures_are_inline_svgs_with_ids_of_their_own(text, page):
    assert page.figure_children == ["svg"] * 4
    ids = [attrs["id"] for _, attrs in page.elements if "id" in attrs]
    assert len(ids) == len(set(ids))
    for stem in ("tta-resnet-time", "tta-resnet-accuracy", "tta-resnet-throughput", "tta-imagenet-inference-time"):
        assert f'id="figure-{stem}"' in text
    assert "<?xml" not in text


def test_record_text_is_escaped(text, page):
    assert LABEL not in text  # never raw markup...
    assert "$x$ &lt;&amp;&gt; $\\undefinedcmd$" in text
    assert LABEL in page.text  # ...yet it reads as it is
    assert "<script>" not in text


def test_problems_are_listed_under_could_not_read(page):
    problems = next(t for t in page.tables if t and t[0] == ["Path", "Reason"])
    assert problems[1:] == [["results/broken/result_0.txt", "not an MLPerf log: no :::MLLOG line"],
                            ["dawnbench/<script>.tsv", 'unreadable TSV: "hours" column missing & more']]
    assert "Could not read" in page.text
    assert "2 of the inputs could not be read" in page.text


def test_no_problem_section_without_problems_and_a_page_without_tables():
    clean = Page(tta_html(replace(sample_tta(), problems=[])))
    assert "Could not read" not in clean.text and "could not be read" not in clean.text
    empty = Page(tta_html(replace(sample_tta(), tables=[])))
    assert "n/a — no benchmark could be read" in empty.text
    assert empty.title == "tbd tta · no benchmark"
