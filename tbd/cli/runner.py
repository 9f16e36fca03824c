"""The runner child: `python -m tbd.cli.runner RUN_DIR` runs one workload and writes raw records.

Why a child process (docs/architecture.md): each framework pins its own native stack, memory is accounted
from a clean allocator, `nsys`/`ncu`/`torchrun` wrap a process, and an OOM or crash in the
workload is reported by the parent with everything gathered so far.

Protocol with the parent: RUN_DIR/spec.json in; raw records out (tbd/core/rundir.py); progress as JSON
lines on stdout; the outcome in raw/status.json; exit code 0 complete, 130 interrupted (SIGINT,
SIGTERM or SIGHUP: the stage's records are saved first; in the trace window, after the iteration under
way, with the trace of the iterations done), 3 out of memory, 2 usage error, 5 disk full, 1 crash
(traceback on stderr, which the parent keeps in workload.log). A parent that dies (its end of the
progress pipe closes) stops the run the same way: what was gathered is saved, marked partial.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tbd.cli import registry
from tbd.core import rundir
from tbd.core.errors import TbdError
from tbd.core.records import RunSpec
from tbd.profilers.distributed import place_from_env, rank_dir
from tbd.profilers.loop import LoopState

EXIT_OK, EXIT_CRASH, EXIT_USAGE, EXIT_OOM, EXIT_DISK_FULL, EXIT_INTERRUPTED = 0, 1, 2, 3, 5, 130

# `python -m` and `python -c` put the working directory first on sys.path: a user's folder holding
# its own `tbd/`, `numpy/` or `torch.py` would shadow the installed ones in the child. The child
# drops that entry before importing anything (`python -P` does the same, from Python 3.11 on only).
_SAFE_PATH_MAIN = "import sys; del sys.path[0]; from tbd.cli.runner import main; sys.exit(main())"


def child_command(python: str, run_dir: Path) -> list[str]:
    """The command line that runs the runner child on `run_dir` in interpreter `python`.

    The child imports tbd from that interpreter's installation (the framework venvs install tbd
    itself), never from the working directory.
    """
    return [python, "-c", _SAFE_PATH_MAIN, str(run_dir)]


class ParentGone(Exception):
    """The parent's end of the progress pipe closed: it died (SIGKILL, a crash) mid-run."""


_logged: dict[str, Any] = {"stage": None, "event": None, "rank": None}


def _progress(event: dict) -> None:
    _log_stage(event)
    if _logged["rank"] is not None:  # several ranks share torchrun's stdout: each event says whose it is
        event = {**event, "rank": _logged["rank"]}
    try:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: stdout already closed
        raise ParentGone from None


def _log_stage(event: dict) -> None:
    """One line per stage in workload.log (the child's stderr): when each ended, and the plan.

    Without it the log of a run that went well held only the framework's own chatter (nothing at all
    for MXNet), and one that hung gave no hint where.
    """
    stage = event.get("stage")
    now = time.strftime("%H:%M:%S")
    previous = _logged["event"]
    if stage == "plan":
        sys.stderr.write(f"tbd {now} plan: {json.dumps({k: v for k, v in event.items() if k != 'stage'})}\n")
    elif stage != _logged["stage"]:
        if previous is not None:
            sys.stderr.write(f"tbd {now} {previous['stage']} ended: {previous.get('done')} of "
                             f"{previous.get('total') or '-'} done\n")
        sys.stderr.write(f"tbd {now} {stage} started\n")
        _logged["stage"] = stage
    if stage != "plan":
        _logged["event"] = event
    sys.stderr.flush()


#: SIGINT (what the parent forwards first), SIGTERM (its second step, or a supervisor) and SIGHUP
#: (a hung-up session, when the child is sent one directly): each stops the run the same way.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupter(state: LoopState):
    """The handler of the stop signals: the first stops the run; later ones must not cut the saving short.

    Inside the trace window the first one asks the loop to stop after the iteration under way
    (`LoopState.stop_requested`), so the tracer is stopped between iterations and its trace of the
    iterations done is exported and kept; a second one there stops at once.
    """
    def handle(signum: int, frame) -> None:
        if state.stage == "trace" and not state.stop_requested:
            state.stop_requested = True
            return
        for s in _STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt
    return handle


def _status(run_dir: Path, state: str, stage: str, message: str = "") -> None:
    rundir.atomic_write_json(run_dir / rundir.STATUS, {"state": state, "stage": stage, "message": message})


def _capped(run_dir: Path, limit: int) -> bool:
    """Cap the address space at `limit` bytes (emulating a host with less memory: allocations beyond it
    fail like a real OOM); False, with the status written, when the OS refuses.

    Set once the framework is imported: what is mapped already counts against the cap all the same,
    but loading the framework's libraries under it can fail in the dynamic loader instead ("cannot
    allocate memory for thread-local data", exit 127, not an OOM), and only when Python must first
    compile tbd's modules (a fresh checkout), so the same run would fail or not by chance.
    """
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError) as exc:
        _status(run_dir, "usage", "setup", f"cannot cap the address space at {limit} bytes: {exc}")
        return False
    return True


