"""Every CSV tbd writes, through one writer whose text cells a spreadsheet cannot run as formulas.

A kernel, op, model or file name is data, and a spreadsheet opening a CSV runs a cell that starts
with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK("http://…", "x")` becomes a live link, DDE
payloads run commands): CSV injection. As OWASP's "CSV Injection" page advises, such a text cell is
written with a single quote in front (`'=HYPERLINK(...)`), which a spreadsheet shows as text and
pandas reads back with the quote. A cell starting with TAB is quoted the same way (some
spreadsheets skip them before looking for the `=`), and so is one whose first character after
spaces is one of those, or its full-width form (`＝`, which some spreadsheets read as `=`).

A control character in a text cell (NUL, ESC, CR, LF, any C0 or C1 code but TAB) is written as its
backslash escape (`\\x00`, `\\r`, `\\n`): a NUL ends the row for many readers, an ESC acts on a
terminal that shows the file, and a CR there moves back over what the line showed. Every row is one
line.

Numbers stay numbers: a cell that is a finite number (`-1.5`, `+2`, `1e-05`, whether given as an
int/float or as its text) is written as is, so a negative delta is never turned into text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from typing import TextIO

#: First characters a spreadsheet reads as the start of a formula (OWASP), with their full-width forms.
FORMULA_STARTS = frozenset("=+-@\t\uff1d\uff0b\uff0d\uff20")
#: What makes a cell quoted (RFC 4180): a comma, a double quote, a CR or an LF.
_QUOTED = re.compile(r'[,"\r\n]')
#: A finite number as Python or a spreadsheet writes it (repr of a float or int). "-inf" and "nan" are no number to
#: a spreadsheet ("-inf" is read as a formula): they are quoted like any text.
#: C0 and C1 control characters but TAB, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_ESCAPES = {"\r": "\\r", "\n": "\\n"}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: object) -> object:
    """`value` as a CSV cell no spreadsheet runs: a text starting like a formula gets a leading `'`.

    Args: value: a cell (None, a bool, an int, a float or a text).
    Returns: None, a bool or an int as they are; a float as its repr; a text (or a float's repr) that is a finite
        number or does not start like a formula as it is; any other text with a `'` in front.
    """
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        value = repr(value)  # "-inf" is quoted below, a finite number is not
    text = value if isinstance(value, str) else str(value)
    text = _CONTROL.sub(lambda m: _ESCAPES.get(m.group(0)) or f"\\x{ord(m.group(0)):02x}", text)
    head = text.lstrip(" ")[:1] or text[:1]
    if not head or head not in FORMULA_STARTS or _NUMBER.fullmatch(text):
        return text
    return "'" + text


class SafeWriter:
    """A `csv.writer` ("\\n" line ends, minimal quoting) whose every cell goes through `safe_cell`.

    Written here rather than with the csv module: with "\\n" line ends, `csv.writer` leaves a cell holding a bare
    CR unquoted (Python 3.11), so a name with a CR in it split its row for every reader (pandas, `csv.reader`).
    Here a cell holding a comma, a quote, a CR or an LF is quoted (RFC 4180), the rest as `csv.writer` writes it.
    """

    def __init__(self, out: TextIO):
        self._out = out

    def writerow(self, row: Iterable[object]) -> None:
        """Write one row (None writes an empty cell)."""
        cells = [_field(safe_cell(c)) for c in row]
        self._out.write((",".join(cells) if cells != [""] else '""') + "\n")

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        """Write each row."""
        for row in rows:
            self.writerow(row)


def _field(cell: object) -> str:
    """One cell's CSV text: None empty, a float as its repr, a text quoted when it holds `,` `"` CR or LF."""
    text = "" if cell is None else repr(cell) if isinstance(cell, float) else str(cell)
    if _QUOTED.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A CSV document ("\\n" line ends): `header`, then each row, every cell through `safe_cell`.

    Args: header: the column names; rows: the rows, each as many cells as `header` (None writes an empty cell).
    Returns: the CSV text.
    """
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()
