"""A folder tbd writes into is tbd's alone: an ownership marker, a lock, and a --force that removes only tbd's files.

When tbd makes a run, sweep or train directory (`claim_dir`), it first takes an exclusive
`fcntl.flock` on RUN_DIR/.tbd-lock, held by the parent `tbd` process for the whole run (the kernel
releases it if that process dies), and writes RUN_DIR/.tbd-run.json: the kind, a run id, host, pid,
start time and tbd version. When the run ends (finished, failed or interrupted: `DirClaim.release`,
a `finally`), the marker gets the list of every entry in the folder: the folder was empty (or emptied)
and locked when the run began, so what is inside then is tbd's. A second tbd on the same folder fails
in one line naming who holds the lock (pid, host, since when).

`--force` removes only what a finished marker lists (files, links: unlinked, never followed; folders
tbd created; a nested run's folder by its own marker), and refuses BEFORE deleting anything when the
folder holds anything else, has no marker (a folder holding spec.json but written by someone else, or
by a tbd from before markers), or a marker whose run never listed its files (its parent was killed
outright: tbd cannot tell its files from a user's, so it touches none).

Paths holding control or format characters (ESC, newline, a right-to-left override) are refused up
front (`refuse_control_characters`): Kineto writes the path unescaped into the trace, and a terminal
would act on them.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import stat
import time
import unicodedata
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tbd.core import rundir
from tbd.core.errors import ResultFormatError, UsageError

MARKER = ".tbd-run.json"
LOCK = ".tbd-lock"
SCHEMA = "tbd.run_ownership/1"
RUNNING = "running"
FINISHED = "finished"
#: A marker listing more entries than this is not read (and a folder holding more is not listed):
#: --force then refuses, as for a run that never listed its files.
MAX_ENTRIES = 200_000
_MAX_MARKER_BYTES = 64 << 20
_MAX_HOLDER_BYTES = 4096
_SHOWN = 3  # foreign entries named in a refusal


def refuse_control_characters(path: str | os.PathLike, what: str) -> None:
    """UsageError when `path` holds a control (Cc), format (Cf) or lone-surrogate (Cs: bytes that
    are not UTF-8) character; `what` names the option ("--out")."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    bad = [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs")]
    if bad:
        shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in bad})[:_SHOWN])
        raise UsageError(f"{what} {ascii(text)} holds a control character ({shown})",
                         hint="give a path of printable characters (tbd writes it into traces and onto the terminal)")


class DirClaim:
    """A folder tbd holds for one run: the open lock file (the flock) and the marker to complete.

    Use as a context manager (`with claim_dir(...) as claim:`); leaving it lists the folder's entries
    in the marker and releases the lock, whether the run finished, failed or was interrupted.
    """

    def __init__(self, path: Path, fd: int, marker: dict) -> None:
        self.path = path
        self._fd: int | None = fd
        self._marker = marker

    def moved(self, path: Path) -> None:
        """The folder was renamed to `path` (the lock file moved with it)."""
        self.path = path

    def release(self) -> None:
        """List the folder's entries in its marker (if the folder is still there) and release the lock."""
        if self._fd is None:
            return
        try:
            if self.path.is_dir() and (self.path / LOCK).exists():
                listing = _listing(self.path)
                done = {**self._marker, "finished": _now(), "state": FINISHED if listing else RUNNING}
                rundir.atomic_write_json(self.path / MARKER, {**done, **(listing or {})})
        except OSError:
            pass  # a folder that cannot be listed stays "running": --force will refuse it, the safe side
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "DirClaim":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a claim dropped without release: unlock, leave the marker "running"
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def claim_dir(out: Path, *, force: bool, kind: str, version: str, legacy: str | None = None) -> DirClaim:
    """Create (or, with `force`, empty of tbd's own files) `out` for a new `kind` ("run", "sweep",
    "train directory"), locked and marked as tbd's until the returned claim is released.

    Args:
        out: the folder. force: replace a previous tbd `kind` there (only its listed files).
        kind: said in messages and kept in the marker. version: tbd's, kept in the marker.
        legacy: the file a `kind` folder always holds (spec.json, sweep.json), to say why a folder
            holding it but no marker is refused.
    Raises:
        UsageError: a control character in the path; `out` is a file; its lock is held (the holder
            named); it is not empty and `force` is off; with `force`, it holds anything tbd did not
            write (up to 3 entries named), no marker, or a marker whose run never listed its files.
    """
    refuse_control_characters(out, "--out")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder", hint=f"give a folder path for the {kind} directory")
    if out.is_dir() and _entries(out) - {LOCK} and not (out / LOCK).exists() and not _lexists(out / MARKER):
        _refuse_not_empty(out, force, kind, legacy)  # not tbd's: refused before writing anything there
    out.mkdir(parents=True, exist_ok=True)
    fd = _lock(out, kind)
    try:
        if _entries(out) - {LOCK}:
            if not force:
                _refuse_not_empty(out, False, kind, legacy)
            _remove_owned(out, kind, legacy)
        marker = {"schema": SCHEMA, "kind": kind, "run_id": uuid.uuid4().hex, "host": socket.gethostname(),
                  "pid": os.getpid(), "started": _now(), "tbd_version": version, "state": RUNNING,
                  "finished": None, "files": None, "dirs": None, "runs": None}
        rundir.atomic_write_json(out / MARKER, marker)
    except BaseException:
        os.close(fd)
        raise
    return DirClaim(out, fd, marker)


