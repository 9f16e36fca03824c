"""HTML pages (reports/html*.py): parsed with the stdlib's html.parser and checked for values, escaping and
self-containment. The records are test_reports.py's Profiles and test_figures.py's Sweep and
Comparison; tests/browser opens the same pages in a real browser.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from test_figures import OOM_REASON, cpu_sweep, sample_comparison, sample_sweep
from test_reports import cpu_profile, cuda_profile, partial_profile

from tbd.core.profile_result import OpGroupRow, Profile
from tbd.reports.html import run_page
from tbd.reports.html.page import CSP, MAX_LIST_ITEMS, MAX_TABLE_ROWS, MAX_TEXT_CHARS, esc, notes_list, table
from tbd.reports.html.run_page import comparison_html, profile_html, sweep_html

#: A CUDA kernel name as Kineto writes it: template arguments in angle brackets.
KERNEL_WITH_BRACKETS = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<"
                        "at::native::AddFunctor<float> >(at::TensorIteratorBase&, at::native::AddFunctor<float> "
                        "const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<...>)")
HOSTILE = 'x</td><script>alert("x")</script><img src="https://example.com/a.png">&amp;'
#: Elements that would fetch something or run code from elsewhere.
FETCHING = ("img", "link", "iframe", "object", "embed", "audio", "video", "source")
SVG_VOID = ("path", "use", "rect", "circle", "stop")


class Page(HTMLParser):
    """What the tests read from a page: its text, every element's attributes, its tables and figures."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[list[list[str]]] = []
        self.cell_titles: dict[str, str | None] = {}
        self.text_parts: list[str] = []
        self.title = ""
        self.figure_children: list[str] = []
        self._cell: list[str] | None = None
        self._cell_title: str | None = None
        self._in_title = False
        self._after_figure = False
        self._svg_depth = 0
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if self._after_figure:
            self.figure_children.append(tag)
            self._after_figure = False
        self._after_figure = tag == "figure"
        if tag == "svg":
            self._svg_depth += 1
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell, self._cell_title = [], dict(attrs).get("title")
        self._in_title = tag == "title" or self._in_title

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            self.tables[-1][-1].append(text)
            self.cell_titles[text] = self._cell_title
            self._cell = None
        elif tag == "svg":
            self._svg_depth -= 1
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title and self._svg_depth == 0:
            self.title += data
        if self._cell is not None:
            self._cell.append(data)
        if self._svg_depth == 0:
            self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.text_parts).split())

    def row(self, first_cell: str) -> list[str]:
        """The first table row whose first cell is `first_cell`."""
        return next(r for t in self.tables for r in t if r and r[0] == first_cell)

    def column(self, table: list[list[str]], head: str) -> list[str]:
        i = table[0].index(head)
        return [r[i] for r in table[1:]]


def _with_op_groups(profile: Profile) -> Profile:
    groups = [OpGroupRow("aten::_cudnn_rnn", 1440, 0.054, 18.0, 1.2e12, 2.1),
              OpGroupRow("aten::addmm", 360, 0.096, 32.0, 3.9e12, 61.2),
              OpGroupRow("(no launching op)", 540, 0.009, 3.0, None, None)]
    return replace(profile, op_groups=groups)


@functools.cache
def rendered(name: str) -> str:
    """Each page rendered once per test session (a page with its figures takes about 0.5 s)."""
    render = {"cuda": lambda: profile_html(_with_op_groups(cuda_profile())), "cpu": lambda: profile_html(cpu_profile()),
              "partial": lambda: profile_html(partial_profile()), "sweep": lambda: sweep_html(sample_sweep()),
              "cpu_sweep": lambda: sweep_html(cpu_sweep()),
              "compare": lambda: comparison_html(sample_comparison())}
    return render[name]()


@pytest.fixture(scope="module")
def cuda_page() -> Page:
    return Page(rendered("cuda"))


@pytest.fixture(scope="module")
def cpu_page() -> Page:
    return Page(rendered("cpu"))


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {name: rendered(name) for name in ("cuda", "partial", "sweep", "compare")}


# -- every page ----------------------------------------------------------------------------------------


