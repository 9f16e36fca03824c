"""The README's Quick start shows real output: its `tbd analyze` and `tbd compare` excerpts are rerun.

Those two read committed inputs (a public V100 trace, the two committed CPU runs), so their output
is the same on every machine: each line the README shows (`…` marks a cut) must be in the real
output at 100 columns, as the README was made, with runs of spaces and line breaks read as one
space (a column that widens or a cell that wraps elsewhere is no error; a changed figure is). `tbd profile`, `tbd kernels` and `tbd train`
measure this machine and cannot be replayed; their options are checked in test_docs_commands.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from testpaths import ROOT, real_trace

README = (ROOT / "README.md").read_text(encoding="utf-8")
V100 = real_trace("gpu/pt19_resnet50_v100.json.gz")


def quick_start_excerpts() -> dict[str, list[str]]:
    """`$ tbd ...` command -> the output lines the Quick start shows beneath it (cut marks dropped)."""
    start = README.index("## Quick start")
    section = README[start:README.index("\n## ", start + 1)]
    excerpts: dict[str, list[str]] = {}
    for block in re.findall(r"^```\n(.*?)^```", section, re.S | re.M):
        command = None
        for line in block.splitlines():
            if line.startswith("$ tbd "):
                command = re.split(r"\s+# ", line[2:])[0].strip()
                excerpts[command] = []
            elif command and line.strip() not in ("…", ""):
                excerpts[command].append(line.rstrip())
    return excerpts


def run_tbd(args: list[str]) -> list[str]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "tbd.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [line.rstrip() for line in done.stdout.splitlines()]


def test_the_five_commands_have_excerpts():
    excerpts = quick_start_excerpts()
    assert [c.split()[1] for c in excerpts] == ["profile", "kernels", "analyze", "compare", "train"]
    assert all(len(lines) >= 2 for lines in excerpts.values()), excerpts


@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_excerpt_is_the_real_output(command):
    line = next(c for c in quick_start_excerpts() if c.split()[1] == command)
    args = line.split()[1:]
    if command == "analyze":
        if not V100.exists():
            pytest.skip(f"the public V100 trace is not here ({V100}; tests/fixtures/README.md, 'gpu/')")
        args = [str(V100) if a.endswith("pt19_resnet50_v100.json.gz") else a for a in args]
    real = " ".join(" ".join(run_tbd(args)).split())
    missing = [shown for shown in quick_start_excerpts()[line] if " ".join(shown.split()) not in real]
    assert not missing, "README's Quick start shows lines `tbd " + " ".join(args) + "` no longer prints:\n" + \
        "\n".join(missing)
