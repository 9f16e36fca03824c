"""tbd as a user installs and starts it: one top-level package, and a working directory that
holds packages of its own (`models/`, `profilers/`) shadows nothing, in the parent or the child."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from testpaths import ROOT

# What the user's own packages do when imported by mistake: fail loudly.
_TRAP = "raise ImportError('the user\\'s own {name} package was imported instead of tbd\\'s')\n"


def _user_project(path: Path) -> Path:
    """A directory like a user's: its own models/ and profilers/ packages (and a models/base.py)."""
    for name in ("models", "profilers"):
        (path / name).mkdir(parents=True)
        (path / name / "__init__.py").write_text(_TRAP.format(name=name))
    (path / "models" / "base.py").write_text(_TRAP.format(name="models.base"))
    (path / "profilers" / "pytorch.py").write_text(_TRAP.format(name="profilers.pytorch"))
    return path


def test_profile_from_a_directory_with_its_own_models_and_profilers(tmp_path):
    cwd = _user_project(tmp_path / "project")
    tbd_script = Path(sys.executable).parent / "tbd"
    done = subprocess.run([str(tbd_script), "profile", "resnet50", "--size", "test", "--batch", "2", "--warmup", "1",
                           "--iterations", "2", "--trace-iterations", "1", "--device", "cpu", "--out", "run",
                           "--quiet"], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    profile = json.loads((cwd / "run" / "profile.json").read_text())
    assert profile["status"] == "complete"
    assert profile["metrics"]["throughput"]["value"] > 0
    assert "imported instead of tbd" not in (cwd / "run" / "workload.log").read_text()


def test_python_dash_m_from_such_a_directory(tmp_path):
    """`python -m tbd.cli` puts the working directory first on sys.path: tbd's own names are all
    under tbd., so the user's models/ and profilers/ still do not shadow them."""
    cwd = _user_project(tmp_path / "project")
    done = subprocess.run([sys.executable, "-m", "tbd.cli", "suite", "--framework", "pytorch"], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resnet50" in done.stdout


def test_pip_install_puts_only_tbd_at_top_level(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("tbd", "profilers", "models", "analysis", "reports"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(dist), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("tbd-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = set(p.name for p in site.iterdir())
    # This interpreter's pip installs into the fresh venv (--python), without dependencies: the
    # check is what tbd itself puts there.
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    added = set(p.name for p in site.iterdir()) - before
    assert {a for a in added if not a.endswith(".dist-info")} == {"tbd"}
    # Imported from the venv, not from a checkout: tbd.core.errors needs nothing that --no-deps left out.
    where = subprocess.run([str(python), "-c", "import tbd.core.errors; print(tbd.core.errors.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert where.stdout.strip() == str(site / "tbd" / "core" / "errors.py"), where.stderr
