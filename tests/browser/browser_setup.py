"""What the browser tests share: which chromium, its flags, the viewport and the pages (tests/browser).

A plain module rather than conftest.py, so the tests import it by a name no other folder uses.
"""

from __future__ import annotations

import os
import shutil

CHROMIUM = os.environ.get("TBD_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--disable-features=Translate,OptimizationHints,"
         "MediaRouter,SafeBrowsing", "--safebrowsing-disable-auto-update", "--metrics-recording-only",
         "--force-color-profile=srgb", "--font-render-hinting=none"]
#: The screenshots' viewport: CSS pixels, one device pixel each.
VIEWPORT = {"width": 1280, "height": 900}
#: file name -> the page rendered into it (test_html.rendered's names).
PAGES = {"run.html": "cuda", "sweep.html": "sweep", "comparison.html": "compare"}


def in_ci() -> bool:
    """Whether this run is CI (CI=true, as .ci/run sets it): there a missing browser fails instead of skipping."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing() -> str | None:
    """What is missing to run the browser tests, in one line; None when nothing is."""
    path = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if path is None:
        return f"no chromium at {CHROMIUM}: `make test` installs it (apt-get install chromium), or set TBD_CHROMIUM"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing: `make test` installs it (.venv/bin/pip install -e '.[test]')"
    return None
