"""`tbd profile MODEL`: run a suite workload and report every metric of the contract."""

from __future__ import annotations

import argparse
from pathlib import Path

from tbd.cli import frameworks, registry
from tbd.cli.commands import arguments as num
from tbd.cli.commands.output import output_path, stderr_console, terminal_width, write
from tbd.cli.distributed_run import check_spec, profile_distributed
from tbd.cli.ncu_measure import NCU_DIR, measure_with_ncu
from tbd.cli.orchestrate import profile_run
from tbd.core import rundir
from tbd.core.errors import UsageError
from tbd.core.records import RunSpec
from tbd.core.run_ownership import record_written
from tbd.profilers.distributed import DATA_PARALLEL
from tbd.reports.progress import StageProgress
from tbd.reports.terminal import render_profile


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """MODEL and --framework: what `tbd profile` and `tbd sweep` run."""
    p.add_argument("model", help=f"workload: {', '.join(sorted(registry.MODELS))}")
    p.add_argument("--framework", default="pytorch", help=f"one of {', '.join(registry.FRAMEWORKS)} (default pytorch)")


#: --iterations when not given; --window-seconds then cuts it (a slow model's run ends in minutes).
DEFAULT_ITERATIONS = 20
DEFAULT_WINDOW_S = 10.0


def _seconds_or_zero(text: str) -> float:
    """--window-seconds: seconds > 0, or 0.0 for "no cut" (None stays "not given")."""
    return num.seconds_or_off(text) or 0.0


