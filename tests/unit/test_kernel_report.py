"""`tbd kernels` as text: what its goldens (test_reports.py) cannot say on their own.

The ncu commands it prints must run in a shell as they are: read back through `sh`, every one
gives the argv profile.json holds, the shared metric list set once. The tables make room for
names by dropping optional columns, and the device header breaks between phrases.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest
from test_reports import NCU_METRICS, cpu_profile, cuda_profile
from testpaths import real_trace

from tbd.core.profile_result import Profile
from tbd.reports.kernels.export import kernels_json
from tbd.reports.kernels.tables import METRICS_VAR, TABLE_V, render_kernel_detail, render_kernel_report
from tbd.reports.terminal import render_profile

V100_TRACE = real_trace("gpu/pt19_resnet50_v100.json.gz")  # not committed: tests/fixtures/gpu or shared/traces/gpu
#: A stand-in for ncu: prints each argument NUL-terminated, each command ending in \x01.
_ECHO_NCU = 'ncu() { printf "%s\\0" "$@"; printf "\\1"; }\n'


def _ranked(profile: Profile) -> list:
    """The groups `--ranking table-v` gives commands to."""
    return profile.low_util_kernels[:10] + profile.low_bandwidth_kernels[:10]


def _table_v(profile: Profile, **kw) -> str:
    return render_kernel_report(profile, ranking=TABLE_V, **kw)


def _shell_argvs(text: str) -> list[list[str]]:
    """Each ncu command of a rendered report, as `sh` reads the block from the metric list on."""
    lines = text.splitlines()
    block = "\n".join(lines[lines.index(f"{METRICS_VAR}=\\"):])
    out = subprocess.run(["sh", "-c", _ECHO_NCU + block], capture_output=True, text=True, check=True).stdout
    return [command.split("\0")[:-1] for command in out.split("\1")[:-1]]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
@pytest.mark.parametrize("width", [80, 120, 160])
def test_ncu_commands_run_in_a_shell_as_printed(width):
    profile = cuda_profile()
    assert _shell_argvs(_table_v(profile, width=width)) == [r.ncu["argv"][1:] for r in _ranked(profile)]


def test_metric_list_printed_once_and_commands_read_it():
    text = _table_v(cuda_profile(), width=80)
    assert text.count("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum") == 1
    assert text.count(f'--metrics "${METRICS_VAR}"') == len(_ranked(cuda_profile())) == 4


def test_commands_break_between_arguments():
    text = _table_v(cuda_profile(), width=80)
    lines = text.splitlines()
    block = lines[lines.index(f"{METRICS_VAR}=\\"):]
    assert all(len(line) <= 80 for line in block)
    commands = [i for i, line in enumerate(block) if line.startswith("ncu ")]
    for i in commands:
        end = next(j for j in range(i, len(block)) if not block[j].endswith(" \\"))
        continued = block[i + 1:end + 1]
        assert continued and all(line.startswith("    ") for line in continued)
        # the program ncu runs starts a line
        assert "    env TBD_NO_TRACER=1 tbd profile seq2seq --framework pytorch \\" in continued
    # an option and its value share a line
    takes_a_value = {"--kernel-name", "--launch-skip", "--launch-count", "--metrics", "--nvtx-include"}
    assert not any(line.removesuffix(" \\").split()[-1] in takes_a_value for line in block if line.endswith(" \\"))


def test_json_keeps_the_full_command():
    profile = cuda_profile()
    before = profile.to_dict()
    render_kernel_report(profile, width=80)
    rendered = kernels_json(profile, profile.kernels)
    assert profile.to_dict() == before
    ncu = rendered["low_util_kernels"][0]["ncu"]
    assert NCU_METRICS in ncu["argv"] and NCU_METRICS in ncu["command"] and METRICS_VAR not in str(rendered)


def test_a_different_metric_list_stays_in_its_command():
    profile = cuda_profile()
    odd = profile.low_bandwidth_kernels[1]
    argv = [a if a != NCU_METRICS else "dram__bytes_read.sum" for a in odd.ncu["argv"]]
    rows = [profile.low_bandwidth_kernels[0], replace(odd, ncu={**odd.ncu, "argv": argv})]
    profile = replace(profile, low_bandwidth_kernels=rows)
    text = _table_v(profile, width=120)
    assert "--metrics dram__bytes_read.sum --csv" in text and text.count(f'"${METRICS_VAR}"') == 3


@pytest.mark.parametrize("ncu", [
    {"command": "ncu --kernel-name 'regex:^k$' --metrics a,b --csv"},  # no argv: the command is split
    {"command": "ncu 'unbalanced", "argv": 7},
    {"command": None, "reason": "a kernel name with a NUL"},
    {"argv": [], "command": ""}, {"argv": ["ncu", 3]}, "not an object",
])
def test_odd_ncu_fields_render(ncu):
    profile = cuda_profile()
    row = replace(profile.low_util_kernels[0], ncu=ncu)
    profile = replace(profile, low_util_kernels=[row], low_bandwidth_kernels=[])
    text = _table_v(profile, width=80) + render_kernel_detail([row], profile, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_header_breaks_between_phrases():
    wide = render_kernel_report(cuda_profile(), width=120).splitlines()
    assert wide[0] == "NVIDIA H100 80GB HBM3"
    # the H100's datasheet 3.35 TB/s in binary units, as every byte figure: 3.35e12 / 2**40 = 3.047 TiB/s
    assert wide[1] == ("peaks fp16 1.07 PFLOP/s, fp32 66.9 TFLOP/s, tf32 535 TFLOP/s · memory bandwidth 3.05 TiB/s "
                       "(GPU table)")
    narrow = render_kernel_report(cuda_profile(), width=80).splitlines()
    assert narrow[1:3] == ["peaks fp16 1.07 PFLOP/s, fp32 66.9 TFLOP/s, tf32 535 TFLOP/s",
                           "memory bandwidth 3.05 TiB/s (GPU table)"]


def _header_of_time_table(text: str) -> str:
    lines = text.splitlines()
    return next(lines[i + 1] for i, line in enumerate(lines) if " by time (" in line)


@pytest.mark.parametrize("width, columns", [
    (160, ["Calls", "Time", "Mean", "Time %", "FLOP/s", "Util %", "Bound", "Roof %", "Name"]),
    (80, ["Calls", "Time", "Time %", "Util %", "Bound", "Roof %", "Name"]),
    (60, ["Calls", "Time", "Time %", "Util %", "Name"]),
])
def test_optional_columns_make_room_for_names(width, columns):
    header = _header_of_time_table(render_kernel_report(cuda_profile(), width=width))
    assert header.replace(" %", "_%").split() == [c.replace(" %", "_%") for c in columns]
    legend = render_kernel_report(cuda_profile(), width=width)
    assert ("Roof %:" in legend) == ("Roof %" in columns)


def test_short_names_keep_every_column():
    # CPU op names are short: no column makes way for them at 80.
    assert "Bound" in _header_of_time_table(render_kernel_report(cpu_profile(), width=80))


def test_main_report_has_the_tables_but_no_commands():
    text = render_profile(cuda_profile(), width=80)
    assert "Kernels by time (9 of 9)" in text and "Roof %" in text
    assert "Where the time can be won back: kernels by time x (1 - Roof %)" in text
    assert "Compute-bound kernels below the average FLOP utilization (the paper's Table V)" not in text
    table_v = render_profile(cuda_profile(), width=80, ranking=TABLE_V)
    assert "Compute-bound kernels below the average FLOP utilization (the paper's Table V)" in table_v
    assert "Memory-bound kernels below the average bandwidth utilization" in table_v
    assert "Where the time can be won back" not in table_v
    assert "ncu " not in text + table_v and METRICS_VAR not in text + table_v
    assert "`tbd kernels RUN`: launch configuration, roofline and Nsight Compute commands." in text


@pytest.mark.skipif(not V100_TRACE.exists(), reason="the V100 trace is not committed (tests/fixtures/gpu is fetched)")
@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
@pytest.mark.parametrize("width", [80, 120])
def test_real_v100_trace_reads_at_80_and_120_columns(width):
    from tbd.cli.run_analysis import profile_from_trace
    profile = profile_from_trace(V100_TRACE)
    for ranking, ranked in ((TABLE_V, _ranked(profile)), ("recoverable", profile.recoverable_kernels[:10])):
        text = render_kernel_report(profile, width=width, ranking=ranking)
        assert max(len(line) for line in text.splitlines()) <= width
        assert _shell_argvs(text) == [r.ncu["argv"][1:] for r in ranked if r.ncu and r.ncu.get("argv")]
    assert len(profile.recoverable_kernels[:10]) == 10 and all(r.ncu for r in profile.recoverable_kernels[:10])


def test_the_default_ranking_gives_commands_to_the_groups_with_the_most_time_to_win_back():
    profile = cuda_profile()
    ranked = [r for r in profile.recoverable_kernels[:10] if r.ncu and r.ncu.get("argv")]
    assert ranked  # the fixture's rows carry commands
    text = render_kernel_report(profile, width=120)
    assert _shell_argvs(text) == [r.ncu["argv"][1:] for r in ranked]
    assert "# won-back #1: " in text


def test_a_profile_written_before_the_won_back_ranking_shows_table_v_and_says_why():
    profile = cuda_profile()
    older = replace(profile, recoverable_kernels=[],
                    kernels=[replace(r, recoverable_s=None, recoverable_pct=None) for r in profile.kernels])
    text = render_kernel_report(older, width=120)
    assert "predates the ranking by the time that could be won back" in text
    assert "Compute-bound kernels below the average FLOP utilization (the paper's Table V)" in text
    assert _shell_argvs(text) == [r.ncu["argv"][1:] for r in _ranked(profile)]
