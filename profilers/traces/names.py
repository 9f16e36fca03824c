"""Names as trace files write them, made safe to keep: a bounded length and encodable text.

Trace readers run `clean_name` once per distinct name (names are interned), never per event:

- at most `MAX_NAME_CHARS` characters: a longer name keeps its head and tail around an ellipsis.
  Real kernel and op names stay below ~2,000 characters (long C++ template instantiations); a
  50 MB name only makes every table, note and JSON file that repeats it that large;
- no lone UTF-16 surrogates: JSON's "\\ud800" escape decodes (in Python's json) to a string that
  cannot be encoded as UTF-8, so printing or writing it would fail later; each becomes U+FFFD.

Control characters stay: JSON output keeps the real name, and the terminal renderers escape them
(`reports.printable`). `quoted` shortens any value for a one-line error message.
"""

from __future__ import annotations

MAX_NAME_CHARS = 4096
ELLIPSIS = "…"
_REPLACEMENT = "\ufffd"


def clean_name(name: str) -> str:
    """`name` bounded to MAX_NAME_CHARS (head and tail kept) with lone surrogates replaced."""
    if len(name) > MAX_NAME_CHARS:
        tail = (MAX_NAME_CHARS - 1) // 4
        name = name[:MAX_NAME_CHARS - 1 - tail] + ELLIPSIS + name[-tail:]
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        name = "".join(_REPLACEMENT if "\ud800" <= ch <= "\udfff" else ch for ch in name)
    return name


def quoted(value, limit: int = 60) -> str:
    """repr of `value` for an error message, at most about `limit` characters."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[:limit] + ELLIPSIS
    return repr(clean_name(text)) if isinstance(value, str) else clean_name(text)
