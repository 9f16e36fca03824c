"""One installed package: the wheel holds `tbd` and nothing else at top level, and all of the tree.

setup.cfg maps profilers/, models/, analysis/ and reports/ into the tbd namespace (package_dir)
and lists the packages by hand; this builds the wheel from a copy of the checkout and checks both
against the source tree, so a new subpackage missing from the list fails here.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from testpaths import ROOT

FOLDERS = {"tbd": "tbd", "tbd.profilers": "profilers", "tbd.models": "models", "tbd.analysis": "analysis",
           "tbd.reports": "reports"}


def _source_modules() -> set[str]:
    """Every .py file of the package as its path inside the wheel (tbd/profilers/kineto/reader.py, ...)."""
    out = set()
    for package, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            out.add("/".join(package.split(".") + list(path.relative_to(ROOT / folder).parts)))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS.values():
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("tbd-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_has_only_tbd_at_top_level(wheel):
    (top_level,) = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["tbd"]
    tops = {n.split("/")[0] for n in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tbd"}


def test_wheel_holds_every_module_of_the_tree(wheel):
    in_wheel = {n for n in wheel.namelist() if n.endswith(".py")}
    assert _source_modules() - in_wheel == set()
    assert "tbd/profilers/kineto/reader.py" in in_wheel and "tbd/models/pytorch/resnet50.py" in in_wheel


def test_setup_cfg_lists_every_package_folder():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = set()
    for package, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join(package.split(".") + list(init.parent.relative_to(ROOT / folder).parts)))
    assert listed == found
    mapping = dict(line.split(" = ") for line in cfg["options"]["package_dir"].strip().splitlines())
    assert mapping == FOLDERS


def test_the_checkout_holds_no_stray_top_level_package():
    """Only the mapped folders hold packages: a folder with an __init__.py elsewhere would not ship."""
    stray = [p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in FOLDERS.values()]
    assert stray == []


def test_installed_tbd_is_the_namespaced_one():
    import tbd.profilers.kineto.reader

    assert Path(tbd.profilers.kineto.reader.__file__).resolve() == (ROOT / "profilers" / "kineto" / "reader.py").resolve()
    assert "models" not in sys.modules and "profilers" not in sys.modules
