"""A tbd training run as a DAWNBench entry: the JSON of its README's fields and the per-epoch TSV.

The TSV is `epoch<TAB>hours<TAB><metric>` (DAWNBench's README), hours since the run started (its
run_start), the metric in percent as DAWNBench's image tasks state it; both files are written
atomically. reader.py reads them back (`tbd tta RUN_DIR`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tbd.core import rundir


def write_entry(stem: Path, fields: dict[str, Any], rows: list[tuple[int, float, float]], metric: str) -> list[Path]:
    """Write `stem`.json (the README's fields) and `stem`.tsv (epoch, hours, metric in percent)."""
    json_path, tsv_path = stem.with_suffix(".json"), stem.with_suffix(".tsv")
    rundir.atomic_write_json(json_path, {"version": "v1.0", **fields})
    lines = [f"epoch\thours\t{metric}"] + [f"{epoch}\t{hours!r}\t{value!r}" for epoch, hours, value in rows]
    rundir.atomic_write_bytes(tsv_path, ("\n".join(lines) + "\n").encode("utf-8"))
    return [json_path, tsv_path]
