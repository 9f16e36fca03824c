"""Which interpreter runs a framework, and the one-line error when none has it."""

import sys

import pytest
from testpaths import ROOT

from tbd.cli import frameworks
from tbd.cli.main import main
from tbd.core.errors import FrameworkMissingError


def test_a_framework_venv_at_the_root_is_preferred(tmp_path, monkeypatch):
    monkeypatch.delenv("TBD_PYTHON_MXNET", raising=False)
    python = tmp_path / ".venv-mxnet" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    rt = frameworks.runtime("mxnet", root=tmp_path)
    assert rt.python == str(python) and rt.source == ".venv-mxnet"


def test_environment_override_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TBD_PYTHON_MXNET", "/opt/mx/bin/python")
    assert frameworks.runtime("mxnet", root=tmp_path).python == "/opt/mx/bin/python"


def test_this_interpreter_when_it_has_the_framework(tmp_path, monkeypatch):
    monkeypatch.delenv("TBD_PYTHON_PYTORCH", raising=False)
    rt = frameworks.runtime("pytorch", root=tmp_path)
    assert rt.python == sys.executable and rt.source == "this interpreter"


def test_missing_framework_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.delenv("TBD_PYTHON_MXNET", raising=False)
    monkeypatch.setattr(frameworks, "framework_installed", lambda fw: False)
    with pytest.raises(FrameworkMissingError) as err:
        frameworks.runtime("mxnet", root=tmp_path)
    assert "make setup-mxnet" in err.value.one_line() and "numpy<1.24" in err.value.one_line()


def test_profile_with_a_missing_framework_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TBD_PYTHON_PYTORCH", raising=False)
    monkeypatch.setattr(frameworks, "ROOT", tmp_path)
    monkeypatch.setattr(frameworks, "framework_installed", lambda fw: False)
    code = main(["profile", "resnet50", "--framework", "pytorch", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "pytorch is not installed for tbd" in err and "make setup" in err
    assert not (tmp_path / "r").exists()


def test_env_reports_this_interpreters_torch(capsys):
    assert main(["env", "--framework", "pytorch"]) == 0
    out = capsys.readouterr().out
    import torch

    assert "pytorch" in out and torch.__version__ in out and "yes" in out


def test_the_framework_venvs_are_looked_for_at_the_checkout_root():
    """`make` builds .venv-mxnet and .venv-tensorflow at the repository root: a module that moves
    deeper into tbd/ must still find them there (a move to tbd/cli/ once pointed this at tbd/)."""
    assert frameworks.ROOT == ROOT
    assert (frameworks.ROOT / "Makefile").is_file()
