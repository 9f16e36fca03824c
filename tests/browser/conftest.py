"""The browser for tests/browser: Debian's chromium, headless, driven by Playwright (marker `browser`).

Playwright is only the driver here: it launches the system's chromium (`/usr/bin/chromium`, or
`TBD_CHROMIUM`), never a browser build of its own (`playwright install` downloads one, which this
project's machines cannot). `make test` installs both: chromium through apt when it is absent, the
Python package through setup.cfg's `test` extra.

Chromium runs as root without a sandbox, with every background connection off (component updates,
sync, safe browsing lists, QUIC): the machines' network is closed, and a refused connection would
show up as a console error that is not the page's. Playwright gives each launch a fresh profile
folder (its own `--user-data-dir`).

No browser: with CI=true the tests fail, with one line saying what is missing; elsewhere they skip.

The pages are the ones tests/unit/test_html.py checks (`test_html.rendered`), written into a temporary
folder and opened as file:// URLs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from testpaths import TESTS

if str(TESTS / "unit") not in sys.path:  # the records and pages live with the unit tests
    sys.path.append(str(TESTS / "unit"))

from browser_setup import CHROMIUM, FLAGS, PAGES, VIEWPORT, in_ci, missing  # noqa: E402
from test_html import rendered  # noqa: E402


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """One headless chromium for the whole session; fails (CI=true) or skips when there is none."""
    reason = missing()
    if reason:
        if in_ci():
            pytest.fail(f"browser tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS,
                                          chromium_sandbox=False, timeout=60_000)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def pages_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three pages written as files, as a user would open them."""
    folder = tmp_path_factory.mktemp("pages")
    for file_name, page in PAGES.items():
        (folder / file_name).write_text(rendered(page), encoding="utf-8")
    return folder


@pytest.fixture()
def context(browser):
    """A fresh browsing context at the fixed viewport, JavaScript on (the tests read the DOM through it)."""
    ctx = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, color_scheme="light", locale="en-US",
                              timezone_id="UTC", reduced_motion="reduce")
    yield ctx
    ctx.close()
