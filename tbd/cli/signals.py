"""The user's SIGINT, SIGTERM and SIGHUP, while `tbd profile` runs a child: recorded and passed on in steps.

SIGHUP (the terminal or ssh session closed) is a SIGTERM in every respect but its exit code (129),
and once it came, the terminal is gone: the standard streams that were a terminal are pointed at
/dev/null, so the report printed after profile.json is written cannot fail on EIO.

While installed, the handlers never raise in the parent: a signal is recorded and, when a child
is running, forwarded to it, escalating with each repeat: the first as SIGINT (the child saves
what its stage gathered and exits), the second as SIGTERM, the third as SIGKILL. With no child
(the parent analysing what the child left), signals are only recorded, so profile.json is
always written; a third one then gives up and raises KeyboardInterrupt. The caller exits with
128 + the first signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import Any, Callable, Iterator

_ESCALATION = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal closed)"}
#: The signals that stop a run: the user's Ctrl-C, a supervisor's SIGTERM, a closed terminal's SIGHUP.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ForwardedSignals:
    """SIGINT/SIGTERM/SIGHUP received by this process, forwarded to the current child (see the module)."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal's number
        self.count = 0
        self.killed = False  # escalated to SIGKILL
        self._child: subprocess.Popen | None = None

    def exit_code(self) -> int:
        """128 + the first signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP); 130 if none."""
        return 128 + int(self.received or signal.SIGINT)

    def name(self) -> str:
        return _NAMES.get(self.received, f"signal {self.received}")

    def _handle(self, signum: int, frame) -> None:
        self.received = self.received or signum
        self.count += 1
        child = self._child
        if child is not None and child.poll() is None:
            sent = _ESCALATION[min(self.count, len(_ESCALATION)) - 1]
            self.killed = self.killed or sent == signal.SIGKILL
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sent)
        elif self.count >= len(_ESCALATION):
            raise KeyboardInterrupt  # nothing left to wait for: the user insists

    @contextlib.contextmanager
    def installed(self) -> Iterator["ForwardedSignals"]:
        """Handle SIGINT, SIGTERM and SIGHUP here (main thread only; elsewhere Python cannot set handlers)."""
        with interrupt_handler(self._handle):
            yield self

    @contextlib.contextmanager
    def target(self, child: subprocess.Popen) -> Iterator[None]:
        """Forward to `child` while it runs; a signal that came before it started is sent at once."""
        self._child = child
        try:
            if self.received is not None and child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGINT)
            yield
        finally:
            self._child = None

    @contextlib.contextmanager
    def forward_to(self, child: subprocess.Popen) -> Iterator[None]:
        """`installed()` and `target(child)` together, for a child run on its own."""
        with self.installed(), self.target(child):
            yield

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A stretch with no child (analysis, writing profile.json): signals are only recorded."""
        yield


def terminal_streams() -> tuple[int, ...]:
    """Which of stdin, stdout and stderr are a terminal, asked while it is alive (a hung-up one can
    no longer tell: isatty fails with EIO)."""
    return tuple(fd for fd in (0, 1, 2) if os.isatty(fd))


def leave_hung_up_terminal(fds: tuple[int, ...]) -> None:
    """Point `fds` (the streams that were a terminal) at /dev/null: after SIGHUP every write to the
    terminal fails (EIO), and the report printed after profile.json must not turn into a
    traceback. A stream redirected to a file or a pipe keeps its output."""
    for fd in fds:
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)


@contextlib.contextmanager
def interrupt_handler(handle: Callable[[int, Any], None]) -> Iterator[None]:
    """`handle` for SIGINT, SIGTERM and SIGHUP while inside (a SIGHUP first leaves the hung-up terminal),
    the previous handlers restored after; nothing changes off the main thread (Python sets signal
    handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    terminals = terminal_streams()

    def on_signal(signum: int, frame) -> None:
        if signum == signal.SIGHUP:
            leave_hung_up_terminal(terminals)
        handle(signum, frame)

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
