"""Text from a trace or a profile made safe to print on a terminal, and the terminal's streams made safe to print on.

Kernel and op names, file names, GPU names and notes are data. A name holding an ANSI escape
("\\x1b[2J" clears the screen, "\\x1b]0;...\\x07" retitles the window), a NUL, a carriage return or
a bidirectional override would act on the user's terminal instead of being shown. Every renderer
passes such text through `printable` before it reaches rich; JSON output keeps the real name. A
name or note longer than `MAX_PRINTED_CHARS` is cut there and says its full length: a 300,000-character
model name is data, not a report.

The streams: `tbd` writes "·", "—", "…", "±", "µ" and box-drawing rules, which a stream encoded as
ASCII (`PYTHONIOENCODING=ascii`, a C locale without Python's UTF-8 coercion) or latin-1 cannot
carry. `prepare_streams`, called once when the command starts, gives stdout and stderr the error
handler `ASCII_TWIN_ERRORS`: a character the stream cannot encode is written as its ASCII twin
(`ASCII_TWINS`: "·" -> "-", "±" -> "+/-", box drawing -> "-", "|", "+"), a letter as its base
letter ("é" -> "e"), anything else from data as a backslash escape ("\\u4e2d"). So every writer,
rich included, degrades the same way; on a UTF-8 stream nothing changes. A closed stdout, stderr or
stdin (`tbd ... >&-`) is pointed at /dev/null first, so the command still runs to its end.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import sys
import unicodedata

#: Unicode categories that do something rather than show something: controls (C0, DEL, C1),
#: format characters (bidirectional overrides, zero-width joiners), surrogates, private use,
#: unassigned code points, and line/paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

#: The most characters of one name or note a terminal report prints; the rest is left out and the
#: full length said (the JSON output keeps every character).
MAX_PRINTED_CHARS = 2000


def printable(value, max_chars: int = MAX_PRINTED_CHARS) -> str:
    """`str(value)` with every control or format character shown as an escape (\\x1b, \\u202e), cut
    to `max_chars` characters (then ending "… [N characters]") when longer.

    Fast path: text that is already printable and short (almost every name) is returned as is.
    """
    text = value if isinstance(value, str) else str(value)
    cut = ""
    if len(text) > max_chars:
        cut = f"… [{len(text):,} characters]"
        text = text[:max_chars]
    if text.isprintable():
        return text + cut
    return "".join(_escaped(ch) for ch in text) + cut


def _escaped(ch: str) -> str:
    if ch.isprintable() or unicodedata.category(ch) not in _HIDDEN:
        return ch  # printable, or a space other than " " (isprintable refuses those)
    return _backslashed(ch)


def _backslashed(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


#: The characters tbd's own text uses, as ASCII for a stream that cannot encode them.
ASCII_TWINS = {
    "·": "-", "—": "--", "–": "-", "…": "...", "±": "+/-", "µ": "u", "μ": "u", "×": "x", "→": "->",
    "←": "<-", "↑": "^", "↓": "v", "⚠": "!", "≥": ">=", "≤": "<=", "≈": "~", "≠": "!=", "Σ": "sum",
    "Δ": "delta", "§": "S", "∩": "&", "∪": "|", "•": "*", "✓": "ok", "✗": "x", "°": "deg", "‰": "o/oo",
    "‘": "'", "’": "'", "“": '"', "”": '"', "\u00a0": " ", "\u2009": " ", "\u202f": " ",
}

#: The name of the codec error handler `prepare_streams` installs on stdout and stderr.
ASCII_TWIN_ERRORS = "tbd-ascii-twin"

#: A table's gap between columns: where a wider twin takes its extra columns back, so the columns after it
#: stay where rich put them.
_GAP = re.compile(r"( {2,})")


@functools.lru_cache(maxsize=4096)
def ascii_twin(ch: str) -> str:
    """The ASCII text standing in for `ch` on a stream that cannot encode it.

    A symbol of `ASCII_TWINS`; a box-drawing character as "-", "|", "=" or "+" by its Unicode name;
    a block element as "#"; a letter with marks as its base letters ("é" -> "e"); anything else as a
    backslash escape ("\\u4e2d"), so a name from data stays unambiguous.
    """
    twin = ASCII_TWINS.get(ch)
    if twin is not None:
        return twin
    code = ord(ch)
    if 0x2500 <= code <= 0x257F:
        name = unicodedata.name(ch, "")
        across, down = "HORIZONTAL" in name, "VERTICAL" in name
        if "DASH" in name or (across and not down):
            return "=" if "DOUBLE" in name else "-"
        return "|" if down and not across else "+"
    if 0x2580 <= code <= 0x259F:
        return "#"
    if code < 0xD800 or code > 0xDFFF:
        base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
        if base and base.isprintable():
            return base
    return _backslashed(ch)


@functools.lru_cache(maxsize=4096)
def _encodable(ch: str, encoding: str) -> bool:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def encodable_text(text: str, encoding: str) -> str:
    """`text` with each character `encoding` cannot encode written as its `ascii_twin`; where the twins make a
    line wider, the extra columns come out of the line's next gaps of two or more spaces (keeping one
    space each), so a table's later columns stay aligned. One pass over the text."""
    return "".join(_encodable_line(line, encoding) for line in text.splitlines(keepends=True))


def _encodable_line(line: str, encoding: str) -> str:
    if line.isascii():
        return line
    out, owed = [], 0
    for k, piece in enumerate(_GAP.split(line)):
        if k % 2:  # a gap
            drop = min(owed, len(piece) - 1)
            owed -= drop
            out.append(piece[drop:])
        elif piece.isascii():
            out.append(piece)
        else:
            twins = "".join(ch if ch.isascii() or _encodable(ch, encoding) else ascii_twin(ch) for ch in piece)
            owed += len(twins) - len(piece)
            out.append(twins)
    return "".join(out)


def _twin_error_handler(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler `ASCII_TWIN_ERRORS`: from the first character the stream cannot encode to the
    end of what is being written, `encodable_text` (called once per write, not once per character)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # The table codecs (cp1252, cp437, koi8_r, ...) all report themselves as "charmap": which characters they
    # hold is then unknown here, so every non-ASCII character after this one gets its twin.
    encoding = "ascii" if exc.encoding == "charmap" else exc.encoding
    return encodable_text(exc.object[exc.start:], encoding), len(exc.object)


def register_ascii_twins() -> None:
    """Make the codec error handler `ASCII_TWIN_ERRORS` known (idempotent): any text stream may then name it."""
    codecs.register_error(ASCII_TWIN_ERRORS, _twin_error_handler)


def prepare_streams() -> None:
    """Make stdin, stdout and stderr safe for the rest of the command; called once, when `tbd` starts.

    A closed descriptor 0, 1 or 2 is opened on /dev/null (else the next file tbd opens would take its
    number and a child's output would land in it), and a missing sys.stdout or sys.stderr becomes a
    writer to /dev/null: the command runs to its end and exits with its own code. Both streams get
    the `ASCII_TWIN_ERRORS` error handler, so text the stream's encoding cannot carry is written as
    ASCII (see the module's docstring) instead of raising UnicodeEncodeError.
    """
    register_ascii_twins()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8", errors=ASCII_TWIN_ERRORS))  # noqa: SIM115
        elif hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=ASCII_TWIN_ERRORS)
            except (ValueError, OSError):  # a stream already closed: leave it, writes to it are caught where made
                pass