def test_pages_are_whole_documents_with_charset_and_title(pages):
    for name, text in pages.items():
        page = Page(text)
        assert text.startswith("<!DOCTYPE html>"), name
        assert ("meta", {"charset": "utf-8"}) in page.elements, name
        assert page.title.startswith("tbd"), name
    assert Page(pages["cuda"]).title == "tbd · seq2seq (pytorch), batch 128, cuda:0"


def test_pages_are_self_contained(pages):
    for name, text in pages.items():
        page = Page(text)
        for tag, attrs in page.elements:
            assert tag not in FETCHING, f"{name}: <{tag}> fetches"
            assert tag != "script" or "src" not in attrs, f"{name}: a script from elsewhere"
            for key in ("src", "href", "xlink:href", "action", "data", "poster"):
                value = (attrs.get(key) or "").strip().lower()
                assert not value.startswith(("http:", "https:", "//", "file:")), f"{name}: {tag} {key}={value}"
        assert "@import" not in text and "url(http" not in text, name


def test_every_figure_is_an_inline_svg_with_ids_of_its_own(pages):
    expected = {"cuda": 3, "partial": 2, "sweep": 3, "compare": 3}  # the partial run has no kernel to draw
    for name, text in pages.items():
        page = Page(text)
        assert page.figure_children == ["svg"] * expected[name], name
        ids = [attrs["id"] for _, attrs in page.elements if "id" in attrs]
        assert len(ids) == len(set(ids)), f"{name}: duplicate ids"
        assert "<?xml" not in text and "<!DOCTYPE svg" not in text, name


def test_record_text_is_escaped_everywhere():
    profile = cuda_profile()
    kernels = [replace(profile.kernels[0], name=KERNEL_WITH_BRACKETS), *profile.kernels[1:]]
    profile = replace(profile, kernels=kernels, notes=[HOSTILE], spec={**profile.spec, "model": HOSTILE})
    text = profile_html(profile, title="my run")
    page = Page(text)
    assert "elementwise_kernel<128" not in text  # never raw markup
    assert "elementwise_kernel&lt;128, 4," in text
    assert KERNEL_WITH_BRACKETS in page.text  # ...yet the full name reads as text
    assert HOSTILE in page.text
    assert not any(tag in ("script", "img") for tag, _ in page.elements)
    assert page.title == "my run"


def test_every_page_carries_the_content_security_policy_before_any_data(pages):
    for name, text in pages.items():
        elements = Page(text).elements
        # html, head, meta charset, then the policy: before the title, the first text taken from a record.
        assert elements[3] == ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}), name
    for directive in ("default-src 'none'", "script-src 'none'", "style-src 'unsafe-inline'", "base-uri 'none'",
                      "form-action 'none'"):
        assert directive in CSP.split("; ")


def test_a_long_text_is_cut_with_its_length_said():
    note = "<" * 300_000
    page = Page(notes_list([note]))
    shown = page.text
    assert shown == "<" * MAX_TEXT_CHARS + "\u2026 [300,000 characters]"
    assert len(esc(note)) == MAX_TEXT_CHARS * len("&lt;") + len("\u2026 [300,000 characters]")


def test_a_long_list_and_a_long_table_say_how_many_more():
    page = Page(notes_list([f"note {i}" for i in range(MAX_LIST_ITEMS + 101)]))
    assert page.text.endswith(f"note {MAX_LIST_ITEMS - 1} \u2026 and 101 more lines not shown "
                              "(the JSON and CSV output hold every one)")
    assert f"note {MAX_LIST_ITEMS}" not in page.text.split()
    page = Page(table(["n"], [[str(i)] for i in range(MAX_TABLE_ROWS + 100)], caption="the caption"))
    assert page.tables[0][1:] == [[str(i)] for i in range(MAX_TABLE_ROWS)]
    assert "\u2026 and 100 more rows not shown" in page.text and page.text.endswith("the caption")


