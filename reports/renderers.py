"""One way out: a renderer per result kind, each offering the formats that kind has.

As pyinstrument's `Renderer` and memray's reporters: a command asks `renderer_for(result)` for the
result's renderer, then for one format of it, and the renderer answers with text (or figures),
never writing anything itself. `save` is the one helper that writes a rendered result to a file
(atomically, through tbd.core.rundir) or figures to a folder (reports/figures/saving.save_figures).

Formats (`FORMATS`): "text" (the terminal report: width, colour), "json" (the result's JSON document,
`document()`, as text), "csv", "html" (one self-contained page) and "figures" (file stem -> matplotlib
Figure). Each kind says which it offers in `formats`; asking for another raises `FormatNotOffered`
(a ValueError: the command decides how to tell the user, `refusal` gives the sentence).

| kind (result)                        | text | json | csv | html | figures |
|--------------------------------------|------|------|-----|------|---------|
| Profile (a run)                      |  x   |  x   |  x  |  x   |    x    |
| Sweep                                |  x   |  x   |  x  |  x   |    x    |
| Comparison                           |  x   |  x   |  x  |  x   |    x    |
| KernelDrilldown (`tbd kernels`)      |  x   |  x   |  x  |      |         |
| RankFolder (`tbd analyze FOLDER`)    |  x   |  x   |     |      |         |
| TtaResult (`tbd tta`)                |  x   |  x   |  x  |  x   |    x    |

The functions behind each format are the renderers' workers (reports/terminal.py, profile_export.py,
sweep_table.py, comparison_text.py, kernels/, ranks.py + cluster_text.py, html/, figures/); this
module chooses among them and computes nothing (docs/architecture.md: renderers format, never compute).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tbd.core import rundir
from tbd.core.comparison import Comparison
from tbd.core.profile_cluster import Cluster
from tbd.core.profile_result import KernelRow, Profile
from tbd.core.sweep_result import Sweep
from tbd.core.tta_result import TtaResult
from tbd.reports.cluster_text import ranks_json, render_cluster, render_ranks
from tbd.reports.comparison_text import comparison_csv, render_comparison
from tbd.reports.console import listed
from tbd.reports.figures.saving import comparison_figures, run_figures, save_figures, sweep_figures
from tbd.reports.figures.tta_figures import tta_figures
from tbd.reports.html.comparison_page import comparison_html
from tbd.reports.html.run_page import profile_html
from tbd.reports.html.sweep_page import sweep_html
from tbd.reports.html.tta_page import tta_html
from tbd.reports.kernels.export import kernels_csv, kernels_json
from tbd.reports.kernels.tables import RECOVERABLE, render_kernel_detail, render_kernel_report
from tbd.reports.printable import printable
from tbd.reports.profile_export import profile_csv
from tbd.reports.sweep_table import render_sweep, sweep_csv
from tbd.reports.terminal import render_profile
from tbd.reports.tta_text import render_tta, tta_csv

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Every format a renderer may offer, in the order `--help` and refusals list them.
FORMATS = ("text", "json", "csv", "html", "figures")
#: How a refusal names each format.
FORMAT_NAMES = {"text": "terminal text", "json": "JSON", "csv": "CSV", "html": "HTML page", "figures": "figures"}
#: The terminal width a renderer uses when none is given.
DEFAULT_WIDTH = 100


class FormatNotOffered(ValueError):
    """A format the result's kind does not offer (no CSV of a per-rank trace folder, say)."""

    def __init__(self, renderer: "Renderer", fmt: str) -> None:
        super().__init__(refusal(renderer, fmt))
        self.kind = renderer.kind
        self.format = fmt


def refusal(renderer: "Renderer", fmt: str) -> str:
    """The sentence that refuses `fmt`: "no CSV for a per-rank trace folder (it offers terminal text, JSON)"."""
    offered = ", ".join(FORMAT_NAMES[f] for f in renderer.formats)
    return f"no {FORMAT_NAMES.get(fmt, fmt)} for {renderer.noun} (it offers {offered})"


