"""`tbd COMMAND` imports that command's module alone (tbd.cli.main.command_module): `tbd analyze` loads
none of the training, sweep and MLPerf code, and every command's options still parse as before."""

from __future__ import annotations

import json
import subprocess
import sys

from tbd.cli.main import COMMANDS, build_parser, main

_IMPORTED = ("import json, sys; from tbd.cli.main import main; main({argv!r}); "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tbd.cli.commands.'))))")


def _commands_imported(argv: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _IMPORTED.format(argv=argv)], capture_output=True, text=True,
                         check=True, timeout=120)
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    return [m for m in modules if m.rsplit(".", 1)[-1] in COMMANDS]  # commands, not their helpers (output, ...)


def test_a_command_imports_its_own_module_only():
    assert _commands_imported(["gpus", "--json"]) == ["tbd.cli.commands.gpus"]
    assert _commands_imported(["suite"]) == ["tbd.cli.commands.suite"]


def test_the_whole_parser_still_holds_every_command_and_option():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)
    assert "--ranking" in sub.choices["analyze"].format_help() and "--label" in sub.choices["compare"].format_help()


def test_an_unknown_command_is_one_line(capsys):
    assert main(["profil"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tbd: error: argument COMMAND: invalid choice: 'profil'") and len(err.splitlines()) == 1
