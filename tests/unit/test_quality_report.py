"""The measurement-quality record as the terminal report, the HTML page and the CSV show it."""

import json
from dataclasses import replace
from pathlib import Path

from tbd.core.profile_result import Profile, Quality
from tbd.reports.html.run_page import profile_html
from tbd.reports.profile_export import profile_csv
from tbd.reports.terminal import render_profile

RUN = Path(__file__).resolve().parent.parent / "fixtures" / "runs" / "resnet50-test-cpu-b8-threads1"

QUALITY = Quality(
    reliable=False, warnings=["another load used 0.99 cores of 2 during the timing windows (0.99 python hog.py "
                              "(pid 812))"],
    cores=2, wall_s=30.0, workload_cores=0.95, other_load_cores=0.99, tbd_parent_cores=0.01,
    other_processes=[{"name": "python", "pid": 812, "command": "python hog.py", "cores": 0.99}],
    gemm_ceiling_flops={"before": 62.2e9, "after": 92.8e9}, gemm_spread_pct=33.0, clock_mhz={"start": 2596.0,
                                                                                                  "end": 2596.0},
    throughput_median=1.0, throughput_spread_pct=20.0, throughput_interval_pct=24.8, cpu_util_median_pct=99.0, cpu_util_range_pct=[98.5, 99.9],
    repeats=[{"iterations": 1, "wall_s": 10.0, "throughput": t, "cpu_util_pct": 99.0, "other_load_cores": 0.99}
             for t in (0.9, 1.0, 1.1)])


def _profile() -> Profile:
    p = Profile.from_dict(json.loads((RUN / "profile.json").read_text()))
    tp = replace(p.metrics.throughput, value=1.0, repeats=[0.9, 1.0, 1.1], spread_pct=20.0, interval_pct=24.8)
    return replace(p, quality=QUALITY, metrics=replace(p.metrics, throughput=tp))


def test_terminal_shows_the_machine_line_the_windows_and_the_cpu_split():
    text = render_profile(_profile(), width=120)
    assert ("machine: other load 0.99 of 2 cores · GEMM ceiling 62.2 → 92.8 GFLOP/s · clock 2596 MHz · UNRELIABLE "
            "(notes say why)") in text
    assert "median of 3 timing windows (0.90–1.10, spread 20.0 %, ±24.8 % at 95 %)" in " ".join(text.split())
    assert ("all cores, timing windows (98.5–99.9 % over the 3 windows): this workload 0.95 cores, other processes "
            "0.99") in " ".join(text.split())


def test_html_and_csv_carry_it_too():
    html = profile_html(_profile())
    assert ("other load 0.99 of 2 cores · GEMM ceiling 62.2 → 92.8 GFLOP/s · clock 2596 MHz · UNRELIABLE (notes say "
            "why)") in html.replace("&gt;", ">").replace("&#x27;", "'")
    assert "median of 3 timing windows (0.90–1.10, spread 20.0 %, ±24.8 % at 95 %)" in html
    rows = dict(line.split(",", 1) for line in profile_csv(_profile()).splitlines()[1:])
    assert rows["quality.other_load_cores"].startswith("0.99,cores")
    assert rows["quality.gemm_ceiling_flops.before"].startswith("62200000000.0,FLOP/s")
    assert rows["throughput.spread_pct"].startswith("20.0,%")


def test_a_profile_without_the_record_shows_nothing_of_it():
    p = Profile.from_dict(json.loads((RUN / "profile.json").read_text()))
    assert p.quality is None
    assert "machine:" not in render_profile(p, width=120) and "quality." not in profile_csv(p)
