"""`tbd env`: per framework, whether it is usable, its version, the interpreter and the GPU."""

from __future__ import annotations

import argparse

from tbd.cli import frameworks, registry
from tbd.cli.commands.output import terminal_width, write
from tbd.core.errors import FrameworkMissingError
from tbd.reports.info_tables import render_env


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--framework", choices=registry.FRAMEWORKS, default=None, help="only this framework")


def env_rows(only: str | None = None) -> list[dict]:
    """One row per framework: the runtime found (or the install command) and what its probe says."""
    rows = []
    for fw in registry.FRAMEWORKS:
        if only and fw != only:
            continue
        try:
            rt = frameworks.runtime(fw)
        except FrameworkMissingError as exc:
            rows.append({"framework": fw, "usable": False, "version": None, "python": None, "gpu": None,
                         "reason": exc.one_line()})
            continue
        facts = frameworks.probe(rt)
        rows.append({"framework": fw, "usable": bool(facts.get("usable")),
                     "version": facts.get(registry.FRAMEWORK_MODULES[fw]) or facts.get(fw),
                     "python": f"{rt.python} ({rt.source})", "gpu": facts.get("gpu"),
                     "reason": facts.get("reason")})
    return rows


def run(args: argparse.Namespace) -> int:
    write(render_env(env_rows(args.framework), width=terminal_width()))
    return 0
