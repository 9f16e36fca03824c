"""`tbd tta --html` in a real browser: the page of the hand-written DAWNBench entries loads clean
(no console error, no request for anything but itself), draws its figures, and shows the values the
result holds, with JavaScript on and off."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main


@pytest.fixture(scope="module")
def tta_page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tta") / "tta.html"
    assert main(["tta", str(FIXTURES / "dawnbench"), "--html", str(path)]) == 0
    return path


def test_tta_page_loads_clean_and_shows_the_scores(context, tta_page):
    page = context.new_page()
    url = tta_page.as_uri()
    events: list[str] = []
    page.on("console", lambda m: events.append(m.text) if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: events.append(str(e)))
    page.on("request", lambda r: events.append(r.url) if r.url != url else None)
    page.goto(url, wait_until="load")
    page.wait_for_timeout(100)
    assert events == []
    assert page.title().startswith("tbd")
    widths = page.locator("figure svg").evaluate_all("svgs => svgs.map(s => s.getBoundingClientRect().width)")
    assert len(widths) >= 6 and all(w > 300 for w in widths)  # time and accuracy figures of each table
    text = page.locator("body").inner_text()
    # example_resnet9: 0.4 h to 94 % top-1 at 2.5 USD/h (tests/unit/test_tta_command.py computes them).
    assert "0.400 h" in text and "CIFAR10 train" in text and "ImageNet inference" in text


def test_tta_page_reads_the_same_without_javascript(browser, tta_page):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(tta_page.as_uri(), wait_until="load")
        text = page.locator("body").inner_text()
    finally:
        context.close()
    assert "0.400 h" in text and "CIFAR10 train" in text and "ImageNet inference" in text
