"""The comparison page in headless chromium: the ratio's interval and an unreliable run's mark are on screen."""

from __future__ import annotations

from dataclasses import replace

from test_figures import sample_comparison

from tbd.reports.html.comparison_page import comparison_html

WHY = "the throughput of the 3 timing windows varied by 93 % of their median"


def _page_with_interval_and_unreliable_run():
    """The sample (A 1,050, B 2,205 images/s) with A unreliable at ±10 % and B at ±5 %: B/A = 2.10x,
    interval 2205 x 0.95 / (1050 x 1.1) = 1.81x to 2205 x 1.05 / (1050 x 0.9) = 2.45x."""
    c = sample_comparison()
    low, high = 2205 * 0.95 / (1050 * 1.1), 2205 * 1.05 / (1050 * 0.9)
    runs = [replace(c.runs[0], name="rn50 V100", reliable=False, quality_warnings=[WHY], throughput_interval_pct=10.0),
            replace(c.runs[1], name="rn50 H100", reliable=True, throughput_interval_pct=5.0)]
    metrics = [replace(m, ratio_low=[0.9 / 1.1, low], ratio_high=[1.1 / 0.9, high]) if m.key == "throughput" else m
               for m in c.metrics]
    gaps = [replace(c.gaps[0], speed_ratio_low=low, speed_ratio_high=high, reliable=False)]
    return replace(c, runs=runs, metrics=metrics, gaps=gaps, notes=[f"A (rn50 V100) is UNRELIABLE: {WHY}"])


def test_comparison_page_shows_the_interval_and_the_unreliable_mark(context, tmp_path):
    path = tmp_path / "compare.html"
    path.write_text(comparison_html(_page_with_interval_and_unreliable_run()), encoding="utf-8")
    page = context.new_page()
    page.goto(path.as_uri(), wait_until="load")
    throughput = page.locator("#metrics tr", has_text="Throughput").inner_text().split("\t")
    assert throughput[1:] == ["1,050 images/s", "2,205 images/s", "2.10x, 1.81x-2.45x"]
    mark = page.locator("#runs td.unreliable")
    assert mark.count() == 1 and mark.inner_text() == "UNRELIABLE" and mark.get_attribute("title") == WHY
    assert mark.evaluate("e => getComputedStyle(e).color") != page.locator("#runs td").first.evaluate(
        "e => getComputedStyle(e).color")  # drawn apart from the plain cells
    assert page.get_by_text(f"A is UNRELIABLE: {WHY}", exact=True).is_visible()  # the banner on top
    sentence = page.locator("#gaps").inner_text()
    assert "ran 2.10x as fast (throughput; 95 % interval 1.81x-2.45x); A is UNRELIABLE" in sentence
    assert page.locator("#runs tr", has_text="rn50 V100").count() == 1
