"""README.md stays a two-minute read; docs/commands/<cmd>.md say what each command really takes.

A newcomer reads the README first: it must be short, with a `tbd` command early and short table
cells (issue 28: 485 lines, a 1,389-character cell and the first command at line 163 took ten
minutes of reading). The full synopsis of each command lives on its page, and an option `--help`
lists that the page leaves out is an option they never learn of (issue 15). Commands written
anywhere in README.md or docs/ are checked against the parser in test_docs_commands.py; the
example's output is checked where it is rendered (tests/e2e/test_api.py, test_docs_quickstart.py).
"""

from __future__ import annotations

import argparse
import re

import pytest
from testpaths import ROOT

from tbd.cli.main import build_parser

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _page(command: str) -> str:
    path = DOCS / "commands" / f"{command}.md"
    assert path.is_file(), f"tbd {command} has no page {path.relative_to(ROOT)}"
    return path.read_text(encoding="utf-8")


def _synopsis(command: str) -> str:
    """The first code block of docs/commands/COMMAND.md, which must be `tbd COMMAND ...`."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", _page(command), re.S | re.M)
    assert blocks and blocks[0].startswith(f"tbd {command}"), f"docs/commands/{command}.md opens with no synopsis"
    return blocks[0]


def _options(command: str) -> set[str]:
    return {opt for a in _subcommands()[command]._actions for opt in a.option_strings
            if opt.startswith("--") and opt != "--help"}


# --- the README: short, a command early, short cells -------------------------------------------------

def test_readme_is_a_two_minute_read():
    lines = README.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move detail to docs/"
    first = next(i for i, line in enumerate(lines, 1) if re.match(r"(\$ )?tbd [a-z]+", line))
    assert first <= 40, f"the first `tbd` command is at line {first}"
    cells = [c.strip() for line in lines if line.startswith("|") for c in line.strip("|").split(" | ")]
    assert max(len(c) for c in cells) <= 200, max(cells, key=len)


def test_readme_quick_start_runs_the_five_commands():
    start = README.index("## Quick start")
    quick = README[start:README.index("\n## ", start + 1)]
    for command in ("tbd profile resnet50 --size test", "tbd kernels ", "tbd compare ", "tbd analyze ", "tbd train "):
        assert f"$ {command}" in quick, command


def test_readme_has_the_two_set_up_commands_the_ci_runs():
    assert "make profile " in README and "make test " in README
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI runs the README's test command


def test_readme_links_every_command_page():
    for command in _subcommands():
        assert f"](docs/commands/{command}.md)" in README, command


def test_docs_named_where_a_newcomer_looks():
    for doc in ("docs/architecture.md", "docs/profile-json.md", "docs/sweep-compare-json.md", "docs/metrics.md",
                "docs/measurement-quality.md", "docs/trace-analysis.md", "docs/distributed.md"):
        assert f"]({doc})" in README, doc


# --- links: README and every docs page point at files in this repository ------------------------------

@pytest.mark.parametrize("page", ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")))
def test_links_and_paths_stay_inside_the_repository(page):
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text and "DESIGN.md" not in text and "STYLE.md" not in text
    for link in re.findall(r"\]\(((?!https?://)[^)#\s]+)", text):  # relative Markdown links and images
        target = (path.parent / link).resolve()
        assert target.exists() and ROOT in (target, *target.parents), f"{page}: {link}"
    for cited in set(re.findall(r"`(docs/[\w./-]+\.md)`", text)):
        assert (ROOT / cited).exists(), f"{page}: {cited}"


# --- each command's page: the whole synopsis ----------------------------------------------------------

@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_of_a_command_is_in_its_synopsis(command):
    synopsis = _synopsis(command)
    missing = sorted(o for o in _options(command) if not re.search(rf"{re.escape(o)}(?![\w-])", synopsis))
    assert not missing, f"docs/commands/{command}.md's synopsis leaves out {missing}: {synopsis}"
    unknown = sorted(set(re.findall(r"--[a-z][\w-]*", synopsis)) - _options(command))
    assert not unknown, f"docs/commands/{command}.md's synopsis names options tbd {command} lacks: {unknown}"


def test_run_directory_contents_listed():
    page = _page("profile")
    for name in ("profile.json", "spec.json", "iterations.json", "trace.pt.trace.json.gz", "workload.log", "raw/"):
        assert f"`{name}`" in page, name
