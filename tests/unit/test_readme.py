"""README.md says what the commands really take and points only at files in this repository.

A newcomer reads the Commands table as the synopsis of each command: an option `--help` lists and
the table leaves out is an option they never learn of (issue 15). The example's output and the
terms of the reports are checked where they are rendered (test_reports.py, tests/e2e/test_api.py).
"""

from __future__ import annotations

import argparse
import re

import pytest
from testpaths import ROOT

from tbd.cli.main import build_parser

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _synopsis(command: str) -> str:
    """The Commands table's first cell for `tbd COMMAND`."""
    rows = re.findall(rf"^\| `(tbd {command}(?: [^`]*)?)` \|", README, re.M)
    assert len(rows) == 1, f"README's Commands table has {len(rows)} rows for tbd {command}"
    return rows[0]


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_of_a_command_is_in_its_synopsis(command):
    synopsis = _synopsis(command)
    options = {opt for a in _subcommands()[command]._actions for opt in a.option_strings
               if opt.startswith("--") and opt != "--help"}
    missing = sorted(o for o in options if not re.search(rf"{re.escape(o)}(?![\w-])", synopsis))
    assert not missing, f"README's synopsis of tbd {command} leaves out {missing}: {synopsis}"


def test_links_and_paths_stay_inside_the_repository():
    assert "../" not in README and "DESIGN.md" not in README  # nothing outside the repository
    for path in re.findall(r"\]\(((?!https?://)[^)#]+)\)", README):  # relative Markdown links
        assert (ROOT / path).exists(), path
    for path in set(re.findall(r"`(docs/[\w./-]+\.md)`", README)):
        assert (ROOT / path).exists(), path


def test_docs_named_where_the_layout_is():
    for doc in ("docs/architecture.md", "docs/profile-json.md", "docs/sweep-compare-json.md"):
        assert f"]({doc})" in README


def test_run_directory_contents_listed():
    profile_row = _synopsis("profile")
    row = README[README.index(profile_row):].split("\n", 1)[0]
    for name in ("profile.json", "spec.json", "iterations.json", "trace.pt.trace.json.gz", "workload.log", "raw/"):
        assert f"`{name}`" in row, name
