"""A folder tbd writes into is tbd's alone (issue 29): --force removes only what tbd's marker lists,
a second tbd on the same folder is refused naming the holder, default report pages are not
overwritten, and paths with control characters are refused up front. No model runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from testpaths import ROOT

from tbd.cli.commands.output import check_output_file
from tbd.cli.main import main
from tbd.cli.orchestrate import prepare_out_dir, prepare_run_dir
from tbd.cli.sweep_run import prepare_sweep_dir
from tbd.core.errors import UsageError
from tbd.core.run_ownership import LOCK, MARKER, claim_dir, record_written

TBD_FILES = [LOCK, MARKER]  # what an emptied (or new) folder holds while tbd holds it


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _finished_run(out: Path) -> None:
    """A run directory as a finished tbd run leaves it: spec.json, raw/, a trace, a nested folder."""
    with prepare_run_dir(out, force=False):
        (out / "spec.json").write_text("{}")
        (out / "raw").mkdir()
        (out / "raw" / "cpu.json").write_text("[]")
        (out / "plugins" / "profile" / "r").mkdir(parents=True)
        (out / "plugins" / "profile" / "r" / "h.xplane.pb").write_bytes(b"\0")
        (out / "profile.json").write_text("{}")


# --- --force removes only tbd's files ------------------------------------------------------------

def test_the_issue_repro_keeps_every_user_file(tmp_path):
    # issue 29: a folder holding spec.json was emptied by --force, thesis.tex and sub/data.csv with it.
    p = tmp_path / "p"
    (p / "sub").mkdir(parents=True)
    (p / "spec.json").write_text("{}")
    (p / "thesis.tex").write_text("x")
    (p / "sub" / "data.csv").write_text("1")
    with pytest.raises(UsageError) as err:
        prepare_run_dir(p, force=True)
    assert "holds spec.json but no tbd ownership marker (.tbd-run.json)" in str(err.value)
    assert sorted(str(q.relative_to(p)) for q in p.rglob("*")) == ["spec.json", "sub", "sub/data.csv", "thesis.tex"]
    assert (p / "thesis.tex").read_text() == "x" and (p / "sub" / "data.csv").read_text() == "1"


def test_force_removes_the_files_the_marker_lists(tmp_path):
    out = tmp_path / "run"
    _finished_run(out)
    marker = json.loads((out / MARKER).read_text())
    assert marker["state"] == "finished" and marker["pid"] == os.getpid() and marker["kind"] == "run"
    assert marker["files"] == ["plugins/profile/r/h.xplane.pb", "profile.json", "raw/cpu.json", "spec.json"]
    assert marker["dirs"] == ["plugins", "plugins/profile", "plugins/profile/r", "raw"]
    with prepare_run_dir(out, force=True):
        assert _names(out) == TBD_FILES
        assert json.loads((out / MARKER).read_text())["state"] == "running"
    assert json.loads((out / MARKER).read_text())["files"] == []


def test_a_user_file_added_later_blocks_force_before_anything_is_removed(tmp_path):
    out = tmp_path / "run"
    _finished_run(out)
    (out / "notes.txt").write_text("mine")
    (out / "raw" / "extra.csv").write_text("mine")
    (out / "mine").mkdir()
    (out / "plugins" / "profile" / "r" / "z.txt").write_text("mine")
    before = sorted(str(q.relative_to(out)) for q in out.rglob("*"))
    with pytest.raises(UsageError) as err:
        prepare_run_dir(out, force=True)
    # Up to three named (sorted), the rest counted; nothing removed.
    assert "holds what tbd did not write there: mine/, notes.txt, plugins/profile/r/z.txt and 1 more" in str(err.value)
    assert sorted(str(q.relative_to(out)) for q in out.rglob("*")) == before


def test_links_inside_are_unlinked_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    out = tmp_path / "run"
    with prepare_run_dir(out, force=False):
        (out / "to_dir").symlink_to(outside, target_is_directory=True)
        (out / "to_file").symlink_to(outside / "keep.txt")
    assert sorted(json.loads((out / MARKER).read_text())["files"]) == ["to_dir", "to_file"]
    with prepare_run_dir(out, force=True):
        assert _names(out) == TBD_FILES
    assert (outside / "keep.txt").read_text() == "keep"


def test_a_run_that_never_listed_its_files_is_not_emptied(tmp_path):
    # The parent was killed outright (SIGKILL) before it listed the folder: tbd cannot tell its files
    # from a user's, so --force touches none.
    out = tmp_path / "run"
    claim = prepare_run_dir(out, force=False)
    (out / "spec.json").write_text("{}")
    del claim  # the lock goes with the process; the marker still says "running"
    with pytest.raises(UsageError, match="never finished"):
        prepare_run_dir(out, force=True)
    assert (out / "spec.json").exists()


@pytest.mark.parametrize("damage", ["not json", "symlink", "escaping path"])
def test_a_damaged_marker_is_refused(tmp_path, damage):
    out = tmp_path / "run"
    _finished_run(out)
    marker = out / MARKER
    if damage == "not json":
        marker.write_text("{")
    elif damage == "symlink":
        (tmp_path / "m.json").write_text(marker.read_text())
        marker.unlink()
        marker.symlink_to(tmp_path / "m.json")
    else:
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({**data, "files": [*data["files"], "../elsewhere"]}))
    with pytest.raises(UsageError):
        prepare_run_dir(out, force=True)
    assert (out / "spec.json").exists()


def test_a_sweep_removes_its_points_by_their_own_markers(tmp_path):
    out = tmp_path / "s"
    with prepare_sweep_dir(out, force=False):
        (out / "sweep.json").write_text("{}")
        _finished_run(out / "b2")
        _finished_run(out / "b4")
    marker = json.loads((out / MARKER).read_text())
    assert marker["runs"] == ["b2", "b4"] and marker["files"] == ["sweep.json"]
    (out / "b4" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"holds what tbd did not write there: b4/notes.txt;"):
        prepare_sweep_dir(out, force=True)
    assert (out / "b2" / "spec.json").exists() and (out / "sweep.json").exists()
    (out / "b4" / "notes.txt").unlink()
    with prepare_sweep_dir(out, force=True):
        assert _names(out) == TBD_FILES


def test_a_page_tbd_writes_later_is_listed(tmp_path):
    out = tmp_path / "run"
    _finished_run(out)
    (out / "report.html").write_text("<html>")
    record_written(out, [out / "report.html"])
    with prepare_run_dir(out, force=True):
        assert _names(out) == TBD_FILES


def test_the_old_behaviour_messages_stay(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        prepare_run_dir(tmp_path / "f", force=True)
    out = tmp_path / "run"
    _finished_run(out)
    with pytest.raises(UsageError) as err:
        prepare_run_dir(out, force=False)
    assert err.value.one_line() == (f"output directory {out} is not empty "
                                    "(hint: choose another --out, or --force to replace a previous run there)")
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("")
    with pytest.raises(UsageError, match=r"holds no tbd train directory \(no .tbd-run.json\)"):
        prepare_out_dir(other, True, "tta.json", "train directory")
    assert _names(other) == ["x"]  # refused before writing anything there: no lock file left behind


# --- the lock ------------------------------------------------------------------------------------

def test_a_second_claim_is_refused_naming_the_holder(tmp_path):
    # flock belongs to an open file description: a second open in this very process conflicts too.
    out = tmp_path / "run"
    with prepare_run_dir(out, force=False):
        for force in (False, True):
            with pytest.raises(UsageError) as err:
                prepare_run_dir(out, force=force)
            assert f"run directory {out} is in use by tbd pid {os.getpid()} on " in str(err.value)
    with prepare_run_dir(out, force=True):  # released: free again
        pass


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tbd.core.errors import UsageError
    from tbd.core.run_ownership import claim_dir
    out, go = Path(sys.argv[1]), Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.005)
    try:
        with claim_dir(out, force=True, kind="run", version="test", legacy="spec.json"):
            (out / "spec.json").write_text("{}")
            print("claimed", flush=True)
            time.sleep(1.0)
    except UsageError as exc:
        print("refused", exc, flush=True)
""")


