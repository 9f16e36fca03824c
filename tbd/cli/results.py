"""What `tbd report` reads: a run (directory or profile.json), a sweep (directory or sweep.json) or a
comparison (the JSON `tbd compare --out` writes), told apart by the schema it declares."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Union

from tbd.cli.run_analysis import is_profile_json, load_profile, profile_from_run_dir
from tbd.cli.sweep_run import SWEEP_JSON, load_sweep
from tbd.core import rundir
from tbd.core.comparison import Comparison
from tbd.core.errors import UsageError
from tbd.core.profile import PARTIAL, Profile
from tbd.core.sweep_result import Sweep

Result = Union[Profile, Sweep, Comparison]
#: Sweep and comparison files hold a few kB per point or run; anything this large is not one.
MAX_RESULT_BYTES = 64 << 20
_SCHEMA_HEAD = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"(tbd\.[a-z_]+)/')
_HINT = "give a run directory or profile.json, a sweep directory or sweep.json, or a comparison saved by " \
        "`tbd compare --out`"


def load_result(target: str | os.PathLike) -> Result:
    """The Profile, Sweep or Comparison at `target`.

    A run directory whose parent process died before profile.json was written is analysed from
    its raw records and marked partial, saying so.

    Raises:
        UsageError: `target` does not exist or is none of these.
        ResultFormatError: the file is corrupt or of an unknown schema (the key named).
    """
    path = Path(target)
    if not path.exists():
        raise UsageError(f"{target}: no such file or folder", hint=_HINT)
    if path.is_dir():
        if (path / SWEEP_JSON).is_file():
            return load_sweep(path / SWEEP_JSON)
        if not (path / rundir.PROFILE).exists() and (path / rundir.SPEC).is_file():
            return profile_from_run_dir(path, status=PARTIAL, extra_notes=[
                "profile.json was never written (the tbd process stopped first): analysed from the raw records"])
        return load_profile(path)
    kind = rundir.result_kind(path)
    if kind == "tbd.sweep":
        return load_sweep(path)
    if kind == "tbd.compare":
        return Comparison.from_dict(rundir.read_result_json(path, "comparison", MAX_RESULT_BYTES, _HINT))
    if path.name == rundir.PROFILE or is_profile_json(path):
        return load_profile(path)
    raise UsageError(f"{target}: not a tbd profile, sweep or comparison", hint=_HINT)
