"""Expected failures. `tbd.cli.main` prints their message on one line and exits non-zero."""

from __future__ import annotations


class TbdError(Exception):
    """Base of every failure tbd expects; the message is shown to the user as is."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        """The message and hint on a single line, as the CLI prints it."""
        text = str(self)
        return f"{text} (hint: {self.hint})" if self.hint else text


class UsageError(TbdError):
    """Unknown model, framework, device or option value."""


class FrameworkMissingError(TbdError):
    """The requested framework is not importable in the interpreter that would run it."""


class OutOfMemoryError(TbdError):
    """The workload ran out of memory at the requested batch size."""

    exit_code = 3


class WorkloadError(TbdError):
    """The workload child process crashed."""

    exit_code = 4


class TraceFormatError(TbdError):
    """A trace file is corrupt, truncated, or not a format tbd reads."""


class ResultFormatError(TbdError):
    """A profile.json or run directory is malformed or of an unknown schema."""


class InterruptedRun(TbdError):
    """The user pressed Ctrl-C (or sent SIGTERM); what was gathered is kept and marked partial."""

    exit_code = 130

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 130):
        super().__init__(message, hint)
        self.exit_code = exit_code  # 130 for SIGINT, 143 for SIGTERM


class DiskFullError(TbdError):
    """The device ran out of space while tbd wrote results; what was written is kept and named."""

    exit_code = 5
