"""The sweep's page in a real browser at 1400 px: its table fits without scrolling sideways, and an
unreliable point reads "unreliable" with its throughput interval (marker `browser`, tests/browser/conftest.py).

The sweep is test_sweep.py's `unreliable_sweep` beside test_figures.py's `sample_sweep` (an H100 sweep
with a partial and an OOM point), so both the widest cells ("unreliable", "±25%", "25.05 GiB") and a
long OOM reason are on the page.
"""

from __future__ import annotations

import sys

import pytest
from browser_setup import FLAGS  # noqa: F401 - the browser fixture's module, imported first as conftest does
from testpaths import TESTS

if str(TESTS / "unit") not in sys.path:
    sys.path.append(str(TESTS / "unit"))

from test_figures import sample_sweep  # noqa: E402
from test_sweep import FIXTURE_RUN, unreliable_sweep  # noqa: E402

from tbd.cli.run_analysis import load_profile  # noqa: E402
from tbd.reports.html.sweep_page import sweep_html  # noqa: E402

WIDTH = 1400


@pytest.fixture(scope="module")
def sweep_pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep-pages")
    pages = {"h100.html": sweep_html(sample_sweep()), "unreliable.html": sweep_html(unreliable_sweep(
        load_profile(FIXTURE_RUN)))}
    for name, text in pages.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("name", ["h100.html", "unreliable.html"])
def test_the_sweep_table_fits_1400_px_without_scrolling_sideways(browser, sweep_pages, name):
    context = browser.new_context(viewport={"width": WIDTH, "height": 900}, device_scale_factor=1)
    try:
        page = context.new_page()
        page.goto((sweep_pages / name).as_uri(), wait_until="load")
        wrapper = page.locator("#summary div.wide").first
        scroll, client = wrapper.evaluate("w => [w.scrollWidth, w.clientWidth]")
        assert scroll <= client, f"the summary table is {scroll} px wide in a {client} px wrapper"
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
        if name == "unreliable.html":
            row = page.locator("#summary tr", has_text="unreliable").first.inner_text().split("\t")
            assert row[:4] == ["8", "unreliable", "100", "±25%"]
    finally:
        context.close()
