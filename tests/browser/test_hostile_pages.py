"""Pages built from hostile data do nothing in a real browser (issue 29): no dialog, no element, no handler.

Each page kind (a run, a sweep, a comparison, a time-to-accuracy result) is rendered from records whose names,
labels, notes, reasons and paths hold markup (`<script>`, `"><img onerror=...>`, `</style><script>`, `<svg
onload=...>`, `<iframe>`, a `javascript:` URL where a path goes, a 300,000-character note) and opened in headless
chromium beside the same page built from clean data. The hostile page must: open no dialog and request nothing
but itself; hold exactly as many script, img, svg, iframe, object, embed, a, link, style, base, form, meta
elements as the clean one; carry no `on*` attribute and no `javascript:` URL anywhere; show each payload as
text; and carry the Content-Security-Policy, which the browser enforces (a script and an image added to the
page afterwards are refused and reported as violations).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_figures import sample_comparison, sample_sweep
from test_html import rendered
from test_reports import cuda_profile
from testpaths import FIXTURES

from tbd.cli.tta_analysis import analyse
from tbd.core.profile_result import OpGroupRow
from tbd.core.tta_result import TtaProblem, TtaResult
from tbd.reports.html.page import MAX_TEXT_CHARS
from tbd.reports.html.run_page import comparison_html, profile_html, sweep_html
from tbd.reports.html.tta_page import tta_html

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
STYLE = "</style><script>alert(3)</script>"
SVG = "<svg onload=alert(4)>"
IFRAME = '<iframe src="javascript:alert(5)"></iframe>'
JS_URL = "javascript:alert(6)"
NAME = f"net{SCRIPT}{IMG}"
#: A note longer than any page shows: cut at MAX_TEXT_CHARS, its length said.
LONG = "A" * 300_000
PAYLOADS = (SCRIPT, IMG, STYLE, SVG, IFRAME, JS_URL)
#: Elements data must never add.
TAGS = ("script", "img", "svg", "iframe", "object", "embed", "a", "link", "style", "base", "form", "meta", "input",
        "video", "audio", "math", "frame", "frameset", "template")
#: Every element's attribute that is a handler or holds a javascript: URL, as "tag attr=value".
_LIVE = """() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes]
    .filter(a => a.name.toLowerCase().startsWith('on') || /^\\s*javascript:/i.test(a.value))
    .map(a => `${el.tagName} ${a.name}=${a.value}`))"""
_COUNTS = "tags => Object.fromEntries(tags.map(t => [t, document.getElementsByTagName(t).length]))"
#: Adds a script and an image after load; resolves with whether the script ran and the violations reported.
_PROBE_CSP = """() => new Promise(resolve => {
    const seen = [];
    document.addEventListener('securitypolicyviolation', e => seen.push(e.effectiveDirective));
    const s = document.createElement('script'); s.textContent = 'window.__ran = 1'; document.body.appendChild(s);
    const i = document.createElement('img'); i.src = 'https://example.com/x.png'; document.body.appendChild(i);
    setTimeout(() => resolve({ran: window.__ran === 1, seen}), 300);
})"""


def _hostile_run() -> str:
    p = cuda_profile()
    kernels = [replace(k, name=NAME + SVG) if i == 0 else k for i, k in enumerate(p.kernels)]
    groups = [OpGroupRow(f"aten::{IFRAME}", 360, 0.096, 32.0, 3.9e12, 61.2),
              OpGroupRow(STYLE, 540, 0.009, 3.0, None, None)]
    return profile_html(replace(p, spec={**p.spec, "model": NAME, "trace": JS_URL}, kernels=kernels,
                                op_groups=groups, notes=[*p.notes, *PAYLOADS, LONG]))


def _hostile_sweep() -> str:
    s = sample_sweep()
    points = [replace(pt, reason=f"{STYLE}{IFRAME}") if pt.reason else pt for pt in s.points]
    return sweep_html(replace(s, model=NAME, device_name=SVG, points=points, notes=[*s.notes, *PAYLOADS, LONG]))


def _hostile_compare() -> str:
    c = sample_comparison()
    runs = [replace(r, name=f"{SCRIPT}{i}", source=JS_URL, device_name=IMG) for i, r in enumerate(c.runs)]
    ops = [replace(o, op=f"aten::{SVG}{i}") for i, o in enumerate(c.ops)]
    return comparison_html(replace(c, runs=runs, ops=ops, differences=[STYLE, IFRAME],
                                   notes=[*c.notes, *PAYLOADS, LONG]))


def _tta() -> TtaResult:
    """The hand-written DAWNBench entries' first table (one table: its figures take a second to draw)."""
    result = analyse([str(FIXTURES / "dawnbench")])
    return replace(result, tables=result.tables[:1])


