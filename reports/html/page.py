"""The pieces every HTML page is built from: the page shell, tables, cells, banners and inline figures.

A page is one self-contained file: the CSS is inline, figures are inline SVG, and nothing is
fetched (no CDN, no font, no script, no image from elsewhere), so it opens from a disk, an e-mail or
a CI artifact and reads the same with JavaScript off. Every text that comes from a record is
escaped here (`esc`): kernel names hold `<` and `>`, notes and paths may hold `&` or quotes.

Data cannot turn a page against its reader: besides the escaping, every page carries a
Content-Security-Policy (`CSP`) that runs no script at all (inline, handler or `javascript:` URL)
and fetches nothing, so a name that slipped past an escape would still do nothing. A page also
renders in bounded time whatever the record holds: one text is cut at `MAX_TEXT_CHARS` (its full
length said), a list at `MAX_LIST_ITEMS` and a table at `MAX_TABLE_ROWS`
(how many more said; the JSON and CSV keep everything).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tbd.reports.figures.saving import figure_svg
from tbd.reports.numbers import NA, fmt_count
from tbd.reports.printable import MAX_PRINTED_CHARS, printable
from tbd.reports.terminal import fmt_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: One light style for every page; DejaVu Sans first, the font every Debian image has, so a page
#: (and its screenshot) looks the same on every machine that has it.
CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #1d1d1f; background: #fff;
       margin: 0; }
main { max-width: 1200px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.sub { color: #555; margin: 2px 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; }
.banner { background: #b00020; color: #fff; font-weight: bold; padding: 8px 12px; margin: 8px 0;
          border-radius: 4px; }
.banner.warn { background: #8a5a00; }
div.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 4px; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.na { color: #b00020; }
tbody tr:nth-child(even) { background: #fafafa; }
tfoot td { border-top: 2px solid #ccc; font-weight: 600; }
th { white-space: nowrap; }
code { font: 12px "DejaVu Sans Mono", monospace; white-space: nowrap; }
details summary { cursor: pointer; white-space: nowrap; }
details > code { display: block; margin: 2px 0 4px; color: #444; white-space: normal; word-break: break-all;
                 max-width: 60ch; }
ul.notes li { margin: 2px 0; }
ul.lines { list-style: none; padding: 0; margin: 4px 0 8px; }
p.na { color: #b00020; }
p.caption { color: #555; font-size: 12px; margin: 2px 0 8px; }
figure { margin: 12px 0; }
figure svg { max-width: 100%; height: auto; }
"""
#: What a page may do: nothing but show itself. No script of any kind, no fetch, no form, no <base>; the CSS is
#: the inline <style> (and matplotlib's inline SVG styles), images only as data: URIs. A <meta> tag rather than a
#: header, since a page is opened from a file.
CSP = ("default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
       "base-uri 'none'; form-action 'none'")
#: The longest text one name, label, note or cell shows, cut as the terminal cuts ("… [300,000 characters]"); a
#: hostile name runs to millions of characters, and the JSON keeps every one. Four times the terminal's cut of one
#: field (`printable`'s default), so a line joining fields the renderers already cut (a title: model, framework,
#: device) is not cut again, and a templated C++ kernel name (a few thousand characters) unfolds whole.
MAX_TEXT_CHARS = 4 * MAX_PRINTED_CHARS
#: Notes or list lines shown per list.
MAX_LIST_ITEMS = 200
#: Body rows shown per table.
MAX_TABLE_ROWS = 500
_SVG_START = re.compile(r"<svg\b")
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_REFERENCE = re.compile(r'(url\(#|href="#)([^")]+)')


def esc(value) -> str:
    """`value` as HTML text: control characters shown as escapes and cut at `MAX_TEXT_CHARS` with its full length
    said (`printable`), then <, >, &, quotes escaped."""
    return html.escape(printable("" if value is None else value, MAX_TEXT_CHARS), quote=True)


def _more(shown: int, total: int, noun: str) -> str:
    """The line under a cut list or table: "… and 1,234 more lines not shown (the JSON and CSV output hold every
    one)"."""
    return f"… and {fmt_count(total - shown)} more {noun} not shown (the JSON and CSV output hold every one)"


@dataclass(frozen=True)
class Cell:
    """One table cell: its text (escaped on output unless `markup`), a tooltip, and a CSS class."""

    text: str
    title: str | None = None
    cls: str | None = None
    markup: bool = False  # `text` is HTML built here from escaped parts

    def html(self, tag: str = "td") -> str:
        attrs = (f' class="{self.cls}"' if self.cls else "") + (f' title="{esc(self.title)}"' if self.title else "")
        return f"<{tag}{attrs}>{self.text if self.markup else esc(self.text)}</{tag}>"


def num(text: str, title: str | None = None) -> Cell:
    """A right-aligned figure (already formatted)."""
    return Cell(text, title=title, cls="num")


def na_cell(reason: str | None) -> Cell:
    """A null figure: "n/a — reason"."""
    return Cell(f"{NA} — {printable(reason)}" if reason else NA, cls="na")


def maybe(text: str, value, reason: str | None) -> Cell:
    """`text` as a figure when `value` is known, else "n/a — reason"."""
    return na_cell(reason) if value is None else num(text)