def _own_rank_dir(run_dir: Path) -> Path:
    """Under torchrun, this rank's own RUN_DIR/ranks/rank-K (spec.json copied in, stderr sent to its
    workload.log, so a failing rank's log is its own); else `run_dir` itself."""
    place = place_from_env()
    if place is None:
        return run_dir
    own = rank_dir(run_dir, place.rank)
    own.mkdir(parents=True, exist_ok=True)
    rundir.atomic_write_bytes(own / rundir.SPEC, (run_dir / rundir.SPEC).read_bytes())
    log = os.open(own / rundir.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stderr.flush()
    os.dup2(log, sys.stderr.fileno())
    os.close(log)
    _logged["rank"] = place.rank
    return own


def run(run_dir: Path) -> int:
    """Run the spec in `run_dir`; returns the exit code."""
    root, run_dir = run_dir, _own_rank_dir(run_dir)
    spec = RunSpec.from_dict(rundir.read_json(run_dir / rundir.SPEC, "run spec"))
    state = LoopState()
    for s in _STOP_SIGNALS:
        signal.signal(s, _interrupter(state))
    hook = None
    try:
        # One framework per child: tbd.profilers.<framework> drives the workload and writes raw records.
        # Imported here, not at the top: each child imports the one framework its spec names.
        hook = importlib.import_module(f"tbd.profilers.{spec.framework}.hook")
        if spec.memory_limit_bytes and not _capped(run_dir, spec.memory_limit_bytes):
            return EXIT_USAGE
        hook.HOOK.run(spec, run_dir, state, _progress,
                      load_build=lambda: registry.load_builder(spec.model, spec.framework))
    except KeyboardInterrupt:
        _save_partial(run_dir, state, "interrupted", f"interrupted by the user during {state.stage}")
        return EXIT_INTERRUPTED
    except ParentGone:
        _leave_stdout()
        _save_partial(run_dir, state, "interrupted", f"the tbd parent process exited during {state.stage}")
        return EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno == errno.ENOMEM or _thread_refused_under_cap(exc, spec):  # e.g. a lazy import under the cap
            _save_partial(run_dir, state, "oom", f"out of memory during {state.stage}: {exc}")
            return EXIT_OOM
        if exc.errno != errno.ENOSPC:
            return _crash(run_dir, state, exc)
        with contextlib.suppress(OSError):  # the disk may have no room for this either
            _save_partial(run_dir, state, "disk_full", f"no space left on the device during {state.stage}: {exc}")
        return EXIT_DISK_FULL
    except TbdError as exc:
        _save_partial(run_dir, state, "usage", exc.one_line())
        return EXIT_USAGE
    except BaseException as exc:  # noqa: BLE001 - the parent reports every failure; keep what ran
        if hook is not None and (hook.is_out_of_memory(exc) or _thread_refused_under_cap(exc, spec)):
            said = (str(exc).splitlines() or [type(exc).__name__])[0]  # a bare MemoryError says nothing
            _save_partial(run_dir, state, "oom", f"out of memory during {state.stage}: {said}")
            return EXIT_OOM
        return _crash(run_dir, state, exc)
    _log_stage({"stage": "done"})
    _status(run_dir, "complete", state.stage)
    try:
        hook.HOOK.finish(root, run_dir)
    except Exception as exc:  # noqa: BLE001 - the rank's own records are complete; say what failed after
        traceback.print_exc()
        _status(run_dir, "crash", "gather", f"{type(exc).__name__} while handing the records to rank 0: {exc}")
        return EXIT_CRASH
    return EXIT_OK


def _thread_refused_under_cap(exc: BaseException, spec: RunSpec) -> bool:
    """Under --memory-limit-gib, a native refusal that is memory running out: a thread that cannot
    start (its stack, 8 MiB of address space, no longer fits under the cap: "Resource temporarily
    unavailable", EAGAIN from pthread_create), or oneDNN failing to build a convolution ("could not
    create a primitive": its scratch buffers did not fit), each instead of an allocation error (both
    seen near a sweep's largest batch)."""
    if not spec.memory_limit_bytes:
        return False
    text = str(exc)
    return (getattr(exc, "errno", None) == errno.EAGAIN or "Resource temporarily unavailable" in text
            or "could not create a primitive" in text)


def _crash(run_dir: Path, state: LoopState, exc: BaseException) -> int:
    traceback.print_exc()
    _save_partial(run_dir, state, "crash", f"{type(exc).__name__} during {state.stage}: {exc}")
    return EXIT_CRASH


def _leave_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush must not fail on the closed pipe."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _save_partial(run_dir: Path, state: LoopState, kind: str, message: str) -> None:
    if state.times_ns:
        rundir.write_iterations(run_dir, state.iteration_log(), state.notes)
    _status(run_dir, kind, state.stage, message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write("usage: python -m tbd.cli.runner RUN_DIR\n")
        return EXIT_USAGE
    # The parent forwards Ctrl-C, SIGTERM and SIGHUP as SIGINT; each stops the run once (run() installs
    # the handler with its loop state; until then a signal stops the child before anything is gathered).
    before_run = LoopState(stage="setup")
    for s in _STOP_SIGNALS:
        signal.signal(s, _interrupter(before_run))
    return run(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
