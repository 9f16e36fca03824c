"""Argument types for the subcommands: every number checked before any work starts.

argparse calls these on the text given; a value out of range raises ArgumentTypeError, which the
CLI's parser turns into one line ("tbd: error: argument --top: ...") and exit code 2. Every number
is finite and inside a range a real run can have, stated in the message: a peak below 1e9 FLOP/s
is no device (and printed utilizations of astronomic size), 1e308 seconds or a seed of 2**64
overflowed inside the runner child (issue 29).
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

#: Seconds of a budget, window or timeout: a millisecond to ~116 days (1e7 s; 1e16 ns still fits int64).
SECONDS = (1e-3, 1e7)
#: FP32 peak FLOP/s of one device: 1 GFLOP/s (an old CPU core) to 1 EFLOP/s (1000x an H100's dense FP16).
PEAK_FLOPS = (1e9, 1e18)
#: Memory bandwidth of one device in bytes/s: 100 MB/s to 1 PB/s (an H200 has 4.8e12).
BANDWIDTH = (1e8, 1e15)
#: An SM clock in MHz: 1 MHz to 10 GHz.
CLOCK_MHZ = (1.0, 1e4)
#: A seed: below 2**31, so SEED + runs - 1 (`tbd train`, `tbd sweep --tta`: one seed per run) stays an unsigned
#: 32-bit integer, what numpy takes.
SEED = (0, 2**31 - 1)
#: Iterations of a window or warm-up: 10 million (a budget ends a run long before).
ITERATIONS = 10**7
#: A batch: 2**24 samples (16.7 million; the memory cap or the device runs out long before).
BATCH = 2**24
#: Iterations traced: 10,000 (a trace of more no reader should be asked to hold).
TRACE_ITERATIONS = 10**4


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def int_in(low: int, high: int, unit: str = "") -> Callable[[str], int]:
    """The type of an integer option in [low, high]; `unit` names what it counts in the message."""
    def parse(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be at least {low:,} and at most {high:,}{_unit(unit)}, got {text}")
        return value
    parse.__name__ = "integer"
    return parse


def float_in(low: float, high: float, unit: str = "", why: str = "") -> Callable[[str], float]:
    """The type of a finite number option in [low, high]; `why` says what lies outside."""
    def parse(text: str) -> float:
        value = _float(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}{_unit(unit)}"
                                             f"{f' ({why})' if why else ''}, got {text}")
        return value
    parse.__name__ = "number"
    return parse


#: Seconds of a budget or a timeout.
seconds = float_in(*SECONDS, "s")
#: --peak-flops.
peak_flops = float_in(*PEAK_FLOPS, "FLOP/s", "no device's FP32 peak is outside")
#: --memory-bandwidth.
bandwidth = float_in(*BANDWIDTH, "bytes/s", "no device's memory bandwidth is outside")
#: --sm-clock-mhz.
clock_mhz = float_in(*CLOCK_MHZ, "MHz", "no GPU clock is outside")
#: --seed.
seed = int_in(*SEED)
#: --iterations.
iterations = int_in(1, ITERATIONS, "iterations")
#: --warmup (0: none).
warmup = int_in(0, ITERATIONS, "iterations")
#: --trace-iterations (0: no trace); each traced iteration's trace takes megabytes.
trace_iterations = int_in(0, TRACE_ITERATIONS, "iterations")
#: --repeat (timing windows run back to back).
repeat = int_in(1, 1000)
#: --top (rows shown).
top = int_in(1, 10**6, "rows")
#: --batch.
batch = int_in(1, BATCH, "samples")
#: --threads.
threads = int_in(1, 4096, "threads")
#: --ncu (kernels measured, each a replay).
kernel_count = int_in(1, 10**4, "kernels")
#: --runs (training runs per point).
runs = int_in(1, 1000, "runs")
#: --max-epochs.
epochs = int_in(1, 10**6, "epochs")
#: --timeout-min.
minutes = int_in(1, 10**6, "minutes")
#: --nproc-per-node.
processes = int_in(1, 1024, "processes")
#: --nnodes.
machines = int_in(1, 10**5, "machines")
#: --node-rank.
node_rank = int_in(0, 10**5 - 1)
#: --samples-per-step.
samples_per_step = float_in(1e-9, 1e12, "samples")
#: --cost-per-hour.
usd_per_hour = float_in(1e-6, 1e6, "USD")
#: --target: a quality (accuracy, BLEU, perplexity, a game score) in the metric's own scale: the task checks
#: its own range; none is below 1e-12 or above 1e9.
target = float_in(1e-12, 1e9, "", "no task's metric is outside")


def seconds_or_off(text: str) -> float | None:
    """A number of seconds in SECONDS, or 0 for "no limit" (None)."""
    if text.strip() in ("0", "0.0"):
        return None
    try:
        return seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"0 (none) or {exc}") from None


def memory_gib(text: str) -> float:
    """An address-space cap in GiB: at least 0.25 (the interpreter and a framework need that much
    to start at all) and below 2**30 GiB (what the kernel's limits can express)."""
    value = positive_float(text)
    if not 0.25 <= value < 2**30:
        raise argparse.ArgumentTypeError(f"must be between 0.25 and 2**30 GiB, got {text}")
    return value


def per_run(kind: Callable[[str], float]) -> Callable[[str], str]:
    """The type of a `[RUN=]VALUE` item (`tbd compare --peak-flops B=1e13`): VALUE checked by `kind`,
    the item returned as given (the command pairs it with its run)."""
    def parse(text: str) -> str:
        kind(text.rpartition("=")[2])
        return text
    parse.__name__ = "item"
    return parse


def batch_list(text: str) -> str:
    """`tbd sweep --batch B1,B2,...|max`: each integer item within BATCH; the text returned as given
    (the command parses the list and says what else is wrong with it)."""
    for item in text.split(","):
        try:
            value = int(item.strip())
        except ValueError:
            continue
        if value > BATCH:
            raise argparse.ArgumentTypeError(f"a batch is at most {BATCH:,} samples, got {item.strip()}")
    return text


def _unit(unit: str) -> str:
    return f" {unit}" if unit else ""


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
