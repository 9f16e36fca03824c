"""Pages the CLI writes from real results: `tbd report RUN --html` of a committed run, and of a comparison
of the two committed runs saved by `tbd compare --out`, opened in headless chromium."""

from __future__ import annotations

import json
import shutil

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main

RUNS = FIXTURES / "runs"
A_RUN, B_RUN = RUNS / "resnet50-test-cpu-b8-threads1", RUNS / "resnet50-test-cpu-b8-threads2"


def _throughput(run) -> float:
    """images/s from the run's own iterations.json: batch x timing iterations / the window's time."""
    log = json.loads((run / "iterations.json").read_text())
    first, last = log["timing_window"]
    return 8 * (last - first + 1) / (log["timing_window_ns"] / 1e9)


@pytest.fixture(scope="module")
def cli_pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-pages")
    run = folder / "run"
    shutil.copytree(A_RUN, run)
    assert main(["report", str(run), "--html"]) == 0
    assert main(["compare", str(A_RUN), str(B_RUN), "--out", str(folder / "ab.json")]) == 0
    assert main(["report", str(folder / "ab.json"), "--html"]) == 0
    return {"run": run / "report.html", "compare": folder / "ab.html"}


@pytest.mark.parametrize("which", ["run", "compare"])
def test_cli_page_loads_clean_and_shows_the_runs_figures(context, cli_pages, which):
    page = context.new_page()
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("requestfailed", lambda r: problems.append(r.url))
    page.goto(cli_pages[which].as_uri(), wait_until="load")
    page.wait_for_timeout(100)
    assert problems == []
    assert page.locator("figure > svg").count() == 3
    text = page.locator("#metrics").inner_text()
    a = _throughput(A_RUN)
    # The run page shows the terminal's figure (one decimal from 100 on); the comparison page its own.
    assert (f"{a:,.1f} images/s" if which == "run" else f"{a:,.0f} images/s") in text
    if which == "compare":
        assert f"{_throughput(B_RUN) / a:.3g}x" in text
