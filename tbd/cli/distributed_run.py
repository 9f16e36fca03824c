"""The parent side of a multi-process `tbd profile --nproc-per-node N [--nnodes M]`: torchrun over the ranks.

torchrun (torch.distributed.run, static rendezvous at --rdzv-endpoint) starts one runner child per
rank on this machine; each writes its raw records to RUN_DIR/ranks/rank-K (profilers/distributed.py)
and its stderr to that folder's workload.log; torchrun's own output goes to RUN_DIR/workload.log.
Progress events carry their rank: rank 0's drive the display (the ranks run the same iterations).

When torchrun returns, each rank's folder is analysed on its own (its profile.json written there),
and node 0 assembles RUN_DIR/profile.json: rank 0's profile with the cluster summary
(analysis/cluster.py) and the cluster's throughput. Another machine's parent (--node-rank > 0)
writes its own ranks' profiles; its ranks hand their records to rank 0 over the process group.

Failures: a rank that exits or stops responding ends the run (torchrun stops the others); the
error names the rank, its exit code, the stage it was in and its log, and the records of every rank
are kept, their profiles marked partial. A rendezvous that does not form within --rdzv-timeout
ends with one line saying how many machines joined.
"""

from __future__ import annotations

import re
import shutil
import socket
from dataclasses import dataclass, replace
from pathlib import Path

from tbd.cli.cluster_analysis import SCALING_FAILED, rank_numbers
from tbd.cli.frameworks import runtime
from tbd.cli.orchestrate import ChildExit, ProgressSink, RunOutcome, prepare_run_dir, profile_run, run_child
from tbd.cli.run_analysis import cluster_profile_from_run_dir
from tbd.cli.runner import EXIT_OK, child_command
from tbd.cli.signals import ForwardedSignals
from tbd.core import rundir
from tbd.core.errors import InterruptedRun, TbdError, UsageError, WorkloadError
from tbd.core.profile_result import PARTIAL
from tbd.core.records import RunSpec
from tbd.profilers.distributed import RANKS, rank_dir

