"""Time-to-accuracy figures (reports/figures/tta_figures.py), checked against the TtaResult they were given.

`sample_tta` is built here by hand: an MLPerf-like table (two systems of three runs each: one run
dropped from the score, one system without a score, one run without evaluations, one without
samples counts) and a DAWNBench-like inference table (latency per item). test_tta_html.py reuses it.
Assertions read the artists back (bar widths, line data, texts), and the texts as drawn from the SVG's
per-text comments, so they test what is drawn.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace

import matplotlib
import pytest
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from tbd.core.tta_result import AccuracyPoint, EpochThroughput, TtaProblem, TtaResult, TtaRun, TtaSystem, TtaTable
from tbd.reports.figures.canvas import SERIES_COLOURS
from tbd.reports.figures.saving import figure_png, figure_svg
from tbd.reports.figures.tta_figures import plain_text, time_unit, tta_figures

matplotlib.use("Agg")

#: A label matplotlib would read as mathtext, with an unknown command inside the dollars: unescaped, it fails.
LABEL = r"$x$ <&> $\undefinedcmd$"
NULL_REASON = "only 2 of 5 required runs converged: result_summarizer gives no olympic mean"
TARGET = 0.759


def _run(file, used=True, dropped=None, minutes=12.5, accuracy=(), rates=(), samples_reason=None, energy=None,
         status="success") -> TtaRun:
    run_s = minutes * 60 if minutes is not None else None
    blocks = [EpochThroughput(index=4 * i, start_s=60.0 * i, seconds=60.0,
                              samples=None if r is None else r * 60.0, samples_per_s=r) for i, r in enumerate(rates)]
    points = [AccuracyPoint(seconds=s, value=v, epoch=4 * i) for i, (s, v) in enumerate(accuracy)]
    return TtaRun(file=file, used=used, dropped_reason=dropped, status=status, score=minutes,
                  score_reason=None if minutes is not None else "no run_stop", to_converge=None,
                  epochs_to_converge=36.0, samples_to_converge=36 * 1_281_167.0, samples_reason=samples_reason,
                  init_s=42.0, run_s=run_s, eval_s=30.0 if run_s else None, train_s=run_s - 30.0 if run_s else None,
                  energy_j=energy, energy_reason=None if energy is not None else "no MLPerf Power log",
                  throughput=blocks, accuracy=points)


def _system(label, **fields) -> TtaSystem:
    base = dict(label=label, path=f"results/{label}/resnet", submitter="tinycorp", system=label, division="closed",
                availability="available", framework="tinygrad", accelerator="NVIDIA H100", accelerator_count=8,
                host_processors=2, score=None, score_unit="min", score_reason=None, time_to_target_s=None,
                accelerator_time_s=None, energy_j=None, energy_reason="no MLPerf Power log", cost_usd=None,
                cost_per_hour=None, cost_reason="MLPerf states no cost", latency_ms=None, cost_per_item_usd=None,
                accuracy=None, epochs_to_target=None, to_converge=None, converge_unit="epochs",
                global_batch_size=3264, rcp="Pass", rcp_scaling_factor=None, runs_required=5, runs=[],
                ratio_time=None, ratio_accelerator_time=None, ratio_energy=None, ratio_cost=None)
    return TtaSystem(**{**base, **fields})


def mlperf_table() -> TtaTable:
    """ResNet: system A (the reference) 12.5 min on 8 GPUs with energy, system B without a score."""
    curve = [(150.0, 0.42), (300.0, 0.61), (450.0, 0.70), (600.0, 0.74), (750.0, 0.762)]
    a_runs = [_run("result_0.txt", accuracy=curve, rates=(25_000.0, 26_000.0, 26_500.0), energy=1.52e9),
              _run("result_1.txt", minutes=12.0, accuracy=[(p[0] * 0.96, p[1]) for p in curve],
                   rates=(25_500.0, 26_400.0, 26_600.0), energy=1.49e9),
              _run("result_2.txt", used=False, dropped="fastest run (olympic mean)", minutes=11.0,
                   accuracy=[(p[0] * 0.88, p[1]) for p in curve], rates=(27_000.0, None, 27_900.0), energy=1.40e9)]
    b_runs = [_run("result_0.txt", minutes=20.0, accuracy=[(400.0, 0.55), (1200.0, 0.760)], rates=(None, None),
                   samples_reason="no samples_count in the log"),
              _run("result_1.txt", used=False, dropped="did not converge: run_stop status aborted", minutes=None,
                   status="aborted", accuracy=[(400.0, 0.50), (800.0, 0.58)]),
              _run("result_2.txt", minutes=21.0)]
    a = _system(LABEL, score=12.5, time_to_target_s=750.0, accelerator_time_s=6000.0, energy_j=1.53e9,
                energy_reason=None, to_converge=36.0, runs=a_runs, ratio_time=1.0, ratio_accelerator_time=1.0,
                ratio_energy=1.0)
    b = _system("mlcommons/dgx_b", accelerator="NVIDIA A100", accelerator_count=16, score_reason=NULL_REASON,
                rcp="Missing", runs=b_runs)
    return TtaTable(source="mlperf", benchmark="resnet", ruleset="4.0.0", ruleset_source="path", metric=None,
                    target=TARGET, target_source="MLPerf compliance rules", systems=[a, b])


def dawnbench_table() -> TtaTable:
    """ImageNet inference: latency per item and cost per item of two entries, no evaluations logged."""
    def entry(label, latency, cost, ratio=None):
        run = replace(_run(f"{label}.json", minutes=None, status=None), score=None, score_reason="inference entry",
                      epochs_to_converge=None, samples_to_converge=None, samples_reason="inference entry",
                      init_s=None, run_s=None, eval_s=None, train_s=None)
        return _system(label, path=f"dawnbench/{label}.json", submitter=None, division=None, availability=None,
                       accelerator="1 K80", accelerator_count=None, score=latency, score_unit="ms",
                       latency_ms=latency, cost_per_item_usd=cost, cost_reason=None, accuracy=0.9312,
                       converge_unit=None, global_batch_size=None, rcp=None, runs_required=None, runs=[run],
                       ratio_cost=ratio)
    return TtaTable(source="dawnbench", benchmark="ImageNet inference", ruleset=None, ruleset_source=None,
                    metric="top5Accuracy", target=0.93, target_source="DAWNBench README: 93% top-5",
                    systems=[entry("Stanford DAWN · ResNet 50 · 1 K80", 22.93, 2.4e-6),
                             entry("Intel · ResNet 50 · Xeon", 5.12, 1.2e-6, 0.5)])


def sample_tta() -> TtaResult:
    problems = [TtaProblem("results/broken/result_0.txt", "not an MLPerf log: no :::MLLOG line"),
                TtaProblem("dawnbench/<script>.tsv", 'unreadable TSV: "hours" column missing & more')]
    return TtaResult(sources=["results/", "dawnbench/"], tables=[mlperf_table(), dawnbench_table()],
                     problems=problems, tool={"mlperf-logging": "4.1.68"})


def _bars(ax) -> list[Rectangle]:
    """The bars drawn on `ax` (not the legend's patches, not the frame)."""
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0 and p.get_height() != 0]


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _drawn_texts(fig) -> str:
    """Every text as drawn: the SVG writer puts each one's final text (after mathtext) in a comment."""
    svg = figure_svg(fig)
    return "\n".join(html.unescape(m) for m in re.findall(r"<!-- (.*?) -->", svg, flags=re.DOTALL))