def window_options(args: argparse.Namespace) -> tuple[int, float | None]:
    """(iterations, window_seconds) of the run spec: a given --iterations is run as given (issue 28: 5 became
    4 or 3, sized by time, with only a note in iterations.json), unless --window-seconds is given as well."""
    window_s = getattr(args, "window_seconds", None)
    iterations = getattr(args, "iterations", None)
    if window_s is None:
        window_s = None if iterations is not None else DEFAULT_WINDOW_S
    return (iterations if iterations is not None else DEFAULT_ITERATIONS), (window_s or None)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """How each run goes (device, size, windows, threads, seed, memory cap, peak): `tbd profile`'s and
    every point of `tbd sweep`; `spec_from_args` reads them."""
    p.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU), cpu, cuda or cuda:N")
    p.add_argument("--size", choices=("full", "test"), default="full",
                   help="full: the paper's architecture; test: a tiny one for quick checks")
    p.add_argument("--warmup", type=num.warmup, default=None,
                   help="warm-up iterations (default: detect the end of warm-up automatically)")
    p.add_argument("--iterations", type=num.iterations, default=None,
                   help=f"iterations in each timing window (default {DEFAULT_ITERATIONS}, cut to --window-seconds; "
                        "given, exactly that many unless --window-seconds is given too or --max-seconds runs out)")
    p.add_argument("--repeat", type=num.repeat, default=3,
                   help="timing windows run back to back; the throughput is their median, with their spread "
                        "(default 3)")
    p.add_argument("--window-seconds", type=_seconds_or_zero, default=None,
                   help="cut each timing window (and the trace window) to about this long at the warm-up's "
                        f"iteration time, so a slow model's run ends in minutes (default {DEFAULT_WINDOW_S:g}, "
                        "none when --iterations is given; 0: no cut)")
    p.add_argument("--trace-iterations", type=num.trace_iterations, default=3,
                   help="iterations in the trace window, at most (default 3)")
    p.add_argument("--max-seconds", type=num.seconds, default=600.0,
                   help="time budget for warm-up plus timing window (default 600)")
    p.add_argument("--threads", type=num.threads, default=None, help="CPU threads for the framework (default: its own)")
    p.add_argument("--seed", type=num.seed, default=0, help="random seed, 0 .. 2**31-1 (default 0)")
    p.add_argument("--memory-limit-gib", type=num.memory_gib, default=None,
                   help="cap the workload process's address space (RLIMIT_AS), e.g. to find the largest batch "
                        "that fits a host with less memory; CPU runs (CUDA reserves large virtual ranges)")
    p.add_argument("--peak-flops", type=num.peak_flops, default=None,
                   help="FP32 peak FLOP/s of the device, instead of the GPU table's (or the CPU model's); labelled "
                        "as yours in the report")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_workload_arguments(p)
    p.add_argument("--batch", type=num.batch, default=None,
                   help="batch size (default: the model's own; on the CPU a smaller one for the image models, "
                        "`tbd suite` lists them)")
    add_run_arguments(p)
    p.add_argument("--out", type=output_path, default=None,
                   help="run directory to write (default runs/<model>-<framework>-<device>-b<batch>[-n<processes>]-<time>)")
    p.add_argument("--top", type=num.top, default=10, help="kernels shown in the report (default 10)")
    p.add_argument("--ncu", type=num.kernel_count, default=None, metavar="N",
                   help="after the run, measure the first N kernels of the ranking (most time to win back first) "
                        "with Nsight Compute (a second run of the same windows under ncu, one traced iteration) and "
                        "merge the counters into profile.json; "
                        "CUDA runs with ncu on PATH (or TBD_NCU), else a note says why nothing was measured")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--force", action="store_true",
                   help="replace a previous tbd run in --out (a folder without a tbd run is never emptied)")
    add_distributed_arguments(p)


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """Several processes (and machines) on torch.distributed, launched under torchrun (PyTorch)."""
    g = p.add_argument_group("several processes and machines (PyTorch, torch.distributed under torchrun)")
    g.add_argument("--nproc-per-node", type=num.processes, default=1, metavar="N",
                   help="processes on this machine, one per GPU (on the CPU: Gloo, the cores shared); each trains "
                        "data-parallel (--data-parallel) on --batch samples; the profile sums their throughput")
    g.add_argument("--nnodes", type=num.machines, default=1, metavar="M",
                   help="machines in the run: start the same command on each, with its own --node-rank")
    g.add_argument("--node-rank", type=num.node_rank, default=0, metavar="R",
                   help="this machine's number, 0 .. M-1; node 0 hosts the rendezvous and writes the cluster profile")
    g.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                   help="node 0's address for the rendezvous, the same on every machine (default: this machine, a "
                        "free port)")
    g.add_argument("--rdzv-timeout", type=num.seconds, default=300.0, metavar="SECONDS",
                   help="machines must have joined within this (default 300)")
    g.add_argument("--rank-timeout", type=num.seconds, default=300.0, metavar="SECONDS",
                   help="a rank that keeps the others waiting this long in a collective ends the run (default 300)")
    g.add_argument("--data-parallel", choices=DATA_PARALLEL, default="ddp",
                   help="ddp: DistributedDataParallel (each rank holds the whole model, gradients all-reduced); "
                        "fsdp: FSDP2 fully_shard (parameters, gradients and optimizer state sharded across ranks, "
                        "gathered layer by layer) where the model supports it (default ddp)")
    g.add_argument("--scaling", action="store_true",
                   help="first run the same model on 1, 2, ..., N-1 processes, for the scaling efficiency of each "
                        "(one machine)")


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    registry.check_framework(args.framework)
    registry.builder_module(args.model, args.framework)  # unknown model/pair -> UsageError now
    info = registry.model_info(args.model)
    if info.fixed_batch is not None and args.batch not in (None, info.fixed_batch):
        raise UsageError(f"{args.model} fixes its batch at {info.fixed_batch} per iteration, as the TBD paper ran it",
                         hint="drop --batch")
    on_cpu = frameworks.planned_device(args.device) == "cpu"
    batch = args.batch if args.batch is not None else (info.cpu_batch or info.default_batch) if on_cpu \
        else info.default_batch
    frameworks.runtime(args.framework)  # not installed -> one line naming the install command
    iterations, window_seconds = window_options(args)
    return RunSpec(model=args.model, framework=args.framework, batch=batch, device=args.device, size=args.size,
                   warmup=args.warmup, iterations=iterations, trace_iterations=args.trace_iterations,
                   max_seconds=args.max_seconds, seed=args.seed,
                   threads=args.threads if args.threads is not None else info.default_threads.get(args.framework),
                   memory_limit_bytes=int(args.memory_limit_gib * 2**30) if args.memory_limit_gib else None,
                   peak_flops=args.peak_flops, repeat=args.repeat, window_seconds=window_seconds,
                   **distributed_options(args))


