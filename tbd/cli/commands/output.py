"""What a command writes, declared once, checked once, written one way: the console and the output flags.

Every command's text goes to stdout through `write`, at `terminal_width`; progress and warnings
go to `stderr_console`. The output flags of `tbd report`, `kernels`, `compare`, `sweep` and
`analyze`: each command names the flags it has, in its own words (`add_output_arguments`): a
format printed instead of the terminal text (--json, --csv; `tbd report`'s --html, which writes a
page), the JSON also saved to a file (`tbd compare --out FILE`, `tbd analyze --json PATH`), a
folder (`tbd sweep --out DIR`, `tbd report --figures DIR`) and --force. Every file path given is
checked once, before any work (`check_outputs`): a folder where a file is wanted, or a file
already there without --force, is refused in one line. A rendered result leaves one way
(`write_output`): printed on stdout, or written to a path atomically by
tbd.reports.renderers.save. A sweep's folder is checked where it is made
(tbd.cli.sweep_run.prepare_sweep_dir, as a run directory's: orchestrate.prepare_out_dir).
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tbd.core.errors import UsageError
from tbd.core.run_ownership import refuse_control_characters
from tbd.reports.renderers import Renderer, refusal, save


def terminal_width() -> int:
    """The width the text is laid out at: the terminal's (COLUMNS first; 120 without a terminal), kept within
    80-160 columns. A COLUMNS that is no positive number is ignored by shutil, so any value lays out."""
    return max(80, min(shutil.get_terminal_size((120, 40)).columns, 160))


def write(text: str) -> None:
    """Print a command's text on stdout, flushed, as the stream's encoding allows (tbd.reports.printable).

    A reader that went away (`tbd ... | head`: BrokenPipeError) or a stdout closed under us (EBADF)
    is not an error of the command: the rest of its text goes to /dev/null and the command ends
    with its own exit code. Any other failure to write (a full disk behind `> file`) is raised.
    """
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EBADF:
            raise
        _silence_stdout()


def _silence_stdout() -> None:
    """Point descriptor 1 at /dev/null: what sys.stdout still holds, and the interpreter's last flush, go there."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno() if _has_fileno(sys.stdout) else 1)
    finally:
        os.close(null)


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def stderr_console() -> Console:
    """The console of progress lines and warnings: stderr, which prepare_streams made safe to write."""
    return Console(stderr=True)


#: The Namespace attribute holding a command's OutputFlags (set by add_output_arguments).
OUTPUTS = "output_flags"


@dataclass(frozen=True)
class SavedJson:
    """A flag that also saves the result's JSON to a file: `--out FILE` (compare), `--json PATH` (analyze)."""

    flag: str  # "--out", "--json"
    metavar: str  # "FILE", "PATH"
    help: str
    example: str  # the file name a "is a folder" refusal suggests: "compare.json"


@dataclass(frozen=True)
class FileFlag:
    """An output flag naming a file: checked by `check_outputs` before any work."""

    flag: str
    dest: str
    example: str  # the file name suggested when a folder is given
    inside: bool = False  # suggest the example inside the folder given (`--html runs/` -> runs/report.html)


@dataclass(frozen=True)
class OutputFlags:
    """What add_output_arguments declared: the formats printed instead of the text, and the file flags."""

    printed: tuple[str, ...]  # of "json", "csv", "html"
    files: tuple[FileFlag, ...]


