"""`tbd suite`: every model x framework of the suite, and whether it runs on this machine."""

from __future__ import annotations

import argparse
import importlib.util

from tbd.cli import frameworks, registry
from tbd.cli.commands.output import terminal_width, write
from tbd.core.errors import FrameworkMissingError
from tbd.models.tasks.catalog import TASKS
from tbd.reports.info_tables import render_suite


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--framework", choices=registry.FRAMEWORKS, default=None, help="only this framework")


def _has_runtime(framework: str) -> bool:
    try:
        frameworks.runtime(framework)
    except FrameworkMissingError:
        return False
    return True


def suite_rows(framework: str | None = None, *, installed: dict[str, bool] | None = None) -> list[dict]:
    """One row per model x framework: the registry's facts and availability here, with the reason.

    installed: framework -> whether its runtime is usable; None asks this machine (tests pass a fixed one).
    """
    if installed is None:
        installed = {fw: _has_runtime(fw) for fw in registry.FRAMEWORKS}
    rows = []
    for info in registry.MODELS.values():
        for fw in registry.FRAMEWORKS:
            if framework and fw != framework:
                continue
            implemented = fw in info.implementations and importlib.util.find_spec(info.implementations[fw]) is not None
            if not implemented:
                available, why = False, "not implemented yet"
            elif not installed.get(fw, False):
                available, why = False, f"{registry.FRAMEWORK_MODULES[fw]} not installed"
            else:
                available, why = True, ""
            rows.append({"model": info.name, "framework": fw, "application": info.application,
                         "dominant_layer": info.dominant_layer, "dataset": info.dataset,
                         "unit": info.throughput_unit, "default_batch": info.default_batch,
                         "cpu_batch": info.cpu_batch or info.default_batch,
                         "available": available, "implemented": implemented, "why": why,
                         "task": _task_text(info.name)})
    return rows


def _task_text(model: str) -> str:
    """What `tbd train MODEL` trains on ("" without a task: NO_TASK says why); `tbd train --help` gives
    each task's metric and default target."""
    task = TASKS.get(model)
    return task.task if task is not None else ""


def run(args: argparse.Namespace) -> int:
    write(render_suite(suite_rows(args.framework), width=terminal_width()))
    return 0
