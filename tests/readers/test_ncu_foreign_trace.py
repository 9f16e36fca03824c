"""The ncu commands for a trace tbd did not run (issue 28): a complete command with a placeholder program,
said once, and plainly where the launch skip counts from."""

from __future__ import annotations

import shlex

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace
from tbd.reports.kernels.tables import render_kernel_report

TRACE = real_trace("gpu/pt19_resnet50_v100.json.gz")
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="real GPU traces not fetched (tests/fixtures/README.md)")


@pytest.fixture(scope="module")
def profile():
    return profile_from_trace(TRACE)


def test_each_command_names_a_program_to_run(profile):
    ranked = [r for r in profile.recoverable_kernels or profile.low_util_kernels if r.ncu and r.ncu.get("argv")]
    assert ranked
    for row in ranked:
        argv = row.ncu["argv"]
        # ncu [options] program [arguments]: the placeholder program comes last, after every ncu option.
        assert argv[-2:] == ["python", "train.py"]
        assert shlex.split(row.ncu["command"]) == argv
        assert row.ncu["target_placeholder"] == "python train.py"
        assert row.ncu["nvtx_range"] is None
        assert "ncu counts from the program's start" in row.ncu["skip_counts_from"]


def test_the_placeholder_and_the_skip_are_said_once(profile):
    text = render_kernel_report(profile, width=120, top=3)
    assert text.count("stands for the program that recorded the trace") == 1
    assert text.count("ncu counts from the program's start") == 1
    commands = text[text.index("Measure with Nsight Compute"):]
    assert commands.count("python train.py") == 1 + 3  # the caption, then each of the 3 commands