def add_output_arguments(p: argparse.ArgumentParser, *, json: str | None = None, csv: str | None = None,
                         html: str | None = None, html_name: str = "report.html", save_json: SavedJson | None = None,
                         out_dir: str | None = None, figures: str | None = None, force: str | None = None) -> None:
    """Declare a command's output flags; each given text is that flag's --help, None leaves it out.

    Args:
        json, csv: `--json`, `--csv`: print that format instead of the terminal text (one of them,
            and --html, at a time).
        html: `--html [PATH]`: write the HTML page to PATH (checked), or where the command puts it
            by default; `html_name` is the file a folder given as PATH is told to hold.
        save_json: also save the JSON document to a file (`--out FILE`, `--json PATH`), checked.
        out_dir: `--out DIR`: the folder the command writes its files into (`tbd sweep`).
        figures: `--figures DIR`: also write the figures as SVG and PNG into DIR.
        force: `--force`: let a file (or a previous tbd folder) already there be replaced.
    """
    printed = tuple(fmt for fmt, text in (("json", json), ("csv", csv), ("html", html)) if text is not None)
    files: list[FileFlag] = []
    group = p.add_mutually_exclusive_group() if printed else None
    if json is not None:
        group.add_argument("--json", action="store_true", help=json)
    if csv is not None:
        group.add_argument("--csv", action="store_true", help=csv)
    if html is not None:
        group.add_argument("--html", nargs="?", const="", default=None, metavar="PATH", help=html)
        files.append(FileFlag("--html", "html", html_name, inside=True))
    if save_json is not None:
        dest = save_json.flag.lstrip("-").replace("-", "_")
        p.add_argument(save_json.flag, type=output_path, default=None, metavar=save_json.metavar, help=save_json.help)
        files.append(FileFlag(save_json.flag, dest, save_json.example))
    if out_dir is not None:
        p.add_argument("--out", type=output_path, default=None, help=out_dir)
    if figures is not None:
        p.add_argument("--figures", type=output_path, default=None, metavar="DIR", help=figures)
    if force is not None:
        p.add_argument("--force", action="store_true", help=force)
    p.set_defaults(**{OUTPUTS: OutputFlags(printed, tuple(files))})


def output_path(text: str) -> Path:
    """argparse `type` of every output path (--out, --figures, --json PATH): a Path, or the one-line
    refusal of a path holding a control character (ESC, newline: Kineto writes the path unescaped
    into the trace, and the terminal would act on it), before anything runs."""
    try:
        refuse_control_characters(text, "path")
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, every file an output flag names that cannot be written: see check_output_file;
    and a control character in --out DIR or --figures DIR. `--html` without a PATH writes tbd's own file
    beside the result: the command checks that one (check_output_file, the same rule) once it knows where."""
    flags: OutputFlags = getattr(args, OUTPUTS)
    for f in flags.files:
        given = getattr(args, f.dest)
        if given:
            check_output_file(f.flag, given, force=getattr(args, "force", False), example=f.example, inside=f.inside)
    for flag in ("--out", "--figures"):
        given = getattr(args, flag.lstrip("-"), None)
        if isinstance(given, (str, os.PathLike)):
            refuse_control_characters(given, flag)


def check_output_file(flag: str, given: str | os.PathLike, *, force: bool, example: str, inside: bool = False) -> Path:
    """`given` as the path of a file to write, or UsageError: it holds a control character, it is a
    folder ("--out X is a folder", hint: a file path, `example` or inside it `given/example`), or it
    exists and `force` is off ("--out X exists", hint: another path, or --force)."""
    refuse_control_characters(given, flag)
    path = Path(given)
    if path.is_dir():
        raise UsageError(f"{flag} {given} is a folder", hint=f"give a file path, e.g. {path / example if inside else example}")
    if path.exists() and not force:
        raise UsageError(f"{flag} {given} exists", hint="choose another path, or --force to replace it")
    return path


def printed_format(args: argparse.Namespace) -> str:
    """The format the command prints (or, for --html, writes) instead of the text: "json", "csv",
    "html", else "text"."""
    flags: OutputFlags = getattr(args, OUTPUTS)
    if "html" in flags.printed and args.html is not None:
        return "html"
    return next((fmt for fmt in flags.printed if fmt != "html" and getattr(args, fmt)), "text")


def write_output(renderer: Renderer, fmt: str, path: str | os.PathLike | None = None) -> list[Path]:
    """The result in `fmt`, printed on stdout (path None; the text at the terminal's width, coloured
    as stdout allows) or written to `path` atomically (a folder for "figures"). Returns the paths
    written. UsageError for a format the result's kind does not offer ("no CSV for a kernel ...")."""
    if not renderer.offers(fmt):
        raise UsageError(refusal(renderer, fmt))
    if path is not None:
        return save(renderer, fmt, path)
    if fmt == "figures":
        raise UsageError("figures are written to a folder, not printed", hint="give --figures DIR")
    write(renderer.text(width=terminal_width(), color=None) if fmt == "text" else str(renderer.render(fmt)))
    return []