#: torchrun's summary of a failed run names each failed rank and its exit code.
_FAILED_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
_ROOT_CAUSE = "Root Cause"
_RDZV_TIMEOUT = re.compile(r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined")
#: A collective that gave up waiting: Gloo says "Timed out waiting ..." or "Application timeout caused pair
#: closure", NCCL's watchdog "Watchdog caught collective operation timeout".
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
#: A collective that failed because another rank went away: it timed out, or its connection closed.
_PEER_LOST = re.compile(r"timed out|timeout|closed by peer|reset by peer|connection closed|broken pipe|"
                        r"communicator was aborted", re.IGNORECASE)
_TORCHRUN_MAIN = "import sys; del sys.path[0]; from torch.distributed.run import main; sys.exit(main())"


def free_port() -> int:
    """A TCP port free on this machine now, for a one-machine rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(spec: RunSpec, run_dir: Path, endpoint: str) -> list[str]:
    """torchrun over `spec.nproc_per_node` runner children on `run_dir`; static rendezvous at `endpoint`.

    Run as `python -c` with the working directory dropped from sys.path, like the runner child
    itself (a user's folder holding `torch/` must not shadow the installed one); no restarts (a
    profile of a run that restarted would mix two runs).
    """
    python = runtime(spec.framework).python
    return [python, "-c", _TORCHRUN_MAIN, f"--nproc-per-node={spec.nproc_per_node}", f"--nnodes={spec.nnodes}",
            f"--node-rank={spec.node_rank}", "--rdzv-backend=static", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-conf=timeout={max(1, round(spec.rdzv_timeout_s))}", "--max-restarts=0",
            "--no-python", *child_command(python, run_dir.resolve())]


def check_spec(spec: RunSpec) -> None:
    """The multi-process options' own consistency (UsageError naming the option)."""
    if spec.framework != "pytorch":
        raise UsageError(f"--nproc-per-node runs on torch.distributed; {spec.framework} has no such launcher here",
                         hint="use --framework pytorch, or drop --nproc-per-node")
    if spec.nnodes > 1 and not spec.rdzv_endpoint:
        raise UsageError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT (node 0's address, the same on every "
                         "machine)", hint="e.g. --rdzv-endpoint 10.0.0.1:29500")
    if not 0 <= spec.node_rank < spec.nnodes:
        raise UsageError(f"--node-rank {spec.node_rank} is not one of 0..{spec.nnodes - 1}",
                         hint="number the machines 0 to --nnodes minus 1; node 0 hosts the rendezvous")
    if spec.rdzv_endpoint:
        host, _, port = spec.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--rdzv-endpoint {spec.rdzv_endpoint!r} is not HOST:PORT", hint="e.g. 10.0.0.1:29500")


@dataclass
class _RankWatch:
    """Progress events of every rank: rank 0's go on to the display; each rank's last is kept."""

    sink: ProgressSink
    last: dict[int, dict]

    def __call__(self, event: dict) -> None:
        rank = event.get("rank", 0)
        if isinstance(rank, int):
            self.last[rank] = event
        if rank == 0:
            self.sink({k: v for k, v in event.items() if k != "rank"})


def _say(progress: ProgressSink, line: str) -> None:
    say = getattr(progress, "say", None)
    if say is not None:
        say(line)


def profile_distributed(spec: RunSpec, run_dir: Path, progress: ProgressSink, *, force: bool = False,
                        scaling: bool = False) -> RunOutcome:
    """Run `spec` over its ranks under torchrun; on node 0 write RUN_DIR/profile.json with the cluster.

    `scaling`: first the same model on 1, 2, ..., N-1 processes (RUN_DIR/scaling/pN; one process is a
    plain run), so the cluster summary gives each count's scaling efficiency. One machine only.
    """
    check_spec(spec)
    with prepare_run_dir(run_dir, force):  # locked for the whole job; its files listed however it ends
        if scaling:
            _scaling_points(spec, run_dir, progress)
        rundir.atomic_write_json(run_dir / rundir.SPEC, spec.to_dict())
        endpoint = spec.rdzv_endpoint or f"127.0.0.1:{free_port()}"
        watch = _RankWatch(progress, {})
        signals = ForwardedSignals()
        with signals.installed():
            child = run_child(run_dir, watch, signals, command=torchrun_command(spec, run_dir, endpoint))
            with signals.held():
                return _conclude(spec, run_dir, child, watch.last, signals)


def _scaling_points(spec: RunSpec, run_dir: Path, progress: ProgressSink) -> None:
    """The same model on 1 .. N-1 processes, each a run of its own in RUN_DIR/scaling/pN (its
    profile.json is what the cluster summary reads; a failed count is said there instead)."""
    for n in range(1, spec.nproc_per_node):
        out = run_dir / "scaling" / f"p{n}"
        _say(progress, f"scaling: {n} process{'es' if n > 1 else ''} ({out})")
        one = replace(spec, nproc_per_node=n)
        try:
            if n == 1:
                profile_run(one, out, lambda e: None, probe_oom=False)
            else:
                profile_distributed(one, out, lambda e: None)
        except InterruptedRun:
            raise
        except TbdError as exc:
            out.mkdir(parents=True, exist_ok=True)
            rundir.atomic_write_json(out / SCALING_FAILED, {"message": exc.one_line()})


def _conclude(spec: RunSpec, run_dir: Path, child: ChildExit, last: dict[int, dict],
              signals: ForwardedSignals) -> RunOutcome:
    log = _read_log(run_dir)
    ranks = rank_numbers(run_dir)
    if not ranks:
        if signals.received is not None:
            raise InterruptedRun("interrupted before any rank started; nothing was written",
                                 exit_code=signals.exit_code())
        raise _no_rank_started(spec, run_dir, child, log)
    statuses = {r: rundir.read_optional(rank_dir(run_dir, r), rundir.STATUS, f"rank {r} status") or {}
                for r in ranks}
    refused = next((s for s in statuses.values() if s.get("state") == "usage"), None)
    if refused is not None and signals.received is None:
        # The spec itself was refused (a rank's build(), the same on every rank): a usage error, as
        # in a single-process run, and nothing is kept.
        shutil.rmtree(run_dir, ignore_errors=True)
        raise UsageError(str(refused.get("message") or "a rank rejected the run spec"))
    complete = child.code == EXIT_OK and all(s.get("state") == "complete" for s in statuses.values())
    failure = None if complete or signals.received is not None else _failure(spec, run_dir, child, log, statuses,
                                                                               last)
    notes = [] if complete else [f"partial: {failure or f'interrupted by {signals.name()}'}"]
    profile = cluster_profile_from_run_dir(run_dir, status=None if complete else PARTIAL, extra_notes=notes,
                                           write_ranks=True)
    rundir.atomic_write_json(run_dir / rundir.PROFILE, profile.to_dict())
    if failure is not None:
        raise WorkloadError(f"{failure}; every rank's records are kept in {run_dir / RANKS}, marked partial",
                            hint="the rank's workload.log says why")
    return RunOutcome(profile, signals.exit_code() if signals.received else 0, run_dir)


def _read_log(run_dir: Path) -> str:
    try:
        return (run_dir / rundir.LOG).read_text(errors="replace")[-65536:]
    except OSError:
        return ""


def _no_rank_started(spec: RunSpec, run_dir: Path, child: ChildExit, log: str) -> TbdError:
    """No rank wrote anything: the rendezvous did not form, or torchrun itself failed."""
    found = _RDZV_TIMEOUT.search(log)
    unreached = "DistNetworkError" in log or "client socket has timed out" in log
    if found or unreached or "DistStoreError" in log or "rendezvous" in log.lower() and "timed out" in log.lower():
        joined = f": {found.group(2)} of {found.group(3)} machines joined" if found else \
            f": node 0 could not be reached there (torchrun's log: {run_dir / rundir.LOG})" if unreached else ""
        return WorkloadError(f"the rendezvous at {spec.rdzv_endpoint or 'this machine'} did not form within "
                             f"{spec.rdzv_timeout_s:g} s{joined}",
                             hint=f"start `tbd profile` with --node-rank 0..{spec.nnodes - 1} on every machine with "
                                  "the same --nnodes and --rdzv-endpoint (node 0's address), or raise --rdzv-timeout")
    last = next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "")
    return WorkloadError(f"torchrun exited with code {child.code} before any rank started, log at "
                         f"{run_dir / rundir.LOG}", hint=last[:200] or None)


