"""Text from a trace or a profile made safe to print on a terminal: control characters escaped.

Kernel and op names, file names, GPU names and notes are data. A name holding an ANSI escape
("\\x1b[2J" clears the screen, "\\x1b]0;...\\x07" retitles the window), a NUL, a carriage return or
a bidirectional override would act on the user's terminal instead of being shown. Every renderer
passes such text through `printable` before it reaches rich; JSON output keeps the real name.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories that do something rather than show something: controls (C0, DEL, C1),
#: format characters (bidirectional overrides, zero-width joiners), surrogates, private use,
#: unassigned code points, and line/paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def printable(value) -> str:
    """`str(value)` with every control or format character shown as an escape (\\x1b, \\u202e).

    Fast path: text that is already printable (almost every name) is returned as is.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(_escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    if ch.isprintable() or unicodedata.category(ch) not in _HIDDEN:
        return ch  # printable, or a space other than " " (isprintable refuses those)
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
