"""Figures of hostile records (issue 29): any name draws as plain text, any size draws in bounded time, and a figure
that cannot be drawn leaves the others and a note.

What matplotlib shows of a text is checked by its own documented rule, written out here (`_shown`): a text with an
even, non-zero count of unescaped `$` is mathtext; otherwise every `\\$` is drawn as `$`. The records are the
hand-built ones of test_figures.py, test_reports.py and test_tta_figures.py with their names replaced.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Text
from test_figures import _point, sample_comparison, sample_sweep
from test_reports import cuda_profile
from test_tta_figures import mlperf_table, sample_tta

from tbd.reports.figures import saving
from tbd.reports.figures.canvas import LABEL_CHARS, MAX_HEIGHT_IN, MAX_WIDTH_IN, TEXT_CHARS, new_figure, plain_text
from tbd.reports.figures.figure_set import draw_one
from tbd.reports.figures.tta_figures import MAX_SYSTEMS, table_slugs, tta_figures

#: Every way a name could be read as mathtext or markup: a formula, an unknown command, lone `$` and `\`.
HOSTILE = r"$x$ \undefinedcmd $\undefinedcmd$ a$b c\d e\$f <script>alert(1)</script>"
#: Seconds a hostile figure set may take here (2 shared cores, the suite running beside): "a few seconds" with room.
BUDGET_S = 20.0


def _shown(text: str) -> str:
    """What matplotlib draws of `text` (matplotlib.text.Text._preprocess_math), failing on mathtext."""
    dollars = text.count("$") - text.count(r"\$")
    assert not (dollars > 0 and dollars % 2 == 0), f"read as mathtext: {text!r}"
    return text.replace(r"\$", "$")


def _drawn(fig: Figure) -> list[str]:
    """Every text of `fig` as drawn (after a draw, so tick labels are written)."""
    fig.draw_without_rendering()
    return [_shown(t.get_text()) for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("name", [r"$x$", r"\undefinedcmd", "$", "\\", r"a\$b", "<script>", HOSTILE])
def test_plain_text_draws_the_name_as_it_is(name):
    assert _shown(plain_text(name)) == name


def test_plain_text_cuts_long_lines_and_many_lines():
    assert len(plain_text("k" * 300_000)) <= TEXT_CHARS
    assert plain_text("k" * 300_000).startswith("k" * 100)
    assert plain_text("\n".join("x" * 100)).count("\n") == 15  # 16 lines, the last counting the rest
    assert "more lines" in plain_text("\n".join("x" * 100))


def _hostile_records(name: str):
    p, s, c, t = cuda_profile(), sample_sweep(), sample_comparison(), sample_tta()
    table = mlperf_table()
    return {
        "run": (saving.run_figures, replace(
            p, spec={**p.spec, "model": name, "device": name},
            kernels=[replace(r, name=name + r.name, util_note=name) for r in p.kernels],
            low_util_kernels=[replace(r, name=name + r.name) for r in p.low_util_kernels])),
        "sweep": (saving.sweep_figures, replace(s, model=name, device_name=name, points=[
            replace(q, reason=name, throughput_unit=name) for q in s.points])),
        "comparison": (saving.comparison_figures, replace(
            c, runs=[replace(r, label=name[:20] + r.label, name=name) for r in c.runs],
            ops=[replace(o, op=name + o.op) for o in c.ops],
            metrics=[replace(m, label=name, reasons=[name] * len(m.values)) for m in c.metrics])),
        "tta": (tta_figures, replace(t, tables=[replace(table, benchmark=name, metric=name, target_source=name,
                                                       systems=[replace(x, label=name + x.label, score_reason=name)
                                                                for x in table.systems])])),
    }


@pytest.mark.parametrize("kind", ["run", "sweep", "comparison", "tta"])
def test_hostile_names_draw_as_plain_text_in_every_figure(kind):
    figures_of, record = _hostile_records(HOSTILE)[kind]
    start = time.perf_counter()
    figures = figures_of(record)
    assert figures and figures.notes == {}  # every figure drawn, none replaced
    drawn = [text for fig in figures.values() for text in _drawn(fig)]
    assert time.perf_counter() - start < BUDGET_S
    # The name is shown whole, as given, wherever a figure names it in full (titles, captions, legends).
    assert any(HOSTILE in text for text in drawn)


@pytest.mark.parametrize("kind", ["run", "sweep", "comparison", "tta"])
def test_a_300k_character_name_draws_bounded_and_fast(kind, tmp_path):
    figures_of, record = _hostile_records("k" * 300_000)[kind]
    start = time.perf_counter()
    figures = figures_of(record)
    written = saving.save_figures(figures, tmp_path)
    assert time.perf_counter() - start < BUDGET_S
    assert len(written) == 2 * len(figures) and all(p.stat().st_size > 0 for p in written)
    assert all(len(p.name) < 100 for p in written)  # a table's slug is cut: a file name has 255 bytes
    for fig in figures.values():
        width, height = fig.get_size_inches()
        assert width <= MAX_WIDTH_IN and height <= MAX_HEIGHT_IN
        assert all(len(line) <= TEXT_CHARS for text in _drawn(fig) for line in text.split("\n"))


def test_100k_kernel_groups_draw_the_longest_and_count_the_rest():
    p = cuda_profile()
    row = p.kernels[0]
    kernels = [replace(row, name=f"k{i}", time_s=1e-6 * (i + 1), util_pct=1.0 + i % 97, util_note=None)
               for i in range(100_000)]
    start = time.perf_counter()
    figures = saving.run_figures(replace(p, kernels=kernels, low_util_kernels=[]))
    assert time.perf_counter() - start < BUDGET_S
    ax = figures["kernel_utilization"].axes[0]
    times = sorted(x for c in ax.collections if isinstance(c, PathCollection) for x, _ in c.get_offsets())
    assert len(times) == 2000
    assert times[0] == pytest.approx(1e-6 * (100_000 - 2000 + 1))  # the 2,000 longest: k98000 .. k99999
    assert any("98,000 more kernel groups (the shortest) not shown (of 100,000)" in t for t in _drawn(ax.figure))


def test_a_million_iterations_are_drawn_thinned_and_say_so():
    p = cuda_profile()
    times = [0.01 + 1e-4 * (i % 7) for i in range(1_000_000)]
    figures = saving.run_figures(replace(p, iterations=replace(p.iterations, times_s=times)))
    line = figures["iteration_time"].axes[0].get_lines()[0]
    assert len(line.get_xdata()) == 5000 and list(line.get_xdata()[:2]) == [0, 200]
    assert any("every 200th of 1,000,000 iterations drawn" in t for t in _drawn(figures["iteration_time"]))


def test_many_sweep_points_comparison_runs_and_tta_systems_are_capped():
    s = sample_sweep()
    sweep = replace(s, points=[_point(b, 100.0 + b, 50.0, 10.0, 5.0, b * 1000) for b in range(1, 501)],
                    largest_fitting_batch=500, smallest_failing_batch=None)
    start = time.perf_counter()
    figures = saving.sweep_figures(sweep)
    assert time.perf_counter() - start < BUDGET_S
    line = figures["sweep_throughput"].axes[0].get_lines()[0]
    assert list(line.get_xdata()) == list(range(1, 65))
    assert any("436 more points not shown (batch 65 to 500" in t for t in _drawn(figures["sweep_throughput"]))

    c = sample_comparison()
    runs = 20
    many = replace(c, runs=[replace(c.runs[i % 2], label=f"R{i}") for i in range(runs)],
                   metrics=[replace(m, values=[m.values[i % 2] for i in range(runs)],
                                    ratios=[m.ratios[i % 2] for i in range(runs)], reasons=[None] * runs)
                            for m in c.metrics],
                   ops=[replace(o, time_per_iteration_s=[0.01] * runs, util_pct=[1.0] * runs, delta_s=[0.0] * runs,
                                gap_share_pct=[0.0] * runs) for o in c.ops], gaps=[])
    figures = saving.comparison_figures(many)
    assert len(figures["compare_memory"].axes[0].get_xticks()) == 8
    assert any("12 more runs (the last given) not shown (of 20)" in t for t in _drawn(figures["compare_metrics"]))

    table = mlperf_table()
    systems = [replace(table.systems[0], label=f"s{i}") for i in range(MAX_SYSTEMS + 10)]
    result = replace(sample_tta(), tables=[replace(table, systems=systems)])
    figures = tta_figures(result)
    assert len(figures["tta-resnet-time"].axes[0].get_yticks()) == MAX_SYSTEMS
    assert any("10 more systems" in t for t in _drawn(figures["tta-resnet-time"]))


def test_a_long_benchmark_name_gives_a_short_slug():
    table = replace(mlperf_table(), benchmark="k" * 300_000)
    assert table_slugs(replace(sample_tta(), tables=[table])) == ["k" * 60]


def test_a_figure_that_raises_leaves_the_others_and_a_note(monkeypatch, tmp_path):
    def broken(profile):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(saving, "memory_figure", broken)
    figures = saving.run_figures(cuda_profile())
    assert list(figures) == ["iteration_time", "memory", "kernel_utilization"]
    assert figures.notes == {"memory": "could not be drawn: RuntimeError: boom"}
    assert any("figure not drawn — could not be drawn: RuntimeError: boom" in t for t in _drawn(figures["memory"]))
    assert len(saving.save_figures(figures, tmp_path)) == 6


def test_a_figure_that_fails_to_save_is_written_as_its_note(monkeypatch, tmp_path):
    figures = saving.comparison_figures(sample_comparison())
    bad = figures["compare_ops"]
    real_png = saving.figure_png

    def png(fig):
        if fig is bad:
            raise MemoryError("cannot allocate the canvas")
        return real_png(fig)

    monkeypatch.setattr(saving, "figure_png", png)
    written = saving.save_figures(figures, tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{s}.{x}" for s in figures for x in ("svg", "png"))
    assert figures.notes == {"compare_ops": "could not be saved: MemoryError: cannot allocate the canvas"}


def test_a_collapsed_layout_falls_back_to_fixed_margins():
    def crowded():
        fig = new_figure(3.0, 2.0)
        ax = fig.add_subplot()
        ax.set_yticks([0, 1], ["y" * LABEL_CHARS, "z" * LABEL_CHARS], fontsize=30)
        return fig

    fig, note = draw_one("crowded", crowded)
    assert note == "laid out with fixed margins: its labels left the plot no room"
    assert fig.get_layout_engine() is None or fig.get_layout_engine().__class__.__name__ == "PlaceHolderLayoutEngine"