def record_written(folder: Path, names: Iterable[str | os.PathLike]) -> None:
    """Add files tbd wrote later into a finished run or sweep folder (`tbd report --html`'s page) to
    its marker, so a later --force may replace them; nothing when the folder has no finished marker
    or is in use (the run holding it lists everything when it ends)."""
    try:
        marker = _read_marker(folder)
    except UsageError:
        return
    if marker is None or marker["state"] != FINISHED:
        return
    try:
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    try:
        files = set(marker["files"])
        dirs = set(marker["dirs"])
        for name in names:
            rel = Path(os.path.relpath(Path(name).absolute(), folder.absolute()))
            if rel.parts and rel.parts[0] != os.pardir and not rel.is_absolute():
                files.add(rel.as_posix())
                dirs.update(p.as_posix() for p in rel.parents if p.parts)
        rundir.atomic_write_json(folder / MARKER, {**marker, "files": sorted(files), "dirs": sorted(dirs)})
    except OSError:
        pass  # the page is written; --force will name it as not tbd's, the safe side
    finally:
        os.close(fd)


# --- the lock ------------------------------------------------------------------------------------


def _lock(out: Path, kind: str) -> int:
    """An fd holding the exclusive flock on OUT/.tbd-lock, its holder (pid, host, since) written in it."""
    try:
        fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot lock {out / LOCK}: {exc.strerror or exc}",
                         hint=f"check that the {kind} directory is writable, or choose another --out") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{out / LOCK} is not a regular file", hint="choose another --out")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UsageError(f"cannot lock {out / LOCK}: {exc.strerror or exc}",
                                 hint="choose another --out (a file system without locks?)") from None
            raise UsageError(f"{kind} directory {out} is in use by {_holder(fd)}",
                             hint="wait for that run to end, or choose another --out") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote in the lock file ("tbd pid 123 on host, since ...")."""
    for _ in range(20):  # the holder writes itself just after taking the lock
        try:
            info = json.loads(os.pread(fd, _MAX_HOLDER_BYTES, 0) or b"null")
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and {"pid", "host", "since"} <= info.keys():
            return (f"tbd pid {_plain(info['pid'])} on {_plain(info['host'])}, since {_plain(info['since'])}")
        time.sleep(0.01)
    return "another tbd process (it has not said which yet)"


def _plain(value: Any) -> str:
    """A value from a file shown in one line: printable, short."""
    text = str(value)[:80]
    return "".join(c if c.isprintable() else "?" for c in text)


# --- what --force may remove ---------------------------------------------------------------------


def _refuse_not_empty(out: Path, force: bool, kind: str, legacy: str | None) -> None:
    if not force:
        raise UsageError(f"output directory {out} is not empty",
                         hint=f"choose another --out, or --force to replace a previous {kind} there")
    why = f"holds {legacy} but no tbd ownership marker ({MARKER})" if legacy and _lexists(out / legacy) \
        else f"holds no tbd {kind} (no {MARKER})"
    raise UsageError(f"output directory {out} is not empty and {why}",
                     hint=f"choose another --out; --force only replaces what a previous tbd {kind} wrote there")


def _remove_owned(out: Path, kind: str, legacy: str | None) -> None:
    """Remove every entry of `out` its finished marker lists (nested runs by their own markers), after
    checking that nothing else is there; UsageError before anything is removed otherwise."""
    plan: list[tuple[Path, bool]] = []  # (path, is a folder), in removal order
    locks: list[int] = []
    try:
        _plan_removal(out, Path(), kind, legacy, plan, locks)
        for path, is_dir in plan:
            if is_dir:
                os.rmdir(path)
            else:
                os.unlink(path)
    except OSError as exc:
        raise UsageError(f"cannot empty {out}: {exc.strerror or exc} ({exc.filename})",
                         hint="remove it by hand, or choose another --out") from None
    finally:
        for fd in locks:
            os.close(fd)


def _plan_removal(out: Path, rel: Path, kind: str, legacy: str | None, plan: list[tuple[Path, bool]],
                  locks: list[int]) -> None:
    """Append to `plan` what removing the tbd folder `out` (nested at `rel` in the top one) takes."""
    marker = _read_marker(out)
    if marker is None:
        _refuse_not_empty(out, True, kind, legacy)
    if marker["state"] != FINISHED:
        raise UsageError(f"output directory {out} was left by a tbd {marker['kind']} that never finished "
                         f"(pid {_plain(marker['pid'])} on {_plain(marker['host'])}, started "
                         f"{_plain(marker['started'])}): tbd cannot tell its files from anyone else's",
                         hint="remove it yourself once nothing in it is yours, or choose another --out")
    files, dirs, runs = set(marker["files"]), set(marker["dirs"]), set(marker["runs"])
    foreign: list[str] = []
    nested: list[Path] = []
    removed_files: list[tuple[Path, bool]] = []
    removed_dirs: list[tuple[Path, bool]] = []
    pending = [Path()]
    while pending:
        here = pending.pop()
        for name in sorted(_entries(out / here)):
            sub = here / name
            key = sub.as_posix()
            if not here.parts and name == LOCK:
                continue  # the lock we (or the nested claim's remover) hold: removed with a nested run only
            if not here.parts and name == MARKER:
                continue
            info = os.lstat(out / sub)
            if stat.S_ISDIR(info.st_mode):
                if key in runs:
                    nested.append(sub)
                elif key in dirs:
                    pending.append(sub)
                    removed_dirs.append((out / sub, True))
                else:
                    foreign.append(key + "/")
            elif key in files:
                removed_files.append((out / sub, False))
            else:
                foreign.append(key)
    if foreign:
        prefix = rel.as_posix() + "/" if rel.parts else ""
        shown = ", ".join(_plain(prefix + f) for f in sorted(foreign)[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        top = out.parents[len(rel.parts) - 1] if rel.parts else out
        raise UsageError(f"--force refused: {top} holds what tbd did not write there: {shown}{more}; nothing was "
                         "removed", hint="move those out first, or choose another --out")
    for sub in nested:
        locks.append(_lock(out / sub, "nested run"))
        _plan_removal(out / sub, rel / sub, "run", None, plan, locks)
        plan.extend([(out / sub / MARKER, False), (out / sub / LOCK, False), (out / sub, True)])
    # Files first (anywhere in the plan: nested runs' come later), then folders, the deepest first.
    plan[:0] = removed_files
    plan.extend(sorted(removed_dirs, key=lambda r: len(r[0].parts), reverse=True))
    if not rel.parts:
        plan.append((out / MARKER, False))


def _listing(folder: Path) -> dict | None:
    """What the marker lists: "files" (anything not a folder, links included), "dirs" (folders), "runs"
    (folders holding their own marker, removed by it); None when the folder holds too many entries."""
    files: list[str] = []
    dirs: list[str] = []
    runs: list[str] = []
    pending = [Path()]
    while pending:
        here = pending.pop()
        for name in _entries(folder / here):
            sub = here / name
            if not here.parts and name in (MARKER, LOCK):
                continue
            if len(files) + len(dirs) + len(runs) >= MAX_ENTRIES:
                return None
            if stat.S_ISDIR(os.lstat(folder / sub).st_mode):
                if _lexists(folder / sub / MARKER) and _lexists(folder / sub / LOCK):
                    runs.append(sub.as_posix())
                else:
                    dirs.append(sub.as_posix())
                    pending.append(sub)
            else:
                files.append(sub.as_posix())
    return {"files": sorted(files), "dirs": sorted(dirs), "runs": sorted(runs)}


def _read_marker(folder: Path) -> dict | None:
    """The folder's marker, validated; None when it has none; UsageError when it is damaged."""
    path = folder / MARKER
    if not _lexists(path):
        return None
    hint = "remove the folder yourself once nothing in it is yours, or choose another --out"
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise UsageError(f"{path} is not a regular file: tbd did not write it", hint=hint)
    try:
        data = rundir.read_result_json(path, "tbd ownership marker", _MAX_MARKER_BYTES, hint)
    except ResultFormatError as exc:
        raise UsageError(str(exc), hint=hint) from None
    if not _valid_marker(data):
        raise UsageError(f"{path}: not a tbd ownership marker ({SCHEMA})", hint=hint)
    return data


def _valid_marker(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("state") not in (RUNNING, FINISHED):
        return False
    if not all(isinstance(data.get(k), (str, int)) for k in ("kind", "pid", "host", "started")):
        return False
    if data["state"] == RUNNING:
        return True
    lists = [data.get(k) for k in ("files", "dirs", "runs")]
    if not all(isinstance(v, list) for v in lists) or sum(len(v) for v in lists) > MAX_ENTRIES:
        return False
    return all(isinstance(p, str) and _relative(p) for v in lists for p in v)


def _relative(text: str) -> bool:
    """A path inside the folder: relative, no "..", no empty or "." part, no NUL."""
    parts = text.split("/")
    return bool(text) and "\0" not in text and all(p not in ("", ".", "..") for p in parts)


def _entries(folder: Path) -> set[str]:
    """The names in `folder` (never following a link to a folder outside it)."""
    with os.scandir(folder) as it:
        return {e.name for e in it}


def _lexists(path: Path) -> bool:
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