def test_a_huge_profile_renders_a_small_page(monkeypatch):
    """300,000-character model name and 200,000 notes (120 MB): the page holds MAX_LIST_ITEMS notes of at most
    MAX_TEXT_CHARS each. (Figures are left out here: their own caps are tests/unit/test_figures*.py's.)"""
    monkeypatch.setattr(run_page, "run_figures", lambda profile: {})
    profile = cuda_profile()
    notes = [f"note {i} " + "x" * 600 for i in range(200_000)]
    text = profile_html(replace(profile, spec={**profile.spec, "model": "m" * 300_000}, notes=notes))
    page = Page(text)
    assert len(text) < 400_000  # 200 notes of 610 characters, the rest of the page 25 kB: the caps' bound
    # The title cut (by run_title, or by the page at MAX_TEXT_CHARS), its full length said.
    assert page.title.startswith("tbd · " + "m" * 1000) and page.title.endswith(" characters]")
    assert len(page.title) <= MAX_TEXT_CHARS + len("\u2026 [300,035 characters]")
    assert "\u2026 and 199,800 more lines not shown" in page.text


# -- the run's page ------------------------------------------------------------------------------------


def test_metrics_show_formatted_values(cuda_page):
    # The terminal's figures in the terminal's words (test_run_page_matches_terminal.py checks every row).
    assert cuda_page.row("Throughput")[1:] == ["1,843.2 sentences/s", "also 46,080.0 tokens/s"]
    assert cuda_page.row("GPU busy")[1] == "87.3 %"
    assert cuda_page.row("NVML utilization.gpu")[1] == "94.0 %"
    assert cuda_page.row("FLOP utilization")[1:] == [
        "21.4 %", "analytic: 4.2 TFLOP in 291.00 ms busy: the seconds at peak below over the busy time"]
    # 4.166e12 FLOP / 66.9e12 FLOP/s = 62.27 ms at peak; / 291 ms busy = 21.4 %
    assert cuda_page.row("· fp32")[2] == "100.0 % of the FLOPs, at 66.9 TFLOP/s -> 62.27 ms at peak"
    assert cuda_page.row("FP32 peak FLOP/s")[1:] == ["66.9 TFLOP/s", "hardware model; GEMM ceiling 51.3 TFLOP/s"]
    assert cuda_page.row("Peak FLOP/s, other precisions")[2] == "tf32 535 TFLOP/s, fp16 1.07 PFLOP/s"
    assert cuda_page.row("CPU utilization")[1] == "6.2 %"
    assert cuda_page.row("Memory bandwidth")[1] == "3.05 TiB/s"  # 3.35e12 B/s / 2**40: bytes are binary everywhere


def test_null_figures_show_their_reason(cpu_page):
    assert cpu_page.row("GPU busy")[1:] == ["n/a", "n/a — no CUDA device"]
    assert cpu_page.row("NVML utilization.gpu")[2] == "n/a — no CUDA device (NVML: driver not loaded)"
    assert cpu_page.row("workspace")[1] == "n/a"
    assert "workspace: n/a — no op-scoped allocator events in the trace" in cpu_page.text
    assert "at allocator peak: 96.4 MiB allocated before the trace window is not attributed" in cpu_page.text
    assert "PyTorch cross-check: n/a — torch's memory profiler raised KeyError('Input Dims')" in cpu_page.text


def test_memory_in_human_units_with_exact_bytes(cuda_page):
    row = cuda_page.row("feature maps")
    assert row[1:] == ["3.00 GiB", "3,221,225,472", "2.75 GiB", "2,952,790,016"]
    assert cuda_page.cell_titles["3.00 GiB"] == "3,221,225,472 bytes"
    assert cuda_page.row("allocator peak")[1:3] == ["3.82 GiB", "4,100,000,000"]
    assert cuda_page.row("unattributed")[1] == "—"


def test_kernel_table_and_rankings(cuda_page):
    kernels = next(t for t in cuda_page.tables if t[0][:2] == ["#", "Kernel"])
    assert cuda_page.column(kernels, "Calls")[:2] == ["360", "1,440"]
    assert cuda_page.column(kernels, "Time")[0] == "96.0 ms"
    assert cuda_page.column(kernels, "Util %")[3] == "130 ⚠"  # the above-peak TF32 GEMM, flagged
    assert cuda_page.column(kernels, "Util %")[5] == "n/a — no FLOP formula for aten::index_select"
    assert "Compute-bound kernels below the average FLOP utilization (25.6 %)" in cuda_page.text
    assert "Memory-bound kernels below the average bandwidth utilization (43.2 %)" in cuda_page.text
    ranked = [t for t in cuda_page.tables if t[0][:2] == ["Kernel", "Calls"]]
    assert len(ranked) == 2
    assert any("elemWiseRNNcell" in r[0] for r in ranked[0][1:])
    assert any("SoftMaxForward" in r[0] for r in ranked[1][1:])


