"""`tbd gpus`: the GPU table (peaks per precision, bandwidth, memory) with each row's source."""

from __future__ import annotations

import argparse
import json
import sys

from tbd.analysis.gpu_table import table_rows
from tbd.cli.commands.output import terminal_width, write
from tbd.reports.info_tables import render_gpu_table

UNITS = {"peak_flops": "FLOP/s (int8: OP/s), dense, no 2:4 sparsity", "memory_bandwidth_bytes_per_s": "bytes/s",
         "memory_bytes": "bytes", "boost_clock_mhz": "MHz"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the table as JSON (FLOP/s, bytes) with sources")


def run(args: argparse.Namespace) -> int:
    rows = table_rows()
    if args.json:
        write(json.dumps({"units": UNITS, "gpus": rows}, indent=2))
    else:
        write(render_gpu_table(rows, width=terminal_width(), color=sys.stdout is not None and sys.stdout.isatty()))
    return 0
