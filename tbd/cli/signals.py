"""The user's SIGINT and SIGTERM, while `tbd profile` runs a child: recorded and passed on in steps.

While installed, the handlers never raise in the parent: a signal is recorded and, when a child
is running, forwarded to it, escalating with each repeat: the first as SIGINT (the child saves
what its stage gathered and exits), the second as SIGTERM, the third as SIGKILL. With no child
(the parent analysing what the child left), signals are only recorded, so profile.json is
always written; a third one then gives up and raises KeyboardInterrupt. The caller exits with
128 + the first signal's number (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from typing import Any, Callable, Iterator

_ESCALATION = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class ForwardedSignals:
    """SIGINT/SIGTERM received by this process, forwarded to the current child (see the module)."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal's number
        self.count = 0
        self.killed = False  # escalated to SIGKILL
        self._child: subprocess.Popen | None = None

    def exit_code(self) -> int:
        """128 + the first signal's number (130 for SIGINT, 143 for SIGTERM); 130 if none."""
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
        """Handle SIGINT and SIGTERM here (main thread only; elsewhere Python cannot set handlers)."""
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


@contextlib.contextmanager
def interrupt_handler(handle: Callable[[int, Any], None]) -> Iterator[None]:
    """`handle` for SIGINT and SIGTERM while inside, the previous handlers restored after; nothing
    changes off the main thread (Python sets signal handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
