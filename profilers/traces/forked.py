"""One call run in a forked child process while the caller goes on: how a trace reader uses a
second core for the second half of a large trace.

The child is a fork, so it starts with the caller's modules, objects and memory (copy on write:
the text of a gzip trace already inflated is shared, not copied) and pays no interpreter start.
Its return value comes back pickled through a pipe. Anything that goes wrong in the child (an
exception, Ctrl-C, a crash, a result that cannot be pickled) comes back as `ChildFailed`, and the
caller does the work itself: a second process only ever saves time, never decides a result.

Forking is only safe where the caller runs no other thread (a thread holding a lock at the fork
leaves it held forever in the child): `available()` says when it may be used.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any

#: Set to 0 to keep every trace reading in one process (a benchmark's single-process figure, a
#: machine where forking is unwelcome).
ENV_SWITCH = "TBD_TRACE_PROCESSES"


class ChildFailed(Exception):
    """The child did not return a result (its exception, in a line, is the message)."""


def available() -> bool:
    """Whether a forked child can run beside the caller on a core of its own: Linux or another POSIX
    system with fork, at least two CPUs this process may use, no other thread running, and not
    switched off (TBD_TRACE_PROCESSES=0 or 1)."""
    if os.environ.get(ENV_SWITCH, "").strip() in ("0", "1") or not hasattr(os, "fork"):
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus >= 2 and threading.active_count() == 1


class Child:
    """`call(*args)` running in a forked child; `result()` waits for its return value."""

    def __init__(self, call: Callable[..., Any], *args: Any):
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the caller's code
            os.close(read_end)
            _serve(write_end, call, args)
        os.close(write_end)
        self._pipe = os.fdopen(read_end, "rb")

    def result(self) -> Any:
        """The call's return value. Raises ChildFailed when the child gave none."""
        try:
            payload = self._pipe.read()
        finally:
            self.close()
        try:
            status, value = pickle.loads(payload)
        except Exception:  # nothing or a torn pickle: the child died
            raise ChildFailed("the child process ended without a result") from None
        if status != "ok":
            raise ChildFailed(value)
        return value

    def close(self) -> None:
        """Stop the child if it still runs (the caller gave up: an error, Ctrl-C) and reap it."""
        if self.pid is None:
            return
        self._pipe.close()
        try:
            if os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None


def _serve(write_end: int, call: Callable[..., Any], args: tuple) -> None:
    """The child's whole life: run the call, write its pickled outcome, exit."""
    try:
        try:
            payload = pickle.dumps(("ok", call(*args)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller, which redoes the work
            payload = pickle.dumps(("failed", f"{type(exc).__name__}: {str(exc)[:200]}"))
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
    except BaseException:  # noqa: BLE001, S110 - the caller sees a missing result and redoes the work
        pass
    finally:
        os._exit(0)  # no exit handlers, no flush of the caller's buffered output: both are the caller's