def _runs_lines(ax):
    return [line for line in ax.get_lines() if line.get_label() != "target"]


@pytest.fixture(scope="module")
def figures():
    return tta_figures(sample_tta())


def test_the_sample_is_a_valid_record():
    result = sample_tta()
    assert TtaResult.from_dict(result.to_dict()) == result


def test_stems_per_table_and_only_figures_with_data(figures):
    assert list(figures) == ["tta-resnet-time", "tta-resnet-accuracy", "tta-resnet-throughput",
                             "tta-imagenet-inference-time"]


def test_repeated_benchmark_names_get_distinct_stems():
    result = replace(sample_tta(), tables=[mlperf_table(), replace(mlperf_table(), source="dawnbench")])
    stems = list(tta_figures(result))
    assert stems[:3] == ["tta-resnet-time", "tta-resnet-accuracy", "tta-resnet-throughput"]
    assert stems[3:] == ["tta-resnet-2-time", "tta-resnet-2-accuracy", "tta-resnet-2-throughput"]


def test_time_unit_follows_the_largest_value():
    assert time_unit([750.0, None]) == (60, "min")
    assert time_unit([3 * 3600.0, 60.0]) == (3600, "h")
    assert time_unit([8.2]) == (1, "s")
    assert time_unit([None]) == (1, "s")


