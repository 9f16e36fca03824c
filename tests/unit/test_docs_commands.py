"""Every `tbd COMMAND --option` written in README.md or docs/ names a command and options that exist.

Docs drift when an option is renamed: a page keeps telling users `--foo` after the parser dropped
it. Each command line in a code block (`$ tbd ...`, `tbd ...`, `.venv/bin/tbd ...`) and each inline
code span starting with `tbd COMMAND` is read against the real parser (`tbd COMMAND --help`'s
options). test_docs_quickstart.py checks the Quick start's output against real runs.
"""

from __future__ import annotations

import argparse
import re

import pytest
from testpaths import ROOT

from tbd.cli.main import build_parser

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
GLOBAL = {"--help", "--version", "--debug"}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


PARSERS = _parsers()
OPTIONS = {cmd: {o for a in p._actions for o in a.option_strings} for cmd, p in PARSERS.items()}


def command_lines(text: str) -> list[str]:
    """`tbd COMMAND ...` as written: command lines of code blocks, and inline code spans."""
    found = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            m = re.match(r"\s*(?:\$ )?(?:\S*/)?(tbd [a-z]+.*)", line) or re.search(r"(?:^|\s)\S*bin/(tbd [a-z]+.*)", line)
            if m:
                found.append(re.split(r"\s+# ", m.group(1))[0].rstrip())
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found += [m for m in re.findall(r"`(tbd [a-z]+[^`]*)`", prose)]
    return found


def test_the_pages_hold_commands():
    assert sum(len(command_lines(p.read_text(encoding="utf-8"))) for p in PAGES) > 50


def test_command_lines_are_found():
    text = "a\n```\n$ tbd kernels RUN --top 5   # comment --nope\nncu --set full .venv/bin/tbd profile x --batch 2\n```\n"
    assert command_lines(text + "and `tbd gpus --json` here") == [
        "tbd kernels RUN --top 5", "tbd profile x --batch 2", "tbd gpus --json"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_in_the_docs_exists(page):
    bad = []
    for line in command_lines(page.read_text(encoding="utf-8")):
        command = line.split()[1]
        if command not in PARSERS:
            # prose may say "the tbd parent"; a command line must name a real command
            if re.match(r"tbd [a-z]+ (?:[A-Z]|-|\S+/|\S+\.)", line):
                bad.append(f"{line}: no command {command}")
            continue
        unknown = sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", line)) - OPTIONS[command] - GLOBAL)
        bad += [f"{line}: tbd {command} has no {o}" for o in unknown]
    assert not bad, "\n".join(bad)