def test_op_groups_and_notes(cuda_page):
    assert cuda_page.row("aten::_cudnn_rnn")[1:] == ["1,440", "54.0 ms", "18.0", "1.20 TFLOP", "2.10"]
    assert cuda_page.row("(no launching op)")[4:] == ["n/a", "n/a"]
    assert "2,412 memcpy/memset events excluded from kernels and busy time" in cuda_page.text


def test_partial_run_has_a_banner_with_the_reason_and_not_stable():
    page = Page(rendered("partial"))
    banners = [attrs for tag, attrs in page.elements if tag == "div" and "banner" in (attrs.get("class") or "")]
    assert len(banners) == 2
    assert ("PARTIAL RUN: out of memory in trace iteration 1 (CUDA out of memory: tried to allocate 2.00 GiB). "
            "Figures cover only what was gathered before it stopped.") in page.text
    assert "NOT STABLE" in page.text
    assert "PARTIAL" not in Page(rendered("cuda")).text


# -- the sweep's page ----------------------------------------------------------------------------------


def test_sweep_summary_table():
    page = Page(rendered("sweep"))
    summary = page.tables[0]
    assert summary[0][:5] == ["Batch", "Status", "Throughput (images/s)", "±95 % interval", "Iteration (median)"]
    assert page.column(summary, "Batch") == ["16", "32", "64", "128", "256", "512"]
    assert page.column(summary, "Status") == ["ok", "ok", "ok", "ok", "partial", "OOM"]
    assert page.column(summary, "Throughput (images/s)")[:5] == ["1,210", "1,820", "2,205", "2,390", "2,410"]
    assert page.row("512")[2:] == ["n/a"] * (len(summary[0]) - 2)  # no figure drawn as zero
    assert page.column(summary, "feature maps")[0] == "1.53 GiB"
    assert f"batch 512: OOM — {OOM_REASON}" in page.text
    assert "batch 256: partial — interrupted (SIGINT)" in page.text
    assert "Largest batch that ran 256" in page.text


def test_sweep_null_series_says_why():
    page = Page(rendered("cpu_sweep"))
    assert page.column(page.tables[0], "GPU busy %")[:3] == ["n/a"] * 3
    assert "GPU busy %: n/a at batch 2, 4, 8 — no CUDA device" in page.text
    assert "workspace: n/a at batch 2, 4, 8 — no op-scoped allocator events in the trace" in page.text
    assert "batch 16: failed — workload exited with code 1" in page.text


# -- the comparison's page -----------------------------------------------------------------------------


def test_comparison_runs_metrics_and_gaps():
    page = Page(rendered("compare"))
    runs = page.tables[0]
    assert page.column(runs, "Device name") == ["Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3"]
    assert page.column(runs, "FP32 peak") == ["15.7 TFLOP/s", "67.0 TFLOP/s"]
    assert page.row("Throughput (higher is better)")[1:] == ["1,050 images/s", "2,205 images/s", "2.10x"]
    assert page.row("NVML utilization.gpu (higher is better)")[1:] == ["n/a — NVML not sampled (--no-nvml)",
                                                                        "97.0 %", "n/a"]
    assert ("B has 4.27x A's FP32 peak; this workload ran 2.10x as fast (throughput; no interval); it spends 30.0 ms "
            "less kernel time per iteration, 60.0 % of that in aten::convolution_backward.") in page.text
    assert page.row("aten::convolution_backward")[1:] == ["31.0 ms", "13.0 ms", "55.0", "41.0", "-18.0 ms", "60.0 %"]
    assert page.row("aten::cudnn_convolution_add_relu")[1] == "absent"
    assert "Not only the device differs" not in page.text


def test_comparison_says_what_else_differs():
    comparison = replace(sample_comparison(), differences=["batch: 64 / 128"])
    page = Page(comparison_html(comparison))
    assert "Not only the device differs: batch: 64 / 128" in page.text