def test_time_bars_are_time_to_target_in_minutes(figures):
    fig = figures["tta-resnet-time"]
    time_ax, energy_ax = fig.axes
    bars = _bars(time_ax)
    assert len(bars) == 1  # system B has no score: no bar, never a zero
    assert bars[0].get_width() == pytest.approx(750.0 / 60)
    assert bars[0].get_y() + bars[0].get_height() / 2 == pytest.approx(0)  # the reference's row, on top
    assert time_ax.get_xlabel() == "time to target (min)"
    assert time_ax.get_ylim() == (1.5, -0.5)
    texts = _texts(fig)
    assert "12.5 min (1.00x)" in texts
    slot = next(t for t in texts if t.startswith(" n/a — only 2 of 5"))
    assert slot.endswith("…") and len(slot) < len(NULL_REASON)  # abbreviated beside the axis...
    assert f"mlcommons/dgx_b: time to target n/a — {NULL_REASON}" in _drawn_texts(fig)  # ...whole in the caption


def test_energy_is_a_second_panel_in_megajoules(figures):
    energy_ax = figures["tta-resnet-time"].axes[1]
    assert [b.get_width() for b in _bars(energy_ax)] == [pytest.approx(1530.0)]  # 1.53e9 J
    assert energy_ax.get_xlabel() == "energy to target (MJ)"
    assert " n/a — no MLPerf Power log" in _texts(figures["tta-resnet-time"])


def test_no_energy_panel_when_no_system_has_energy():
    table = mlperf_table()
    table = replace(table, systems=[replace(s, energy_j=None) for s in table.systems])
    result = replace(sample_tta(), tables=[table])
    assert len(tta_figures(result)["tta-resnet-time"].axes) == 1


def test_inference_draws_latency_and_cost_per_item(figures):
    fig = figures["tta-imagenet-inference-time"]
    latency_ax, cost_ax = fig.axes
    assert [b.get_width() for b in _bars(latency_ax)] == [pytest.approx(22.93), pytest.approx(5.12)]
    assert latency_ax.get_xlabel() == "latency per item (ms)"
    assert [b.get_width() for b in _bars(cost_ax)] == [pytest.approx(2.4e-6), pytest.approx(1.2e-6)]
    assert "Latency per item — ImageNet inference (DAWNBench)" in _drawn_texts(fig)
    assert "22.9 ms" in _texts(fig)


def test_accuracy_has_one_line_per_run_with_evaluations(figures):
    ax = figures["tta-resnet-accuracy"].axes[0]
    lines = _runs_lines(ax)
    with_points = [r for s in mlperf_table().systems for r in s.runs if r.accuracy]
    assert len(lines) == len(with_points) == 5
    first = mlperf_table().systems[0].runs[0]
    assert list(lines[0].get_xdata()) == pytest.approx([p.seconds / 60 for p in first.accuracy])
    assert list(lines[0].get_ydata()) == pytest.approx([p.value for p in first.accuracy])
    assert ax.get_xlabel() == "time since the run started (min)"
    assert ax.get_ylabel().startswith("eval_accuracy")


