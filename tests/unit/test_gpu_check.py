"""The GPU check (tools/gpu_check.sh) on a machine without a GPU: its syntax, and its results page
(tools/gpu_results.py) written from a real H100 run directory (tests/fixtures/h100/), where tbd's GPU busy and the
page's stdlib recompute of the same trace must agree."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from testpaths import FIXTURES, ROOT, load_tool

from tbd.cli.run_analysis import profile_from_run_dir


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "gpu_check.sh")]).returncode == 0


def test_the_results_page_puts_tbds_busy_beside_its_recompute(tmp_path):
    runs = tmp_path / "runs"
    run = runs / "resnet50-b64"
    shutil.copytree(FIXTURES / "h100" / "resnet50-b64", run)
    profile = profile_from_run_dir(run)
    (run / "profile.json").write_text(json.dumps(profile.to_dict()))
    log = tmp_path / "gpu_check.log"
    log.write_text("== 16:51:05 profile-resnet50 (cap 120s): tbd profile ...\n== profile-resnet50: exit 0 after 29s\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_results.py"), str(runs), str(log), str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = next(out.glob("gpu-check-*-nvidia-h100-80gb-hbm3.md")).read_text()
    assert "| profile-resnet50 | exit 0 | 29 |" in page
    row = next(line for line in page.splitlines() if line.startswith("| resnet50-b64 |"))
    busy = f"{profile.metrics.gpu_busy_pct.value:.1f} %"
    assert row.count(busy) == 2  # tbd's figure and the recompute's, the same to the shown digit (96.6 %)
    again = load_tool("gpu_results").recompute_busy(run)
    # within 0.0001 points: the recompute reads the trace's fractional µs as floats, tbd as exact nanoseconds
    assert abs(again["busy_pct"] - profile.metrics.gpu_busy_pct.value) < 1e-4
    assert "not run" in page  # the steps that did not run say so
