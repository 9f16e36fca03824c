"""`tbd sweep MODEL --batch 2,4,8 | --batch max`: one `tbd profile` run per batch size, side by side.

`--batch max` finds the largest batch that fits: from --batch-start (default: the model's default
batch, as `tbd profile` would run it) it doubles until a batch runs out of memory or reaches
--max-batch, then bisects until the largest batch that ran and the smallest that did not are
adjacent (a start that does not fit is halved first). A point that fails is recorded with its
one-line reason and the sweep goes on; in the max search a failure that is not out of memory (a
crash) counts as "does not fit" and a note says so (under an address-space cap an allocation failure
often surfaces as a crash; the search stays monotone and O(log N)). Every other option is
`tbd profile`'s and applies to every point; the run spec is built by the same `spec_from_args`.
Exit code: 0 when the sweep ran to its end and some point ran; 130/143 interrupted (the points done
are written); 3 when every point ran out of memory, 4 when none ran for another reason.

`--executor ray|submitit` runs each point as its own run on a worker (a Ray task; a job of a Slurm job
array) instead of here one after another: a list sweep's points all at once, the max search one at a
time (tbd/cli/sweep_executors.py, docs/sweep-executors.md).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from tbd.cli import registry
from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import add_output_arguments, stderr_console, write, write_output
from tbd.cli.commands.profile import add_run_arguments, add_workload_arguments, spec_from_args
from tbd.cli.commands.train import task_spec, with_spinner
from tbd.cli.orchestrate import prepare_out_dir
from tbd.cli.sweep_executors import EXECUTORS, RayRunner, SubmititRunner
from tbd.cli.sweep_run import SWEEP_JSON, SweepPlan, new_sweep_dir, prepare_sweep_dir, run_sweep
from tbd.cli.train_run import TrainOptions, train_sweep
from tbd.core.errors import InterruptedRun, UsageError
from tbd.reports.progress import StageProgress
from tbd.reports.renderers import renderer_for

DEFAULT_MAX_BATCH = 4096
#: A point's trace window (`tbd profile` traces 3): the memory figures come from the trace alone, and one
#: iteration gives the same ones (docs/commands/sweep.md, "Cost of a point").
POINT_TRACE_ITERATIONS = 1
_BATCH_HINT = "give batch sizes like --batch 2,4,8, or --batch max for the largest batch that fits"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_workload_arguments(p)
    p.add_argument("--batch", type=num.batch_list, required=True, metavar="B1,B2,...|max",
                   help="the batch sizes to run, in this order (e.g. 2,4,8); or max: find the largest that fits")
    p.add_argument("--batch-start", type=num.batch, default=None, metavar="N",
                   help="--batch max: the first batch (default: the model's default batch)")
    p.add_argument("--max-batch", type=num.batch, default=None, metavar="N",
                   help=f"--batch max: never try a batch above N (default {DEFAULT_MAX_BATCH})")
    add_run_arguments(p)  # each point's, as `tbd profile` takes them
    for action in p._actions:  # a point's trace window: one iteration, for its memory figures
        if action.dest == "trace_iterations":
            action.default = POINT_TRACE_ITERATIONS
            action.help = (f"iterations in each point's trace window, at most (default {POINT_TRACE_ITERATIONS}: "
                           "enough for its memory figures, which only the trace records; 0: none)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where the points run: local (here, one after another; default), ray (each a Ray task "
                        "on a Ray cluster), submitit (each a job of a Slurm job array; local processes without Slurm)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="--executor ray: the cluster's address (default: $RAY_ADDRESS, else a Ray started here)")
    p.add_argument("--slurm-partition", default=None, metavar="NAME", help="--executor submitit: the Slurm partition")
    p.add_argument("--timeout-min", type=num.minutes, default=None, metavar="MIN",
                   help="--executor submitit: each job's time limit in minutes (default: --max-seconds plus 15 minutes)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (the one line per point stays)")
    tta = p.add_argument_group("time to accuracy (--tta)")
    tta.add_argument("--tta", action="store_true",
                     help="run `tbd train` at each batch instead of `tbd profile`: time to the task's target and "
                          "throughput against batch size, together (DIR/b<batch>/, DIR/tta.json, DIR/figures/)")
    tta.add_argument("--runs", type=num.runs, default=3, help="--tta: runs per batch (default 3)")
    tta.add_argument("--target", type=num.target, default=None, metavar="VALUE",
                     help="--tta: the quality target (default: the task's)")
    tta.add_argument("--max-epochs", type=num.epochs, default=50, help="--tta: epochs before a run counts as "
                                                                          "not converged (default 50)")
    add_output_arguments(p, out_dir="sweep directory to write (default runs/sweep-<model>-<framework>-<device>-<time>): "
                                    "sweep.json, sweep.csv, figures/; each point's run directory is b<batch>/ inside it",
                         force="replace a previous tbd sweep in --out (a folder without sweep.json is never emptied)")


def parse_batches(text: str) -> tuple[int, ...] | None:
    """--batch's text: "max" gives None (the max search), "2,4,8" the batches in order.

    Raises:
        UsageError: anything else: an empty item, a non-integer, a batch below 1, a batch given
            twice, or max mixed with batch sizes.
    """
    items = [item.strip() for item in text.split(",")]
    if len(items) == 1 and items[0].lower() == "max":
        return None
    if any(item.lower() == "max" for item in items):
        raise UsageError(f"--batch {text!r}: max stands alone, not in a list of batch sizes", hint=_BATCH_HINT)
    batches: list[int] = []
    for item in items:
        try:
            batch = int(item)
        except ValueError:
            raise UsageError(f"--batch {text!r}: {item!r} is not a batch size" if item else
                             f"--batch {text!r}: an empty item", hint=_BATCH_HINT) from None
        if batch < 1:
            raise UsageError(f"--batch {text!r}: a batch is at least 1, got {batch}", hint=_BATCH_HINT)
        if batch in batches:
            raise UsageError(f"--batch {text!r}: batch {batch} is given twice", hint=_BATCH_HINT)
        batches.append(batch)
    return tuple(batches)


def plan_from_args(args: argparse.Namespace, default_batch: int) -> SweepPlan:
    """The batches to run, every option checked; UsageError before any run otherwise."""
    batches = parse_batches(args.batch)
    if batches is not None:
        for flag, value in (("--batch-start", args.batch_start), ("--max-batch", args.max_batch)):
            if value is not None:
                raise UsageError(f"{flag} applies to --batch max only", hint=f"drop {flag}, or use --batch max")
        return SweepPlan(batches)
    start = args.batch_start if args.batch_start is not None else default_batch
    cap = args.max_batch if args.max_batch is not None else max(DEFAULT_MAX_BATCH, start)
    if start > cap:
        raise UsageError(f"--batch-start {start} is above --max-batch {cap}", hint="raise --max-batch or lower --batch-start")
    return SweepPlan(None, start=start, cap=cap)


def runner_from_args(args: argparse.Namespace, spec_device: str) -> RayRunner | SubmititRunner | None:
    """The executor's runner (None: here, one after another); UsageError for an option of another
    executor, a GPU index a worker cannot name, or an executor whose package is not installed."""
    for flag, value, executor in (("--ray-address", args.ray_address, "ray"),
                                  ("--slurm-partition", args.slurm_partition, "submitit"),
                                  ("--timeout-min", args.timeout_min, "submitit")):
        if value is not None and args.executor != executor:
            raise UsageError(f"{flag} applies to --executor {executor} only", hint=f"add --executor {executor}")
    if args.executor == "local":
        return None
    if spec_device.startswith("cuda:") and spec_device != "cuda:0":
        raise UsageError(f"--device {spec_device}: with --executor {args.executor} each point gets a GPU of its own, "
                         "which it sees as cuda:0", hint="give --device cuda")
    if args.executor == "ray":
        return RayRunner(args.ray_address)
    return SubmititRunner(partition=args.slurm_partition, timeout_min=args.timeout_min)


def run(args: argparse.Namespace) -> int:
    if args.tta:
        return _tta_sweep(args)
    for flag, given in (("--runs", args.runs != 3), ("--target", args.target is not None),
                        ("--max-epochs", args.max_epochs != 50)):
        if given:
            raise UsageError(f"{flag} applies to --tta only", hint=f"add --tta, or drop {flag}")
    # Everything is checked before the first point runs: the batches, then the model and framework
    # as `tbd profile` checks them (its spec_from_args, given no batch).
    parse_batches(args.batch)  # a bad --batch is refused first, before the model is looked up
    spec = spec_from_args(argparse.Namespace(**{**vars(args), "batch": None}))
    info = registry.model_info(args.model)
    if info.fixed_batch is not None:
        raise UsageError(f"{args.model} fixes its batch at {info.fixed_batch} per iteration, as the TBD paper ran it: "
                         "there is no batch to sweep", hint=f"run `tbd profile {args.model}` instead")
    plan = plan_from_args(args, spec.batch or info.default_batch)
    runner = runner_from_args(args, spec.device)
    with runner or contextlib.nullcontext():  # a Ray is started or reached before the sweep directory is made
        out = Path(args.out) if args.out is not None else new_sweep_dir(spec)
        console = stderr_console()
        with prepare_sweep_dir(out, args.force):  # locked for the whole sweep; its files listed at the end
            outcome = run_sweep(spec, plan, out,
                                announce=lambda line: console.print(line, highlight=False, markup=False),
                                progress=lambda: StageProgress(console, enabled=not args.quiet), runner=runner)
    write_output(renderer_for(outcome.sweep), "text")
    write(f"sweep directory: {out}")
    if outcome.figures_note:
        console.print(f"tbd: {outcome.figures_note}", highlight=False, markup=False)
    if outcome.exit_code in (130, 143):
        console.print(f"tbd: interrupted: the points done so far are in {out / SWEEP_JSON}",
                      highlight=False, markup=False)
    return outcome.exit_code


def _tta_sweep(args: argparse.Namespace) -> int:
    """`--tta`: `tbd train` at each batch of the list; the result's table has one system per batch."""
    batches = parse_batches(args.batch)
    if batches is None:
        raise UsageError("--tta sweeps a list of batches, not --batch max", hint="e.g. --batch 16,64,256")
    if args.executor != "local" or args.framework != "pytorch":
        raise UsageError("--tta runs here, in PyTorch", hint="drop --executor and --framework")
    spec = task_spec(args.model)
    target = args.target if args.target is not None else spec.target
    out = Path(args.out) if args.out is not None else Path("runs") / f"sweep-tta-{args.model}-{time.strftime('%Y%m%d-%H%M%S')}"
    with prepare_out_dir(out, args.force, "tta.json", "sweep --tta directory"):  # locked, its files listed at the end
        options = TrainOptions(args.model, spec, args.runs, batches[0], args.max_epochs, target, args.size, args.seed,
                               None, out, args.device)
        try:
            result = with_spinner(f"tbd sweep --tta {args.model}:",
                                  lambda progress: train_sweep(options, batches, progress=progress), quiet=args.quiet)
        except KeyboardInterrupt:
            raise InterruptedRun(f"interrupted: the batches done so far are in {out / 'tta.json'}") from None
        rendered = renderer_for(result)
        write_output(rendered, "text")
        for path in write_output(rendered, "figures", out / "figures"):
            write(f"figure: {path}")
    return 0