def distributed_options(args: argparse.Namespace) -> dict:
    """RunSpec's multi-process fields from the command line (the defaults when the parser has none)."""
    nproc, nnodes = getattr(args, "nproc_per_node", 1), getattr(args, "nnodes", 1)
    if getattr(args, "scaling", False) and (nproc < 2 or nnodes > 1):
        raise UsageError("--scaling needs --nproc-per-node 2 or more on one machine",
                         hint="e.g. --nproc-per-node 4 --scaling runs 1, 2, 3 and 4 processes")
    if getattr(args, "ncu", None) is not None and nproc * nnodes > 1:
        raise UsageError("--ncu measures the kernels of one process; it does not run under --nproc-per-node",
                         hint="profile one process with --ncu, or drop --ncu")
    return {"nproc_per_node": nproc, "nnodes": nnodes, "node_rank": getattr(args, "node_rank", 0),
            "rdzv_endpoint": getattr(args, "rdzv_endpoint", None),
            "rdzv_timeout_s": getattr(args, "rdzv_timeout", 300.0), "rank_timeout_s": getattr(args, "rank_timeout", 300.0),
            "data_parallel": getattr(args, "data_parallel", "ddp")}


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    # A default directory is new and unique (two runs started in the same second get -2, -3, ...).
    device = frameworks.planned_device(spec.device)
    run_dir = Path(args.out) if args.out else rundir.new_run_dir(spec, device=device)
    with StageProgress(stderr_console(), enabled=not args.quiet) as progress:
        # The first line comes before the child starts (its framework import alone takes seconds).
        size = " (test size)" if spec.size == "test" else ""
        where = "the GPU if the framework sees one, else the CPU" if device == "auto" else device
        ranks = f" x {spec.world_size} processes" + (f" on {spec.nnodes} machines" if spec.nnodes > 1 else "") \
            if spec.world_size > 1 else ""
        progress.say(f"profiling {spec.model}{size} in {spec.framework} on {where}, batch "
                     f"{spec.batch}{ranks}; run directory {run_dir}")
        if spec.world_size > 1:
            check_spec(spec)
            outcome = profile_distributed(spec, run_dir, progress, force=args.force, scaling=args.scaling)
        else:
            outcome = profile_run(spec, run_dir, progress, force=args.force, rename_after_device=not args.out)
    profile, run_dir = outcome.profile, outcome.run_dir or run_dir
    if args.ncu is not None and not outcome.exit_code:
        try:
            profile = measure_with_ncu(profile, run_dir, args.ncu, announce=lambda line: stderr_console().print(
                f"tbd: {line}", highlight=False, markup=False))
        finally:  # the run listed its files when it ended: the ncu session's come after, so a later --force may go
            ncu_files = [p for p in (run_dir / NCU_DIR).rglob("*") if not p.is_dir()]
            record_written(run_dir, [*ncu_files, run_dir / rundir.PROFILE])
    write(render_profile(profile, width=terminal_width(), color=None, top=args.top))
    kept = ("partial profile.json, iterations.json" if outcome.exit_code
            else f"profile.json, iterations.json, {rundir.trace_name(spec.framework)}")
    write(f"run directory: {run_dir}  ({kept})")
    if outcome.exit_code:
        stderr_console().print(f"tbd: interrupted: partial profile written to {run_dir / rundir.PROFILE}",
                               highlight=False, markup=False)
    return outcome.exit_code
