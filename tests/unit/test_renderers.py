"""One way out (reports/renderers.py, tbd/cli/commands/output.py): a renderer per result kind.

For each kind, every format it offers returns what the function behind it returned before the
protocol (the committed runs, the synthetic profiles of test_reports.py, the sweeps and comparison of
test_figures.py, a folder of per-rank traces); a format it does not offer is refused in one sentence;
and every command that writes a file checks that file once, before any work, the same way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_figures import cpu_sweep, sample_comparison, sample_sweep
from test_reports import cpu_profile, cuda_profile, detail_rows, partial_profile
from test_sweep_shell import Oracle
from testpaths import FIXTURES, GOLDEN

from tbd.analysis.compare_runs import Side, compare_profiles
from tbd.cli import sweep_executors
from tbd.cli.commands.output import check_output_file, write_output
from tbd.cli.main import build_parser, main
from tbd.cli.run_analysis import cluster_of_ranks, load_profile, profiles_from_trace_folder
from tbd.core.errors import UsageError
from tbd.core.sweep_result import Sweep
from tbd.reports.cluster_text import ranks_json, render_cluster, render_ranks
from tbd.reports.comparison_text import comparison_csv, render_comparison
from tbd.reports.figures.saving import comparison_figures, figure_svg, run_figures, sweep_figures
from tbd.reports.html.comparison_page import comparison_html
from tbd.reports.html.run_page import profile_html
from tbd.reports.html.sweep_page import sweep_html
from tbd.reports.kernels.export import kernels_csv, kernels_json
from tbd.reports.kernels.tables import render_kernel_detail, render_kernel_report
from tbd.reports.profile_export import profile_csv
from tbd.reports.renderers import (
    FORMATS,
    ComparisonRenderer,
    FormatNotOffered,
    KernelDrilldown,
    KernelRenderer,
    ProfileRenderer,
    RankFolder,
    RankFolderRenderer,
    SweepRenderer,
    renderer_for,
    save,
)
from tbd.reports.sweep_table import render_sweep, sweep_csv
from tbd.reports.terminal import render_profile

RUNS = sorted((FIXTURES / "runs").iterdir())
RUN, OTHER = RUNS[0], RUNS[1]
WIDTHS = (80, 120)


def _committed(path: Path):
    return load_profile(path)


def _json(data) -> str:
    return json.dumps(data, indent=1)


def _same_figures(new: dict, old: dict) -> None:
    assert list(new) == list(old)
    for stem in new:
        assert figure_svg(new[stem], salt=stem) == figure_svg(old[stem], salt=stem), stem


# --- a run ------------------------------------------------------------------------------------

PROFILES = {"committed-threads1": lambda: _committed(RUN), "committed-threads2": lambda: _committed(OTHER),
            "cuda": cuda_profile, "cpu": cpu_profile, "partial": partial_profile}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_profile_in_every_format_is_what_the_workers_give(name):
    profile = PROFILES[name]()
    r = renderer_for(profile, top=6)
    assert isinstance(r, ProfileRenderer) and r.formats == FORMATS
    for width in WIDTHS:
        assert r.render("text", width=width) == render_profile(profile, width=width, color=False, top=6)
    assert r.text(width=90, color=True) == render_profile(profile, width=90, color=True, top=6)
    assert r.document() == profile.to_dict()
    assert r.render("json") == _json(profile.to_dict())
    assert r.render("csv") == profile_csv(profile)
    assert r.render("html") == profile_html(profile)  # the page keeps its own row count


def test_a_profiles_figures_are_the_runs_figures():
    profile = cuda_profile()
    _same_figures(renderer_for(profile).render("figures"), run_figures(profile))


@pytest.mark.parametrize("golden, build, top", [
    ("profile_cuda_80.txt", cuda_profile, 6), ("profile_cuda_120.txt", cuda_profile, 6),
    ("profile_cpu_80.txt", cpu_profile, 10), ("profile_partial_80.txt", partial_profile, 10),
])
def test_the_text_is_the_golden(golden, build, top):
    width = int(golden.rsplit("_", 1)[1].split(".")[0])
    assert renderer_for(build(), top=top).text(width=width) == (GOLDEN / golden).read_text(encoding="utf-8")


# --- a sweep ----------------------------------------------------------------------------------

SWEEPS = {"h100-max": sample_sweep, "cpu-list": cpu_sweep}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_a_sweep_in_every_format_is_what_the_workers_give(name):
    sweep = SWEEPS[name]()
    r = renderer_for(sweep)
    assert isinstance(r, SweepRenderer) and r.formats == FORMATS
    for width in WIDTHS:
        assert r.render("text", width=width) == render_sweep(sweep, width=width, color=False)
    assert r.render("json") == _json(sweep.to_dict()) and Sweep.from_dict(json.loads(r.json())) == sweep
    assert r.render("csv") == sweep_csv(sweep)
    assert r.render("html") == sweep_html(sweep)


def test_a_sweeps_figures_are_the_sweep_figures():
    sweep = sample_sweep()
    _same_figures(renderer_for(sweep).render("figures"), sweep_figures(sweep))


# --- a comparison -----------------------------------------------------------------------------

def _committed_comparison():
    return compare_profiles([Side(str(RUN), _committed(RUN)), Side(str(OTHER), _committed(OTHER))])


COMPARISONS = {"committed": _committed_comparison, "v100-h100": sample_comparison}


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_a_comparison_in_every_format_is_what_the_workers_give(name):
    comparison = COMPARISONS[name]()
    r = renderer_for(comparison, top=3)
    assert isinstance(r, ComparisonRenderer) and r.formats == FORMATS
    for width in WIDTHS:
        assert r.render("text", width=width) == render_comparison(comparison, width=width, color=False, top=3)
    assert r.render("json") == _json(comparison.to_dict())
    assert r.render("csv") == comparison_csv(comparison)
    assert r.render("html") == comparison_html(comparison)


def test_a_comparisons_figures_are_the_comparison_figures():
    comparison = sample_comparison()
    _same_figures(renderer_for(comparison).render("figures"), comparison_figures(comparison))


# --- the kernel drill-down --------------------------------------------------------------------

@pytest.mark.parametrize("build", [cuda_profile, cpu_profile, lambda: _committed(RUN)])
def test_the_kernel_report_in_every_format_is_what_the_workers_give(build):
    profile = build()
    notes = ["2 ncu launches read from r.csv: 1 merged into kernel groups, 1 matched no kernel group"]
    r = renderer_for(KernelDrilldown(profile, profile.kernels, notes), top=5)
    assert isinstance(r, KernelRenderer) and r.formats == ("text", "json", "csv")
    for width in WIDTHS:
        assert r.render("text", width=width) == (render_kernel_report(profile, top=5, width=width, color=False)
                                                 + f"note: {notes[0]}\n")
    assert r.render("json") == _json({**kernels_json(profile, profile.kernels), "notes": notes})
    assert r.render("csv") == kernels_csv(profile.kernels)


def test_the_kernels_in_full_are_the_detail_and_the_goldens():
    profile = cuda_profile()
    rows = detail_rows(profile)
    r = renderer_for(KernelDrilldown(profile, rows, detail=True))
    for width in WIDTHS:
        assert r.text(width=width) == render_kernel_detail(rows, profile, width=width, color=False)
        assert r.text(width=width) == (GOLDEN / f"kernel_detail_{width}.txt").read_text(encoding="utf-8")
    assert json.loads(r.json())["kernels"] == kernels_json(profile, rows)["kernels"]
    assert r.csv() == kernels_csv(rows)
    report = renderer_for(KernelDrilldown(profile, profile.kernels))
    assert report.text(width=80) == (GOLDEN / "kernels_cuda_80.txt").read_text(encoding="utf-8")


# --- a folder of per-rank traces --------------------------------------------------------------

@pytest.fixture(scope="module")
def rank_folder() -> RankFolder:
    ranks = profiles_from_trace_folder(FIXTURES / "multirank" / "gloo_cpu_ddp")
    return RankFolder(ranks, cluster_of_ranks(ranks))


def test_a_rank_folder_in_every_format_is_what_the_workers_give(rank_folder):
    r = renderer_for(rank_folder)
    assert isinstance(r, RankFolderRenderer) and r.formats == ("text", "json")
    for width in WIDTHS:
        assert r.render("text", width=width) == (render_ranks(rank_folder.ranks, width=width, color=False) + "\n"
                                                 + render_cluster(rank_folder.cluster, width=width, color=False))
    assert r.render("json") == _json(ranks_json(rank_folder.ranks, rank_folder.cluster))
    alone = renderer_for(RankFolder(rank_folder.ranks))  # no cluster summary: the ranks alone
    assert alone.text(width=100) == render_ranks(rank_folder.ranks, width=100)
    assert "cluster" not in alone.document()


def test_analyze_of_a_folder_prints_and_saves_the_rank_folder(rank_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tbd.cli.commands.output.terminal_width", lambda: 120)
    out = tmp_path / "ranks.json"
    assert main(["analyze", str(FIXTURES / "multirank" / "gloo_cpu_ddp"), "--json", str(out)]) == 0
    r = renderer_for(rank_folder)
    assert capsys.readouterr().out == r.text(width=120, color=None)
    assert out.read_text() == r.json() + "\n"


# --- what a kind does not offer ---------------------------------------------------------------

@pytest.mark.parametrize("fmt, sentence", [
    ("csv", "no CSV for a per-rank trace folder (it offers terminal text, JSON)"),
    ("html", "no HTML page for a per-rank trace folder"),
    ("figures", "no figures for a per-rank trace folder"),
])
def test_a_rank_folder_refuses_what_it_does_not_offer(rank_folder, tmp_path, fmt, sentence):
    r = renderer_for(rank_folder)
    assert not r.offers(fmt)
    with pytest.raises(FormatNotOffered, match=sentence.replace("(", r"\(").replace(")", r"\)")) as caught:
        r.render(fmt)
    assert caught.value.kind == "ranks" and caught.value.format == fmt
    with pytest.raises(FormatNotOffered):
        getattr(r, fmt)()
    with pytest.raises(FormatNotOffered):
        save(r, fmt, tmp_path / "x")
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(UsageError, match=sentence.split(" (")[0]):  # the command's one line
        write_output(r, fmt)


@pytest.mark.parametrize("fmt", ["html", "figures"])
def test_the_kernel_drilldown_refuses_a_page_and_figures(fmt):
    r = renderer_for(KernelDrilldown(cuda_profile(), cuda_profile().kernels))
    assert not r.offers(fmt)
    with pytest.raises(FormatNotOffered, match="for a kernel drill-down .it offers terminal text, JSON, CSV."):
        r.render(fmt)


def test_an_unknown_result_has_no_renderer():
    with pytest.raises(TypeError, match="no renderer for dict"):
        renderer_for({"schema": "tbd.profile/2"})


def test_a_figure_is_not_printed():
    with pytest.raises(UsageError, match="written to a folder"):
        write_output(renderer_for(sample_sweep()), "figures")


# --- the one save helper ----------------------------------------------------------------------

def test_save_writes_what_render_returns(tmp_path):
    profile = cuda_profile()
    r = renderer_for(profile)
    assert save(r, "json", tmp_path / "p.json") == [tmp_path / "p.json"]
    assert (tmp_path / "p.json").read_text() == r.json() + "\n"  # as rundir.atomic_write_json writes it
    save(r, "html", tmp_path / "p.html")
    assert (tmp_path / "p.html").read_bytes() == profile_html(profile).encode("utf-8")
    save(r, "csv", tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_text() == profile_csv(profile)
    written = save(r, "figures", tmp_path / "f")
    assert [p.name for p in written] == [f"{s}.{e}" for s in ("iteration_time", "memory", "kernel_utilization")
                                         for e in ("svg", "png")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "p.csv", "p.html", "p.json"]  # no temporary left


# --- the commands' output flags: declared once, checked once ----------------------------------

def _flags(command: str) -> dict[str, str | None]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {a.option_strings[0]: a.metavar for a in sub._actions
            if a.option_strings and a.option_strings[0] in ("--json", "--csv", "--html", "--out", "--figures",
                                                            "--force")}


@pytest.mark.parametrize("command, flags", [
    ("report", {"--json": None, "--csv": None, "--html": "PATH", "--figures": "DIR", "--force": None}),
    ("kernels", {"--json": None, "--csv": None}),
    ("compare", {"--json": None, "--csv": None, "--out": "FILE", "--force": None}),
    ("analyze", {"--json": "PATH", "--force": None}),
    ("sweep", {"--out": None, "--force": None}),
])
def test_each_command_keeps_its_output_flags(command, flags):
    assert _flags(command) == flags


@pytest.mark.parametrize("argv", [
    ["report", str(RUN), "--json", "--csv"], ["report", str(RUN), "--csv", "--html"],
    ["kernels", str(RUN), "--json", "--csv"], ["compare", str(RUN), str(OTHER), "--json", "--csv"],
])
def test_printed_formats_are_one_at_a_time(capsys, argv):
    assert main(argv) == 2
    assert "not allowed with argument" in capsys.readouterr().err


#: Every command that writes a file a user names: argv before the path, the flag, the folder hint.
WRITERS = {
    "report --html": (["report", str(RUN), "--html"], "--html", "report.html"),
    "compare --out": (["compare", str(RUN), str(OTHER), "--out"], "--out", "compare.json"),
    "analyze --json": (["analyze", str(FIXTURES / "kineto_cuda_synthetic.json"), "--json"], "--json", "profile.json"),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_file_already_there_is_replaced_only_with_force(tmp_path, capsys, name):
    argv, flag, _ = WRITERS[name]
    path = tmp_path / "mine.out"
    path.write_text("the user's file")
    assert main([*argv, str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"tbd: error: {flag} {path} exists (hint: choose another path, or --force to replace it)\n"
    assert path.read_text() == "the user's file" and capsys.readouterr().out == ""
    assert main([*argv, str(path), "--force"]) == 0
    assert path.read_text() != "the user's file"


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize("force", [False, True])
def test_a_folder_is_never_taken_for_a_file(tmp_path, capsys, name, force):
    argv, flag, example = WRITERS[name]
    hint = tmp_path / example if flag == "--html" else example
    assert main([*argv, str(tmp_path), *(["--force"] if force else [])]) == 2
    assert capsys.readouterr().err == f"tbd: error: {flag} {tmp_path} is a folder (hint: give a file path, e.g. {hint})\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["report", "{missing}", "--html"], ["compare", str(RUN), "{missing}", "--out"]])
def test_the_file_is_checked_before_the_target_is_read(tmp_path, capsys, argv):
    path = tmp_path / "mine.out"
    path.write_text("x")
    argv = [a.format(missing=tmp_path / "missing") for a in argv]
    assert main([*argv, str(path)]) == 2
    assert f"{argv[-1]} {path} exists" in capsys.readouterr().err


def test_check_output_file_is_one_rule():
    with pytest.raises(UsageError, match="--x . is a folder"):
        check_output_file("--x", ".", force=True, example="a.json")
    assert check_output_file("--x", "no/such/file.json", force=False, example="a.json") == Path("no/such/file.json")


def test_report_writes_the_page_and_the_figures_through_the_renderer(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    assert main(["report", str(run), "--html", "--figures", str(tmp_path / "f")]) == 0
    r = renderer_for(load_profile(run))
    assert (run / "report.html").read_text(encoding="utf-8") == r.html()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"HTML report: {run / 'report.html'}"
    assert lines[1:] == [f"figure: {tmp_path / 'f' / f'{s}.{e}'}" for s in ("iteration_time", "memory",
                                                                           "kernel_utilization") for e in ("svg", "png")]


def test_compare_out_is_the_json_it_prints(tmp_path, capsys):
    out = tmp_path / "ab.json"
    assert main(["compare", str(RUN), str(OTHER), "--json", "--out", str(out)]) == 0
    assert out.read_text() == capsys.readouterr().out
    assert out.read_text() == renderer_for(_committed_comparison()).json() + "\n"


# --- tbd sweep: its folder, and the files it writes there -------------------------------------

@pytest.fixture
def oracle(monkeypatch):
    fake = Oracle(fits_below=5)
    monkeypatch.setattr(sweep_executors, "profile_run", fake)
    return fake


SWEEP = ["sweep", "resnet50", "--size", "test", "--device", "cpu", "--batch", "2,4,8", "--quiet"]


def test_sweep_writes_its_files_through_the_renderer(tmp_path, capsys, oracle, monkeypatch):
    monkeypatch.setattr("tbd.cli.commands.output.terminal_width", lambda: 100)
    out = tmp_path / "s"
    assert main([*SWEEP, "--out", str(out)]) == 0
    sweep = Sweep.from_dict(json.loads((out / "sweep.json").read_text()))
    r = renderer_for(sweep)
    assert (out / "sweep.json").read_text() == r.json() + "\n"
    assert (out / "sweep.csv").read_text() == r.csv()
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(
        f"{s}.{e}" for s in ("sweep_throughput", "sweep_utilization", "sweep_memory") for e in ("svg", "png"))
    assert capsys.readouterr().out == render_sweep(sweep, width=100, color=False) + f"sweep directory: {out}\n"


@pytest.mark.parametrize("setup, force, message", [
    ("file", False, "is a file, not a folder"),
    ("other", False, "is not empty (hint: choose another --out, or --force to replace a previous sweep there)"),
    ("other", True, "holds no tbd sweep (no .tbd-run.json)"),
])
def test_sweep_out_is_checked_before_any_point(tmp_path, capsys, oracle, setup, force, message):
    out = tmp_path / "s"
    if setup == "file":
        out.write_text("x")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert main([*SWEEP, "--out", str(out), *(["--force"] if force else [])]) == 2
    assert message in capsys.readouterr().err and oracle.calls == []