def test_runs_of_a_system_share_its_colour_and_dropped_runs_are_dashed(figures):
    lines = _runs_lines(figures["tta-resnet-accuracy"].axes[0])
    assert [line.get_color() for line in lines] == [SERIES_COLOURS[0]] * 3 + [SERIES_COLOURS[1]] * 2
    assert [line.get_linestyle() for line in lines] == ["-", "-", "--", "-", "--"]
    assert lines[2].get_alpha() < lines[0].get_alpha()


def test_target_line_is_at_the_target_with_its_value_and_source(figures):
    fig = figures["tta-resnet-accuracy"]
    target = next(line for line in fig.axes[0].get_lines() if line.get_label() == "target")
    assert list(target.get_ydata()) == [TARGET, TARGET]
    assert "target 0.759 (MLPerf compliance rules)" in _texts(fig)


def test_no_target_line_without_a_target():
    result = replace(sample_tta(), tables=[replace(mlperf_table(), target=None)])
    ax = tta_figures(result)["tta-resnet-accuracy"].axes[0]
    assert all(line.get_label() != "target" for line in ax.get_lines())
    assert len(_runs_lines(ax)) == 5


def test_throughput_lines_are_the_runs_with_samples_per_second(figures):
    fig = figures["tta-resnet-throughput"]
    ax = fig.axes[0]
    lines = _runs_lines(ax)
    assert len(lines) == 3  # system B's blocks have no samples count; its other runs no blocks
    assert list(lines[0].get_xdata()) == [0, 4, 8]
    assert list(lines[0].get_ydata()) == [25_000.0, 26_000.0, 26_500.0]
    assert ax.get_xlabel().startswith("epoch") and ax.get_ylabel() == "throughput (samples/s)"
    assert "mlcommons/dgx_b, result_0.txt: no samples per second — no samples_count in the log" in _drawn_texts(fig)


def test_every_figure_names_its_benchmark_and_labels_its_axes(figures):
    for stem, fig in figures.items():
        benchmark = "resnet" if "resnet" in stem else "ImageNet inference"
        titles = [ax.get_title(loc="left") for ax in fig.axes] + [fig.get_suptitle()]
        assert any(benchmark in t for t in titles), stem
        for ax in fig.axes:
            assert re.search(r"\(.+\)", ax.get_xlabel()), f"{stem}: x axis without a unit"
        if not stem.endswith("-time"):
            assert fig.axes[0].get_ylabel(), stem


def test_labels_are_drawn_verbatim_never_as_mathtext(figures):
    # Unescaped, the label fails as mathtext: the figures would not render at all.
    bare = matplotlib.figure.Figure()
    bare.add_subplot().set_title(LABEL)
    with pytest.raises(ValueError):
        figure_png(bare)
    assert plain_text(LABEL) == r"\$x\$ <&> \$\undefinedcmd\$"
    for fig in figures.values():
        figure_png(fig)  # draws without error
    time_texts = _drawn_texts(figures["tta-resnet-time"])
    assert f"{LABEL}\n8 × NVIDIA H100" in time_texts and "\\x0a" not in time_texts  # the tick label, two lines
    accuracy = _drawn_texts(figures["tta-resnet-accuracy"])
    assert LABEL in accuracy.splitlines()  # the legend entry, verbatim
    assert "\\$" not in accuracy


def test_a_result_without_tables_says_why():
    figures = tta_figures(replace(sample_tta(), tables=[]))
    assert list(figures) == ["tta"]
    assert "n/a — no benchmark could be read (2 problems)" in _texts(figures["tta"])
