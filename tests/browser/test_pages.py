"""The HTML reports in a real browser: they load clean, show the record's values, and look as reviewed.

Three pages (a run, a sweep, a comparison: browser_setup.PAGES) are opened from file:// URLs in headless
chromium. Each must load with no console error, no uncaught exception, no failed request and no
request for anything but itself; the DOM must show the values the record holds; with JavaScript
off the same text must be there; and a screenshot of the first screen (1280x900 CSS pixels at
device scale 1), and of one figure, must match its golden PNG in tests/golden/screenshots/.

The screenshots are compared twice: the mean absolute difference per channel (0-255) must stay
below `MEAN_DIFF_LIMIT` (a shifted layout or a new colour moves it far past), and at most
`STRONG_PIXELS_LIMIT` pixels may differ by more than `STRONG_LEVELS` in a channel (a changed text).
Two renders on this Debian image are pixel-identical (fonts render the same on every machine of
it); one changed digit in the metrics table ("1,843" -> "1,844") moves the mean by 0.005 only but
changes 36 pixels strongly, which the second test catches. To accept a change after reading it,
rewrite the goldens and review them like code:

    TBD_REGEN_GOLDENS=1 .venv/bin/python -m pytest tests/browser
    git diff --stat tests/golden/screenshots   # then look at each PNG

A failing comparison leaves the new screenshot and a difference image beside the test's tmp_path
and names them.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np
import pytest
from browser_setup import PAGES, VIEWPORT
from PIL import Image
from testpaths import GOLDEN

SCREENSHOTS = GOLDEN / "screenshots"
MEAN_DIFF_LIMIT = 0.25
STRONG_LEVELS = 64
STRONG_PIXELS_LIMIT = 8
REGENERATE = os.environ.get("TBD_REGEN_GOLDENS", "") not in ("", "0")


def _open(context, pages_dir: Path, file_name: str):
    """Open a page and record everything that went wrong or went out while it loaded."""
    page = context.new_page()
    events = {"console errors": [], "page errors": [], "failed requests": [], "other requests": []}
    url = (pages_dir / file_name).as_uri()
    page.on("console", lambda m: events["console errors"].append(m.text) if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: events["page errors"].append(str(e)))
    page.on("requestfailed", lambda r: events["failed requests"].append(f"{r.url}: {r.failure}"))
    page.on("request", lambda r: events["other requests"].append(r.url) if r.url != url else None)
    page.goto(url, wait_until="load")
    return page, events


@pytest.mark.parametrize("file_name", sorted(PAGES))
def test_page_loads_clean(context, pages_dir, file_name):
    page, events = _open(context, pages_dir, file_name)
    assert page.title().startswith("tbd")
    assert page.locator("figure > svg").count() == 3
    widths = page.locator("figure > svg").evaluate_all("svgs => svgs.map(s => s.getBoundingClientRect().width)")
    assert all(w > 300 for w in widths), widths  # drawn, at a readable size
    page.wait_for_timeout(100)  # let any late console message arrive
    assert events == {"console errors": [], "page errors": [], "failed requests": [], "other requests": []}


def test_run_page_shows_the_records_values(context, pages_dir):
    page, _ = _open(context, pages_dir, "run.html")
    assert page.locator("#metrics tr", has_text="Throughput").inner_text().split("\t")[1] == "1,843.2 sentences/s"
    busy = page.locator("#metrics tr", has_text="GPU busy")  # the run's figure, then the traced window's own
    assert [row.split("\t")[:2] for row in busy.all_inner_texts()] == [["GPU busy", "87.3 %"],
                                                                       ["GPU busy, as traced", "41.6 %"]]
    feature_maps = page.locator("#memory tr", has_text="feature maps").first
    assert feature_maps.inner_text().split("\t")[1:3] == ["3.00 GiB", "3,221,225,472"]
    assert page.get_by_text("ampere_sgemm_128x128_tn").first.is_visible()
    # A C++ name shows shortened, and in full (as text, brackets and all) once its row is unfolded.
    row = page.locator("#kernels details", has_text="elemWiseRNNcell").first
    full = row.locator("code").nth(1)
    assert not full.is_visible()
    row.locator("summary").click()
    assert full.is_visible() and full.inner_text().startswith("void cudnn::rnn::elemWiseRNNcell<float, float,")
    assert page.locator("#rankings").get_by_text("25.6 %").count() == 1


def test_sweep_and_comparison_pages_show_the_records_values(context, pages_dir):
    sweep, _ = _open(context, pages_dir, "sweep.html")
    oom = sweep.locator("#summary tr", has_text="OOM").inner_text().split("\t")
    assert oom[:3] == ["512", "OOM", "n/a"]
    assert sweep.get_by_text("batch 512: OOM — CUDA out of memory").is_visible()
    comparison, _ = _open(context, pages_dir, "comparison.html")
    throughput = comparison.locator("#metrics tr", has_text="Throughput").inner_text().split("\t")
    assert throughput[1:] == ["1,050 images/s", "2,205 images/s", "2.10x"]
    assert comparison.get_by_text("B has 4.27x A's FP32 peak").is_visible()


def test_pages_read_the_same_without_javascript(browser, pages_dir):
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        for file_name, expected in (("run.html", "1,843.2 sentences/s"), ("sweep.html", "2,410"),
                                    ("comparison.html", "2.10x")):
            page = context.new_page()
            page.goto((pages_dir / file_name).as_uri())
            assert expected in page.locator("main").inner_text(), file_name
            assert page.locator("script").count() == 0
    finally:
        context.close()


def _compare_with_golden(png: bytes, name: str, out: Path) -> None:
    """Assert `png` matches tests/golden/screenshots/`name` (or rewrite it under TBD_REGEN_GOLDENS=1)."""
    golden = SCREENSHOTS / name
    if REGENERATE:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(png)
        return
    assert golden.exists(), f"no golden {golden}; create it with TBD_REGEN_GOLDENS=1 and review it"
    actual = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    expected = np.asarray(Image.open(golden).convert("RGB"), dtype=np.int16)
    kept = out / f"actual-{name}"
    if actual.shape != expected.shape:
        kept.write_bytes(png)
        pytest.fail(f"{name}: {actual.shape[1]}x{actual.shape[0]} px, golden {expected.shape[1]}x{expected.shape[0]}; "
                    f"new screenshot at {kept}")
    difference = np.abs(actual - expected)
    mean = float(difference.mean())
    strong = int((difference.max(axis=2) > STRONG_LEVELS).sum())
    if mean >= MEAN_DIFF_LIMIT or strong > STRONG_PIXELS_LIMIT:
        kept.write_bytes(png)
        diff_path = out / f"diff-{name}"
        Image.fromarray(np.clip(difference * 4, 0, 255).astype(np.uint8)).save(diff_path)
        pytest.fail(f"{name}: mean difference {mean:.3f} (limit {MEAN_DIFF_LIMIT}), {strong} pixels changed by more "
                    f"than {STRONG_LEVELS} (limit {STRONG_PIXELS_LIMIT}); new screenshot at {kept}, difference at "
                    f"{diff_path}; if the change is intended: TBD_REGEN_GOLDENS=1 .venv/bin/python -m pytest "
                    "tests/browser")


@pytest.mark.parametrize("file_name", sorted(PAGES))
def test_first_screen_matches_golden(context, pages_dir, tmp_path, file_name):
    page, _ = _open(context, pages_dir, file_name)
    png = page.screenshot(full_page=False, animations="disabled", caret="hide")
    _compare_with_golden(png, file_name.replace(".html", ".png"), tmp_path)


def test_a_figure_renders_as_reviewed(context, pages_dir, tmp_path):
    page, _ = _open(context, pages_dir, "run.html")
    png = page.locator("#figure-memory").screenshot(animations="disabled")
    _compare_with_golden(png, "run_memory_figure.png", tmp_path)


def test_the_browser_part_stays_quick(browser, pages_dir):
    # Each page opens in well under a second here; a slow load means the page grew or fetches something.
    context = browser.new_context(viewport=VIEWPORT)
    try:
        started = time.monotonic()
        for file_name in PAGES:
            context.new_page().goto((pages_dir / file_name).as_uri())
        assert time.monotonic() - started < 15
    finally:
        context.close()