def bytes_cell(value: int | None, reason: str | None = None) -> Cell:
    """Bytes in binary units, the exact count in the tooltip ("1.50 GiB", title "1,610,612,736 bytes")."""
    if value is None:
        return na_cell(reason)
    return num(fmt_bytes(value), title=f"{fmt_count(value)} bytes")


def table(headers: Sequence[str | Cell], rows: Iterable[Sequence[str | Cell]], *, footer: Sequence[str | Cell] = (),
          caption: str | None = None, cls: str | None = None) -> str:
    """An HTML table; plain strings become text cells, Cells keep their class and tooltip.

    Args: headers: the column heads; rows: the body rows; footer: an optional total row; caption:
        a line under the table; cls: the table's CSS class.
    Returns: the table's HTML.
    """
    def line(cells: Sequence[str | Cell], tag: str) -> str:
        return "<tr>" + "".join((c if isinstance(c, Cell) else Cell(c)).html(tag) for c in cells) + "</tr>"

    rows = list(rows)
    # A wrapper scrolls a table wider than the page instead of pushing the page wider.
    parts = ['<div class="wide">', f'<table class="{esc(cls)}">' if cls else "<table>",
             "<thead>" + line(headers, "th") + "</thead>", "<tbody>",
             *(line(r, "td") for r in rows[:MAX_TABLE_ROWS]), "</tbody>"]
    if footer:
        parts.append("<tfoot>" + line(footer, "td") + "</tfoot>")
    parts.append("</table></div>")
    if len(rows) > MAX_TABLE_ROWS:
        parts.append(f'<p class="caption more">{esc(_more(MAX_TABLE_ROWS, len(rows), "rows"))}</p>')
    if caption:
        parts.append(f'<p class="caption">{esc(caption)}</p>')
    return "\n".join(parts)


def section(title: str, *parts: str, anchor: str | None = None) -> str:
    """A titled section of a page (`parts` are HTML)."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    return f"<section{ident}>\n<h2>{esc(title)}</h2>\n" + "\n".join(p for p in parts if p) + "\n</section>"


def facts(pairs: Sequence[tuple[str, str]]) -> str:
    """A definition list of (label, value) pairs, both escaped."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


def banner(text: str, warn: bool = False) -> str:
    """A loud line (a partial run, NOT STABLE) that no reader scrolls past."""
    return f'<div class="banner{" warn" if warn else ""}" role="alert">{esc(text)}</div>'


def notes_list(notes: Sequence[str]) -> str:
    """The record's notes as a list (the first `MAX_LIST_ITEMS`, then how many more), or nothing when there are
    none."""
    if not notes:
        return ""
    more = f'<li class="more">{esc(_more(MAX_LIST_ITEMS, len(notes), "lines"))}</li>' \
        if len(notes) > MAX_LIST_ITEMS else ""
    return '<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes[:MAX_LIST_ITEMS]) + more + "</ul>"


def inline_svg(figure: Figure, stem: str) -> str:
    """The figure as an `<svg>` element to put in a page: no XML prolog, no metadata, ids prefixed by `stem`.

    matplotlib numbers its elements per figure (`figure_1`, `axes_1`, clip paths), so two figures in
    one page would share ids and a `url(#clip)` of one could pick the other's; the prefix keeps
    every id, and every reference to it, unique to its figure.
    """
    svg = figure_svg(figure, salt=stem)
    svg = _METADATA.sub("", svg[_SVG_START.search(svg).start():])
    ids = set(_ID.findall(svg))
    svg = _ID.sub(lambda m: f'id="{stem}-{m.group(1)}"', svg)
    svg = _REFERENCE.sub(lambda m: m.group(1) + (f"{stem}-{m.group(2)}" if m.group(2) in ids else m.group(2)), svg)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{esc(stem.replace("_", " "))}" ', 1)


def figures_section(figures: Mapping[str, Figure], gaps: Mapping[str, str] | None = None) -> str:
    """Every figure inline, each in its own `<figure>`; then each figure not drawn, and why.

    Args: figures: file stem -> Figure; gaps: file stem -> why that figure has nothing to draw (no empty figure is
        made for it: the page says so in its place).
    """
    missing = [f'<p class="na" id="no-figure-{esc(stem)}">{esc(stem.replace("_", " "))}: no figure — {esc(why)}</p>'
               for stem, why in (gaps or {}).items()]
    # A figure set (reports/figures/figure_set.py) says which figure is a placeholder or was laid out with
    # fixed margins, and why: the page says it under that figure, as the terminal says it in a note.
    notes = getattr(figures, "notes", {})
    return section("Figures", *(f'<figure id="figure-{esc(stem)}">{inline_svg(fig, stem)}'
                                + (f'<figcaption class="na">{esc(notes[stem])}</figcaption>' if stem in notes else "")
                                + "</figure>" for stem, fig in figures.items()), *missing, anchor="figures")


def page(title: str, body: Sequence[str]) -> str:
    """A whole HTML document: charset, the CSP, title, inline CSS, and `body` (HTML parts) inside `<main>`."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP, quote=True)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>", "<main>",
        *(b for b in body if b), "</main>", "</body>", "</html>", ""])
