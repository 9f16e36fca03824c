"""The run figures of two real runs, against the files they came from (issue 28: warm-up drawn as the stable
phase's start, FLOP % of a few percent on a 0-100 axis, an empty "n/a" memory PNG for a trace without memory,
PNGs at 110 dpi).

The H100 ResNet-50 run (tests/fixtures/h100, re-analysed) has a trace and no memory records; the committed CPU
run (tests/fixtures/runs) has its profile.json. Expected values are read from the raw files with json, not from
tbd's records.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from PIL import Image
from test_html import Page
from testpaths import FIXTURES

from tbd.cli.run_analysis import profile_from_run_dir
from tbd.core.profile_result import Profile
from tbd.reports.figures import saving
from tbd.reports.figures.canvas import PNG_DPI
from tbd.reports.figures.run_figures import figure_gaps
from tbd.reports.html.run_page import profile_html

H100_RUN = FIXTURES / "h100" / "resnet50-b64"
CPU_RUN = FIXTURES / "runs" / "resnet50-test-cpu-b8-threads1"
KiB = 1024


@pytest.fixture(scope="module")
def h100():
    if not (H100_RUN / "trace.pt.trace.json.gz").exists():
        pytest.skip(f"no {H100_RUN}")
    return profile_from_run_dir(H100_RUN)


@pytest.fixture(scope="module")
def cpu_raw() -> dict:
    return json.loads((CPU_RUN / "profile.json").read_text())


@pytest.fixture(scope="module")
def cpu(cpu_raw):
    return Profile.from_dict(cpu_raw)


def test_a_trace_without_memory_gets_no_memory_figure_and_the_page_says_why(h100, tmp_path):
    assert list(figure_gaps(h100)) == ["memory"]
    assert list(saving.run_figures(h100)) == ["iteration_time", "kernel_utilization"]
    written = saving.save_figures(saving.run_figures(h100), tmp_path)
    assert not any(p.stem == "memory" for p in written) and len(written) == 4
    page = Page(profile_html(h100))
    assert page.figure_children == ["svg", "svg"]
    assert ("memory: no figure — no byte count was recorded (weights, gradients, feature maps: n/a — no memory "
            "records: the trace alone does not say which tensors are which") in page.text


def test_the_warm_up_run_is_shaded_and_the_stable_start_marked(h100):
    log = json.loads((H100_RUN / "iterations.json").read_text())
    run, stable_from = log["warmup_run"], log["warmup"]  # 20 run, stable from iteration 1
    run_s = math.fsum(log["times_ns"][:run]) / 1e9
    ax = saving.iteration_time_figure(h100).axes[0]
    warm = next(p for p in ax.patches if p.get_label().startswith("warm-up"))
    assert (warm.get_x(), warm.get_x() + warm.get_width()) == (-0.5, run - 0.5)
    assert warm.get_label() == f"warm-up: {run} iterations run in {run_s:.2f} s" == \
        "warm-up: 20 iterations run in 2.01 s"
    stable = next(line for line in ax.lines if line.get_label().startswith("stable"))
    assert stable.get_label() == f"stable from iteration {stable_from} (detected)"
    assert list(stable.get_xdata()) == [stable_from - 0.5] * 2


def test_flop_axis_is_scaled_to_the_data(cpu_raw, cpu, h100):
    for raw, profile in ((cpu_raw, cpu), (None, h100)):
        kernels = raw["kernels"] if raw else [{"util_pct": k.util_pct, "time_s": k.time_s} for k in profile.kernels]
        flop = raw["metrics"]["flop_util_pct"] if raw else {"value": profile.metrics.flop_util_pct.value,
                                                            "kernel_average_pct":
                                                                profile.metrics.flop_util_pct.kernel_average_pct}
        highest = max([k["util_pct"] for k in kernels if k["util_pct"] is not None and k["time_s"] > 0]
                      + [v for v in (flop["value"], flop.get("kernel_average_pct")) if v is not None])
        ax = saving.kernel_utilization_figure(profile).axes[0]
        assert ax.get_ylim() == pytest.approx((0, highest * 1.15))
    # The CPU run's ops reach 11.2 %: an axis to about 12.9, not to 100.
    assert saving.kernel_utilization_figure(cpu).axes[0].get_ylim()[1] == pytest.approx(11.2125 * 1.15, rel=1e-4)


def test_memory_stack_is_the_split_at_the_allocator_peak(cpu_raw, cpu):
    mem = cpu_raw["metrics"]["memory_bytes"]
    assert sum(mem["at_peak"].values()) == mem["allocator_peak"] == 2_624_320  # the split adds up to the peak
    fig = saving.memory_figure(cpu)
    own, split = fig.axes[:2]
    assert own.get_ylabel() == "bytes (MiB)"
    stacked = [p for p in split.patches if p.get_height() > 0]
    top = max(p.get_y() + p.get_height() for p in stacked)
    assert top == pytest.approx(mem["allocator_peak"] / (1 << 20))
    assert [p.get_height() for p in stacked] == pytest.approx(
        [mem["at_peak"][c] / (1 << 20) for c in ("weights", "gradients", "feature_maps", "workspace", "dynamic")])
    # The own peaks stand apart, side by side (they are each at their own moment and add up to more).
    own_heights = [b.patches[0].get_height() for b in own.containers]
    assert sum(own_heights) > top and own_heights[0] == pytest.approx(mem["weights"] / (1 << 20))


def test_saved_pngs_are_200_dpi(cpu, tmp_path):
    written = saving.save_figures(saving.run_figures(cpu), tmp_path)
    for path in (p for p in written if p.suffix == ".png"):
        image = Image.open(io.BytesIO(path.read_bytes()))
        assert image.info["dpi"] == pytest.approx((PNG_DPI, PNG_DPI), abs=0.01) and PNG_DPI == 200
        assert image.width == pytest.approx(9.0 * 200, abs=2) or image.width == pytest.approx(9.5 * 200, abs=2)