def _hostile_tta() -> str:
    r = _tta()
    tables = [replace(t, notes=[*t.notes, *PAYLOADS],
                      systems=[replace(s, label=f"{SCRIPT}{j}", system=IMG, notes=[STYLE])
                               for j, s in enumerate(t.systems)]) for t in r.tables]
    return tta_html(replace(r, tables=tables, problems=[TtaProblem(JS_URL, SVG), TtaProblem(IFRAME, LONG)]))


#: kind -> (clean page, hostile page), each a function returning the page's text.
KINDS = {"run": (lambda: rendered("cuda"), _hostile_run), "sweep": (lambda: rendered("sweep"), _hostile_sweep),
         "compare": (lambda: rendered("compare"), _hostile_compare),
         "tta": (lambda: tta_html(_tta()), _hostile_tta)}


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("hostile")
    out = {}
    for kind, (clean, hostile) in KINDS.items():
        paths = folder / f"{kind}-clean.html", folder / f"{kind}-hostile.html"
        paths[0].write_text(clean(), encoding="utf-8")
        paths[1].write_text(hostile(), encoding="utf-8")
        out[kind] = paths
    return out


def _open(context, path: Path):
    """Open a page; record dialogs, requests for anything but itself, and console errors other than CSP's."""
    page = context.new_page()
    url = path.as_uri()
    events = {"dialogs": [], "requests": [], "errors": []}
    page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
    page.on("request", lambda r: events["requests"].append(r.url) if r.url != url else None)
    page.on("pageerror", lambda e: events["errors"].append(str(e)))
    page.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
    page.goto(url, wait_until="load")
    page.wait_for_timeout(50)
    return page, events


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_data_adds_no_element_handler_or_dialog(context, pages, kind):
    clean_path, hostile_path = pages[kind]
    clean, clean_events = _open(context, clean_path)
    hostile, events = _open(context, hostile_path)
    assert clean_events == {"dialogs": [], "requests": [], "errors": []}
    assert events == {"dialogs": [], "requests": [], "errors": []}
    assert hostile.evaluate(_COUNTS, list(TAGS)) == clean.evaluate(_COUNTS, list(TAGS))
    assert hostile.evaluate(_LIVE) == []
    text = hostile.locator("body").inner_text()
    shown = [p for p in PAYLOADS if p in text or p in hostile.title()]
    assert shown, "the payloads are shown as text, not dropped"
    if kind != "tta":  # the 300,000-character note: cut, its length said
        assert "A" * MAX_TEXT_CHARS + "\u2026 [300,000 characters]" in text
        assert "A" * (MAX_TEXT_CHARS + 1) not in text


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_content_security_policy_is_in_force(context, pages, kind):
    page, _ = _open(context, pages[kind][1])
    policy = page.evaluate("() => document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]')"
                           "?.getAttribute('content')")
    assert policy is not None and "default-src 'none'" in policy and "script-src 'none'" in policy
    # The meta tag comes before anything taken from data (the title), so no data can precede the policy.
    assert page.evaluate("() => document.head.firstElementChild.nextElementSibling.httpEquiv") \
        == "Content-Security-Policy"
    probe = page.evaluate(_PROBE_CSP)
    assert probe["ran"] is False
    assert {"script-src-elem", "img-src"} <= set(probe["seen"])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