def _child(out: Path, go: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", _HOLDER, str(out), str(go)], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_two_concurrent_force_runs_exactly_one_proceeds(tmp_path):
    out = tmp_path / "run"
    _finished_run(out)
    go = tmp_path / "go"
    children = [_child(out, go), _child(out, go)]
    time.sleep(0.3)  # both started and waiting
    go.write_text("")
    lines = sorted(c.communicate(timeout=60)[0].strip() for c in children)
    assert lines[0] == "claimed"
    assert lines[1].startswith(f"refused run directory {out} is in use by tbd pid ")
    pid = int(lines[1].split("tbd pid ")[1].split()[0])
    assert pid in {c.pid for c in children}
    assert _names(out) == [LOCK, MARKER, "spec.json"]


def test_another_process_holding_the_folder_is_named(tmp_path):
    out = tmp_path / "run"
    go = tmp_path / "go"
    go.write_text("")
    child = _child(out, go)
    assert child.stdout.readline().strip() == "claimed"
    try:
        with pytest.raises(UsageError, match=rf"is in use by tbd pid {child.pid} on .*, since "):
            claim_dir(out, force=True, kind="run", version="test")
    finally:
        child.communicate(timeout=60)


# --- default report pages, control characters ----------------------------------------------------

@pytest.mark.parametrize("name, target", [("report.html", "run"), ("cmp.html", "cmp.json")])
def test_a_default_report_page_is_not_overwritten_without_force(tmp_path, capsys, name, target):
    run = tmp_path / "run"
    run.mkdir()
    if target == "cmp.json":
        (tmp_path / "cmp.json").write_text("{}")
        page = tmp_path / name
    else:
        page = run / name
    page.write_text("mine")
    assert main(["report", str(tmp_path / target), "--html"]) == 2
    assert capsys.readouterr().err == (f"tbd: error: --html {page} exists "
                                       "(hint: choose another path, or --force to replace it)\n")
    assert page.read_text() == "mine"


@pytest.mark.parametrize("char", ["\x1b", "\n", "\r", "\x07", "\u202e", "\u200b"])
def test_control_characters_in_paths_are_refused(tmp_path, capsys, char):
    bad = tmp_path / f"a{char}b"
    with pytest.raises(UsageError, match="holds a control character"):
        prepare_run_dir(bad, force=False)
    with pytest.raises(UsageError, match="holds a control character"):
        check_output_file("--json", bad, force=False, example="a.json")
    assert main(["profile", "resnet50", "--size", "test", "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "holds a control character" in err and char not in err.rstrip("\n") and err.count("\n") == 1
    assert main(["report", str(tmp_path), "--figures", str(bad)]) == 2
    assert "holds a control character" in capsys.readouterr().err
    assert not bad.exists()
