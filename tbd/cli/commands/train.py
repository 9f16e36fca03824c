"""`tbd train MODEL`: train a suite model on real data to a quality target, N runs, logged the MLPerf way.

The task of each model (its data, metric and default target) is in models/tasks/catalog.py and
listed by `--help`; docs/train.md says how each figure is obtained.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from tbd.cli import registry
from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import (
    add_output_arguments,
    check_outputs,
    output_path,
    printed_format,
    stderr_console,
    write_output,
)
from tbd.cli.orchestrate import prepare_out_dir
from tbd.cli.train_run import TrainOptions, train
from tbd.core.errors import FrameworkMissingError, InterruptedRun, UsageError
from tbd.models.tasks.catalog import NO_TASK, TASKS, TaskSpec
from tbd.reports.renderers import renderer_for

T = TypeVar("T")

#: The file every `tbd train` directory holds; --force replaces only a folder that has it.
MARKER = "tta.json"


def _tasks_help() -> str:
    have = "; ".join(f"{m}: {t.task}, {t.metric} {t.comparison} {t.target:g}" for m, t in TASKS.items())
    lacking = "; ".join(f"{m}: {why}" for m, why in NO_TASK.items())
    return f"models with a task: {have}." + (f" Without one: {lacking}" if lacking else "")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = _tasks_help()
    p.add_argument("model", help=f"suite model with a task ({', '.join(TASKS)})")
    p.add_argument("--framework", default="pytorch", help="pytorch (the only one tbd train runs in this version)")
    p.add_argument("--target", type=num.target, default=None, metavar="VALUE",
                   help="quality target on the held-out split, in the metric's own scale (default: the task's)")
    p.add_argument("--metric", default=None, metavar="NAME", help="the task's metric (the only one offered)")
    p.add_argument("--runs", type=num.runs, default=3,
                   help="runs with seeds SEED, SEED+1, ... (default 3: MLPerf's olympic mean needs 3)")
    p.add_argument("--batch", type=num.batch, default=None,
                   help="global batch size (default: the task's, 64; A3C: frames per worker per update, 5)")
    p.add_argument("--max-epochs", type=num.epochs, default=50,
                   help="a run that has not reached the target after this many epochs stops as not converged")
    p.add_argument("--size", choices=("full", "test"), default="test",
                   help="test (the suite's CI-size network, default: minutes on a CPU) or full (the variant's real "
                        "depths and widths)")
    p.add_argument("--device", default="auto",
                   help="auto (CUDA if present, else CPU), cpu, cuda or cuda:N; energy is NVML's on a GPU, RAPL's on "
                        "the CPU")
    p.add_argument("--no-profile", action="store_true",
                   help="skip the stable-phase throughput of one training step by tbd's profiler (set beside the "
                        "epochs' throughput; seconds on a CPU)")
    p.add_argument("--seed", type=num.seed, default=0)
    p.add_argument("--cost-per-hour", type=num.usd_per_hour, default=None, metavar="USD",
                   help="price of the machine per hour: cost to target = hours x USD")
    p.add_argument("--out", type=output_path, default=None,
                   help="run directory (default runs/train-<model>-b<batch>-<time>)")
    add_output_arguments(p, json="print the result as JSON (schema tbd.tta/1, docs/tta-json.md)",
                         csv="print one CSV row for the runs together and one per run",
                         force="replace a previous tbd train directory in --out (a folder without one is never "
                               "emptied)")


def run(args: argparse.Namespace) -> int:
    check_outputs(args)
    spec = task_spec(args.model)
    if args.framework != "pytorch":
        raise UsageError(f"tbd train runs PyTorch only in this version, not {args.framework}",
                         hint="leave out --framework")
    if args.metric is not None and args.metric != spec.metric:
        raise UsageError(f"{args.model}'s task measures {spec.metric}, not {args.metric}",
                         hint=f"leave out --metric, or give --metric {spec.metric}")
    target = args.target if args.target is not None else spec.target
    if spec.fraction and not 0 < target <= 1:
        raise UsageError(f"--target {target:g} is not a fraction: {spec.metric} is one", hint=f"e.g. --target {spec.target:g}")
    batch = args.batch if args.batch is not None else spec.batch
    out = args.out or Path("runs") / f"train-{args.model}-b{batch}-{time.strftime('%Y%m%d-%H%M%S')}"
    with prepare_out_dir(out, args.force, MARKER, "train directory"):  # locked; its files listed however it ends
        options = TrainOptions(args.model, spec, args.runs, batch, args.max_epochs, target, args.size, args.seed,
                               args.cost_per_hour, out, args.device, not args.no_profile)
        try:
            result = with_spinner(f"training {args.model} to {spec.metric} {spec.comparison} {target:g}:",
                                  lambda progress: train(options, progress=progress))
        except KeyboardInterrupt as exc:  # train_run.TrainInterrupted: SIGINT, SIGTERM or SIGHUP, runs so far saved
            raise InterruptedRun(f"interrupted: the runs done so far are in {out / MARKER}",
                                 exit_code=128 + getattr(exc, "signum", 2)) from None
    write_output(renderer_for(result), printed_format(args))
    return 0


def task_spec(model: str) -> TaskSpec:
    """The task `model` trains on, or UsageError: an unknown model, or one without a task (and why)."""
    if model not in registry.MODELS:
        raise UsageError(f"unknown model {model!r}", hint=f"one of {', '.join(TASKS)}")
    spec = TASKS.get(model)
    if spec is None:
        raise UsageError(f"{model} has no tbd train task: {NO_TASK.get(model, 'none')}",
                         hint=f"models with a task: {', '.join(TASKS)}")
    missing = spec.missing()
    if missing is not None:
        raise FrameworkMissingError(f"{model}'s task ({spec.task}) needs {missing[0]}, which is not installed",
                                    hint=missing[1])
    return spec


def with_spinner(label: str, work: Callable[[Callable[[str], None]], T], quiet: bool = False) -> T:
    """`work(progress)` under a spinner on stderr (a terminal only) whose text `progress(what)` sets."""
    console = stderr_console()
    with Progress(SpinnerColumn(), TextColumn(label), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True, disable=quiet or not console.is_terminal) as bar:
        task = bar.add_task("", total=None)
        return work(lambda what: bar.update(task, description=what))