class Renderer:
    """The formats of one result, each returning text (or figures) and writing nothing.

    A subclass sets `kind`, `noun` and `formats` and implements the methods of the formats it
    offers; the others refuse with FormatNotOffered. `render(fmt)` is the one entry point by name.
    """

    kind: ClassVar[str]  # "profile", "sweep", "comparison", "kernels", "ranks"
    noun: ClassVar[str]  # how a refusal names the result: "a run's profile"
    formats: ClassVar[tuple[str, ...]]  # a subset of FORMATS, in its order

    def offers(self, fmt: str) -> bool:
        return fmt in self.formats

    def render(self, fmt: str, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str | dict[str, Figure]:
        """The result in `fmt`: text for "text" (at `width`, in `color`), "json", "csv" and "html"; a
        dict of stem -> Figure for "figures". Raises FormatNotOffered for a format the kind lacks."""
        if not self.offers(fmt):
            raise FormatNotOffered(self, fmt)
        if fmt == "text":
            return self.text(width=width, color=color)
        return getattr(self, fmt)()

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        """The terminal report: `width` in cells; `color` True, False (plain) or None (if stdout is a terminal)."""
        raise FormatNotOffered(self, "text")

    def document(self) -> Any:
        """The JSON document (plain data) the "json" format writes."""
        raise FormatNotOffered(self, "json")

    def json(self) -> str:
        """The JSON document as text, one-space indented, as tbd prints it (`save` writes the same document)."""
        if not self.offers("json"):
            raise FormatNotOffered(self, "json")
        return json.dumps(self.document(), indent=1)

    def csv(self) -> str:
        raise FormatNotOffered(self, "csv")

    def html(self) -> str:
        """One self-contained HTML page."""
        raise FormatNotOffered(self, "html")

    def figures(self) -> dict[str, Figure]:
        """File stem -> matplotlib Figure (saved by `save(renderer, "figures", folder)`)."""
        raise FormatNotOffered(self, "figures")


@dataclass(frozen=True)
class ProfileRenderer(Renderer):
    """A run (`Profile`): `top` kernel and op rows in the terminal text (the HTML page keeps its own)."""

    profile: Profile
    top: int = 10
    ranking: str = RECOVERABLE  # the kernel ranking of the text (reports.kernels.tables.RANKINGS)
    kind: ClassVar[str] = "profile"
    noun: ClassVar[str] = "a run's profile"
    formats: ClassVar[tuple[str, ...]] = FORMATS

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        return render_profile(self.profile, width=width, color=color, top=self.top, ranking=self.ranking)

    def document(self) -> dict[str, Any]:
        return self.profile.to_dict()

    def csv(self) -> str:
        return profile_csv(self.profile)

    def html(self) -> str:
        return profile_html(self.profile)

    def figures(self) -> dict[str, Figure]:
        return run_figures(self.profile)


@dataclass(frozen=True)
class SweepRenderer(Renderer):
    """A batch-size sweep (`Sweep`): its table, sweep.json, sweep.csv, page and figures."""

    sweep: Sweep
    top: int = 10  # unused: a sweep shows every point
    kind: ClassVar[str] = "sweep"
    noun: ClassVar[str] = "a sweep"
    formats: ClassVar[tuple[str, ...]] = FORMATS

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        return render_sweep(self.sweep, width=width, color=color)

    def document(self) -> dict[str, Any]:
        return self.sweep.to_dict()

    def csv(self) -> str:
        return sweep_csv(self.sweep)

    def html(self) -> str:
        return sweep_html(self.sweep)

    def figures(self) -> dict[str, Figure]:
        return sweep_figures(self.sweep)


@dataclass(frozen=True)
class ComparisonRenderer(Renderer):
    """Runs side by side (`Comparison`): `top` ops in the terminal text (the HTML page keeps its own)."""

    comparison: Comparison
    top: int = 10
    kind: ClassVar[str] = "comparison"
    noun: ClassVar[str] = "a comparison"
    formats: ClassVar[tuple[str, ...]] = FORMATS

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        return render_comparison(self.comparison, width=width, color=color, top=self.top)

    def document(self) -> dict[str, Any]:
        return self.comparison.to_dict()

    def csv(self) -> str:
        return comparison_csv(self.comparison)

    def html(self) -> str:
        return comparison_html(self.comparison)

    def figures(self) -> dict[str, Figure]:
        return comparison_figures(self.comparison)


@dataclass(frozen=True)
class KernelDrilldown:
    """What `tbd kernels` shows: the profile (counters merged), the kernel groups chosen (all, or those
    --kernel matched), the notes on what was merged, and whether the groups are shown in full (`detail`)."""

    profile: Profile
    rows: Sequence[KernelRow]
    notes: Sequence[str] = ()
    detail: bool = False


@dataclass(frozen=True)
class KernelRenderer(Renderer):
    """The kernel drill-down: the report (or each chosen group in full), its JSON and CSV export."""

    drilldown: KernelDrilldown
    top: int = 10
    ranking: str = RECOVERABLE  # the kernel ranking of the text (reports.kernels.tables.RANKINGS)
    kind: ClassVar[str] = "kernels"
    noun: ClassVar[str] = "a kernel drill-down"
    formats: ClassVar[tuple[str, ...]] = ("text", "json", "csv")

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        d = self.drilldown
        if d.detail:
            return render_kernel_detail(d.rows, d.profile, width=width, color=color)
        text = render_kernel_report(d.profile, top=self.top, width=width, color=color, ranking=self.ranking)
        shown, more = listed(d.notes)
        return text + "".join(f"note: {printable(n)}\n" for n in shown) + (f"{more.plain}\n" if more else "")

    def document(self) -> dict[str, Any]:
        d = self.drilldown
        return {**kernels_json(d.profile, list(d.rows)), "notes": list(d.notes)}

    def csv(self) -> str:
        return kernels_csv(list(self.drilldown.rows))


@dataclass(frozen=True)
class RankFolder:
    """A folder of per-rank traces (`tbd analyze FOLDER`): each rank's analysis (objects with `rank`,
    `trace` and `profile`, as tbd.cli.run_analysis.RankProfile), in rank order, and the cluster summary."""

    ranks: Sequence[Any]
    cluster: Cluster | None = None


@dataclass(frozen=True)
class RankFolderRenderer(Renderer):
    """Per-rank traces side by side, then the cluster summary; JSON schema tbd.ranks/1."""

    folder: RankFolder
    top: int = 10  # unused: one row per rank
    kind: ClassVar[str] = "ranks"
    noun: ClassVar[str] = "a per-rank trace folder"
    formats: ClassVar[tuple[str, ...]] = ("text", "json")

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        text = render_ranks(self.folder.ranks, width=width, color=color)
        if self.folder.cluster is None:
            return text
        return text + "\n" + render_cluster(self.folder.cluster, width=width, color=color)

    def document(self) -> dict[str, Any]:
        return ranks_json(self.folder.ranks, self.folder.cluster)


@dataclass(frozen=True)
class TtaRenderer(Renderer):
    """Time to accuracy from others' logs (`TtaResult`, `tbd tta`): one table per benchmark or task."""

    result: TtaResult
    top: int = 10  # unused: every system is shown
    kind: ClassVar[str] = "tta"
    noun: ClassVar[str] = "a time-to-accuracy result"
    formats: ClassVar[tuple[str, ...]] = FORMATS

    def text(self, *, width: int = DEFAULT_WIDTH, color: bool | None = False) -> str:
        return render_tta(self.result, width=width, color=color)

    def document(self) -> dict[str, Any]:
        return self.result.to_dict()

    def csv(self) -> str:
        return tta_csv(self.result)

    def html(self) -> str:
        return tta_html(self.result)

    def figures(self) -> dict[str, Figure]:
        return tta_figures(self.result)


#: The one dispatch: result type -> its renderer.
RENDERERS: dict[type, type[Renderer]] = {
    Profile: ProfileRenderer, Sweep: SweepRenderer, Comparison: ComparisonRenderer,
    KernelDrilldown: KernelRenderer, RankFolder: RankFolderRenderer, TtaResult: TtaRenderer,
}


def renderer_for(result: Any, *, top: int = 10) -> Renderer:
    """The renderer of `result` (a Profile, Sweep, Comparison, KernelDrilldown or RankFolder).

    Args: top: rows per table in the terminal text, for the kinds that cut tables (a run, a
        comparison, the kernel report). Raises TypeError for anything else.
    """
    for cls in type(result).__mro__:
        if cls in RENDERERS:
            return RENDERERS[cls](result, top=top)
    raise TypeError(f"no renderer for {type(result).__name__}: give one of "
                    f"{', '.join(c.__name__ for c in RENDERERS)}")


def save(renderer: Renderer, fmt: str, path: str | os.PathLike) -> list[Path]:
    """Write the result in `fmt` to `path`, atomically; the one place a rendered result is written.

    "json": the document as tbd.core.rundir.atomic_write_json writes it (NaN refused); "text", "csv",
    "html": the text as UTF-8, as rendered; "figures": `path` is a folder, each figure's SVG and PNG
    in it (reports/figures/saving.save_figures). Returns the paths written. Raises FormatNotOffered.
    """
    if not renderer.offers(fmt):
        raise FormatNotOffered(renderer, fmt)
    if fmt == "figures":
        return save_figures(renderer.figures(), path)
    if fmt == "json":
        rundir.atomic_write_json(path, renderer.document())
    else:
        rundir.atomic_write_bytes(path, str(renderer.render(fmt)).encode("utf-8"))
    return [Path(path)]
