"""Renders `tbd gpus`: the GPU table's peaks per precision, bandwidth and memory."""

from __future__ import annotations

import io
from decimal import ROUND_HALF_UP, Decimal

from rich.console import Console
from rich.table import Table

# (header, key of the row's "peak_flops")
PEAK_COLUMNS = (("FP64", "fp64"), ("FP64 TC", "fp64_tensor"), ("FP32", "fp32"), ("TF32", "tf32"),
                ("FP16", "fp16"), ("BF16", "bf16"), ("FP8", "fp8"), ("INT8", "int8"))
ABSENT = "—"


def _four_digits(value: float) -> str:
    """Four significant digits, halves rounded up, never rounding the integer part (19.5 -> "19.50",
    494.7 -> "494.7", 1978.9 -> "1979")."""
    places = max(0, 4 - len(str(int(value))))
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _capability(cc) -> str:
    return f"{cc[0]}.{cc[1]}" if isinstance(cc, (list, tuple)) else str(cc)


def render_gpu_table(rows: list[dict], width: int = 120, color: bool | None = None) -> str:
    """The GPU table as text at `width` columns.

    Args:
        rows: `tbd.analysis.gpu_table.table_rows()`: peaks in FLOP/s (OP/s for int8), bandwidth in
            bytes/s, memory in bytes. Shown as TFLOP/s (TOP/s), TB/s and GiB.
        width: characters per line.
        color: True for ANSI styles; False or None for plain text.
    """
    table = Table(box=None, header_style="bold", pad_edge=False,
                  title="dense peaks in TFLOP/s (INT8: TOP/s), no sparsity; bandwidth TB/s; memory GiB; "
                        f"{ABSENT} where the vendor publishes none; sources: tbd gpus --json")
    table.add_column("GPU", overflow="fold", ratio=1)
    table.add_column("Vendor/arch", overflow="fold")
    table.add_column("CC")
    table.add_column("SMs/CUs", justify="right")
    table.add_column("MHz", justify="right")
    for header, _ in PEAK_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("TB/s", justify="right")
    table.add_column("GiB", justify="right")
    for r in rows:
        peaks = [_four_digits(r["peak_flops"][k] / 1e12) if k in r["peak_flops"] else ABSENT
                 for _, k in PEAK_COLUMNS]
        table.add_row(r["name"], f"{r['vendor']} {r['architecture']}", _capability(r["compute_capability"]),
                      str(r["sm_count"]), str(r["boost_clock_mhz"]), *peaks,
                      _four_digits(r["memory_bandwidth_bytes_per_s"] / 1e12), f"{r['memory_bytes'] / 2**30:g}")
    out = io.StringIO()
    Console(file=out, width=width, color_system="standard" if color else None, force_terminal=bool(color),
            highlight=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