def _failure(spec: RunSpec, run_dir: Path, child: ChildExit, log: str, statuses: dict[int, dict],
             last: dict[int, dict]) -> str:
    """Which rank ended the run, with its exit code, stage and log, in words."""
    codes = {int(r): int(c) for r, c in _FAILED_RANK.findall(log)}
    root_part = log[log.rfind(_ROOT_CAUSE):] if _ROOT_CAUSE in log else ""
    root = _FAILED_RANK.search(root_part)
    # A rank that lost a peer (gave up waiting for it, or saw its connection close) is a victim; the
    # culprit is a failed rank that is not. torchrun's "Root Cause" is only the first exit it saw,
    # which can be a victim when both exit within one of its polls.
    lost = {r for r, s in statuses.items() if s.get("state") == "crash" and _PEER_LOST.search(str(s.get("message")))}
    failed = sorted({r for r, s in statuses.items() if s.get("state") != "complete"} | set(codes))
    culprits = [r for r in failed if r not in lost]
    waited = any(_TIMED_OUT.search(str(statuses[r].get("message"))) for r in lost)
    if waited and culprits:
        r = min(culprits, key=lambda k: (last.get(k, {}).get("done") or 0, k))
        where = _where(statuses.get(r, {}), last.get(r))
        return (f"rank {r} stopped responding{where}: the other ranks waited {spec.rank_timeout_s:g} s "
                f"(--rank-timeout) in a collective and gave up; log at {rank_dir(run_dir, r) / rundir.LOG}")
    # Among the culprits, one that wrote no status died outright (it could not say why): it comes first.
    r = min(culprits, key=lambda k: (bool(statuses.get(k)), k)) if culprits else \
        int(root.group(1)) if root else (failed[0] if failed else None)
    if r is None:
        return f"torchrun exited with code {child.code}, log at {run_dir / rundir.LOG}"
    code = codes.get(r)
    said = f"exited with code {code}" if code is not None and code >= 0 else \
        f"was killed by signal {-code}" if code is not None else "failed"
    message = str(statuses.get(r, {}).get("message") or "").splitlines()
    why = f" ({message[0][:160]})" if message and message[0] else ""
    return f"rank {r} {said}{_where(statuses.get(r, {}), last.get(r))}{why}; log at {rank_dir(run_dir, r) / rundir.LOG}"


def _where(status: dict, event: dict | None) -> str:
    stage = status.get("stage") or (event or {}).get("stage")
    done = (event or {}).get("done")
    if not stage:
        return ""
    return f" during {stage}" + (f" (iteration {done})" if isinstance(done, int) and stage == (event or {}).get(
        "stage") else "")
