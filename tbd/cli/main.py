"""The `tbd` command: argument parsing and error handling only; each subcommand is a module."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import traceback

from tbd import __version__
from tbd.core.errors import TbdError, UsageError
from tbd.reports.printable import prepare_streams, printable

COMMANDS = {  # name -> what it does (its module, tbd.cli.commands.NAME, is imported when it runs)
    "profile": "run a suite workload and report throughput, utilization, memory and kernels",
    "kernels": "kernel drill-down: launch configuration, shapes, roofline, the two low-"
               "utilization rankings and their Nsight Compute commands",
    "analyze": "analyse a PyTorch/Kineto trace that another tool recorded, a folder of them, or a"
               " tbd run again",
    "compare": "runs or traces side by side: every figure with its ratio to the first, op-by-op "
               "time deltas, the peak ratio against the measured one",
    "sweep": "profile one workload at several batch sizes, or find the largest batch that fits",
    "train": "train a suite model on real data to a quality target, N runs, logged the MLPerf way"
             " (MLPerf result logs, DAWNBench entries): time to accuracy, term by term",
    "tta": "time to accuracy from MLPerf Training submissions and DAWNBench entries, systems side"
           " by side, scored as mlperf-logging's result_summarizer and DAWNBench's rules score "
           "them",
    "report": "render a saved profile, sweep, comparison or time-to-accuracy result again",
    "env": "show, per framework, whether it is usable, its version, interpreter and GPU",
    "suite": "list the suite's models x frameworks and which run on this machine",
    "gpus": "list the GPU table: peaks per precision, bandwidth, memory, with sources",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as tbd reports every error: one line, exit code 2.

    main() prints "tbd: error: " first, so the line names the subcommand only ("tbd: error: analyze:
    argument --top: ..."), never tbd twice.
    """

    def error(self, message: str):
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise UsageError(f"{command}: {message}" if command else message, hint=f"see `{self.prog} --help`")


def command_module(name: str):
    """The module of `tbd NAME` (tbd.cli.commands.NAME), imported when that command runs, as pip loads
    its commands: `tbd analyze` then loads none of the training, sweep and MLPerf code (~50 ms of every start)."""
    return importlib.import_module(f"tbd.cli.commands.{name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, the options of that command alone (the others listed by name)."""
    parser = _Parser(prog="tbd", description="Profile deep-learning training (the TBD suite).")
    parser.add_argument("--version", action="version", version=f"tbd {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            module = command_module(name)
            module.add_arguments(p)
            p.set_defaults(handler=module.run)
    return parser


def _command_named(argv: list[str]) -> str | None:
    """The command an argument list runs: its first word that is not an option (tbd's own options
    take no value); None when that word is no command (the whole parser then words the error)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    """Entry point: returns the exit code (0 ok, 2 usage, 3 OOM, 4 crash, 130 interrupted)."""
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(only=_command_named(words))
    debug = "--debug" in words
    try:
        args = parser.parse_args(argv)
        return args.handler(args)
    except TbdError as exc:
        if debug:
            traceback.print_exc()
        sys.stderr.write(f"tbd: error: {printable(exc.one_line())}\n")
        return exc.exit_code
    except OSError as exc:  # a path that cannot be written or read: say which, and why
        if debug:
            traceback.print_exc()
        sys.stderr.write(f"tbd: error: {printable(_os_error(exc))}\n")
        return 5 if exc.errno == errno.ENOSPC else 1
    except KeyboardInterrupt:
        sys.stderr.write("tbd: interrupted\n")
        return 130
    except BrokenPipeError:
        # `tbd ... | head` closed our stdout: not an error. Point stdout at devnull so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def console_main() -> None:
    """The `tbd` command (console script and `python -m tbd.cli`): main(), then exit with its code.

    The streams are made safe first (`prepare_streams`): a closed stdout or stderr goes to /dev/null,
    and text a stream's encoding cannot carry (ASCII, latin-1) is written as ASCII, never raised.
    Once the command has returned, its results are written: a Ctrl-C that arrives while the
    interpreter shuts down (a second one, pressed just as the partial profile was saved) is
    ignored, or Python would end the process by SIGINT and a 130 would become a signal death.
    """
    prepare_streams()
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return f"{where}no space left on the device (hint: free some space; files already written are kept)"
    return f"{where}{exc.strerror or exc}"


if __name__ == "__main__":
    console_main()
