"""The event writer of bench/synthetic_kineto.py: Kineto's text layout, and the ground truth it keeps.

Every event goes out as recent Kineto's ChromeTraceLogger writes it (one event over several
lines, "ts"/"dur" as fixed-point µs with 3 decimals); while writing, the writer counts what it
wrote and keeps every kernel's integer-ns interval, so the truth never comes from parsing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import IO

import numpy as np

PID, MAIN_TID, BWD_TID = 4123, 4123, 4188
COMPUTE_STREAM, NCCL_STREAM = 7, 20


@dataclass
class GroundTruth:
    """What the generator wrote, counted by itself; times are trace ns (µs origin x 1000)."""

    events: int = 0
    kernels: int = 0
    cpu_ops: int = 0
    runtime_calls: int = 0
    steps: int = 0
    memory_events: int = 0
    copies: int = 0
    window_start_ns: int = 0
    window_end_ns: int = 0
    busy_ns: int = 0
    conv_gemm_flops: float = 0.0
    kernel_totals: dict = field(default_factory=dict)  # name -> [calls, total dur ns]

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    def to_dict(self) -> dict:
        return {**asdict(self), "window_ns": self.window_ns}


def us(ns: int) -> str:
    """Integer ns as Kineto writes µs: fixed point, 3 decimals, exact."""
    return f"{ns // 1000}.{ns % 1000:03d}"


class Writer:
    """Writes events in Kineto's layout and keeps the ground truth as it goes."""

    def __init__(self, out: IO[str], seed: int, truth: GroundTruth):
        self.out, self.truth = out, truth
        self.rng = np.random.default_rng(seed)
        self.first = True
        self.ext = 0  # "External id"
        self.corr = 100000  # correlation ids, as CUPTI's start high
        self.flow = 0
        self.stream_free = {COMPUTE_STREAM: 0, NCCL_STREAM: 0}
        self.kernel_starts: list[int] = []
        self.kernel_ends: list[int] = []
        self.addr = 0x7F0000000000
        self.allocated = 0
        self.live: list[tuple[int, int]] = []

    def _emit(self, text: str) -> None:
        self.out.write(("  " if self.first else ",\n  ") + text)
        self.first = False
        self.truth.events += 1

    def meta(self, name: str, pid, tid, args: dict) -> None:
        self._emit('{\n    "name": "%s", "ph": "M", "ts": %s, "pid": %s, "tid": %s,\n    "args": %s\n  }'
                   % (name, us(self.origin_ns), json.dumps(pid), json.dumps(tid), json.dumps(args)))

    def span(self, cat: str, name: str, tid: int, start: int, dur: int, args: str, pid: int = PID) -> None:
        self._emit('{\n    "ph": "X", "cat": "%s", "name": %s, "pid": %d, "tid": %d,\n    "ts": %s, "dur": %s,\n'
                   '    "args": {\n      %s\n    }\n  }' % (cat, json.dumps(name), pid, tid, us(start), us(dur), args))

    def op(self, name: str, tid: int, start: int, dur: int, dims=None, types=None, concrete=None,
           seq: int | None = None) -> None:
        """A cpu_op with the args torch records under record_shapes=True."""
        self.ext += 1
        parts = [f'"External id": {self.ext}']
        if seq is not None:
            parts.append(f'"Sequence number": {seq}, "Fwd thread id": 1')
        parts.append(f'"Record function id": 0, "Ev Idx": {self.ext - 1}')
        if dims is not None:
            strides = [contiguous(d) if d and isinstance(d[0], int) else [] for d in dims]
            parts.append(f'"Input Dims": {json.dumps(dims)}, "Input type": {json.dumps(types)}, '
                         f'"Input Strides": {json.dumps(strides)}, "Concrete Inputs": {json.dumps(concrete)}')
        self.span("cpu_op", name, tid, start, dur, ", ".join(parts))
        self.truth.cpu_ops += 1

    def launch(self, tid: int, at: int, kernel: str, dur: int, stream: int = COMPUTE_STREAM,
               grid=(128, 1, 1), block=(256, 1, 1)) -> int:
        """cudaLaunchKernel at host time `at` and its kernel; returns the call's duration (ns)."""
        self.corr += 1
        call_ns = int(self.rng.integers(3000, 9000))
        self.span("cuda_runtime", "cudaLaunchKernel", tid, at, call_ns,
                  f'"External id": {self.ext}, "cbid": 211, "correlation": {self.corr}')
        self.truth.runtime_calls += 1
        start = max(at + int(self.rng.integers(2000, 6000)), self.stream_free[stream])
        end = start + dur
        self.stream_free[stream] = end
        blocks = grid[0] * grid[1] * grid[2]
        self.span("kernel", kernel, stream, start, dur,
                  f'"External id": {self.ext},      "queued": 0, "device": 0, "context": 1,      "stream": {stream}, '
                  f'"correlation": {self.corr},      "registers per thread": 72,      "shared memory": 16384,      '
                  f'"blocks per SM": {blocks / 108:.6f},      "warps per SM": {blocks * block[0] / 32 / 108:.6f},      '
                  f'"grid": {list(grid)},      "block": {list(block)},      "est. achieved occupancy %": 25', pid=0)
        self._flow("ac2g", "s", PID, tid, at, self.corr)
        self._flow("ac2g", "f", 0, stream, start, self.corr)
        self.kernel_starts.append(start)
        self.kernel_ends.append(end)
        self.truth.kernels += 1
        totals = self.truth.kernel_totals.setdefault(kernel, [0, 0])
        totals[0] += 1
        totals[1] += dur
        return call_ns

    def copy(self, tid: int, at: int, kind: str, nbytes: int, dur: int) -> int:
        self.corr += 1
        call_ns = int(self.rng.integers(5000, 12000))
        self.span("cuda_runtime", "cudaMemcpyAsync", tid, at, call_ns,
                  f'"External id": {self.ext}, "cbid": 41, "correlation": {self.corr}')
        self.truth.runtime_calls += 1
        start = max(at + 3000, self.stream_free[COMPUTE_STREAM])
        self.stream_free[COMPUTE_STREAM] = start + dur
        self.span("gpu_memcpy", f"Memcpy {kind}", COMPUTE_STREAM, start, dur,
                  f'"External id": {self.ext}, "device": 0, "context": 1, "stream": {COMPUTE_STREAM}, '
                  f'"correlation": {self.corr}, "bytes": {nbytes}, "memory bandwidth (GB/s)": '
                  f'{nbytes / dur:.6f}', pid=0)
        self._flow("ac2g", "s", PID, tid, at, self.corr)
        self._flow("ac2g", "f", 0, COMPUTE_STREAM, start, self.corr)
        self.truth.copies += 1
        return call_ns

    def _flow(self, cat: str, ph: str, pid: int, tid: int, ts: int, ident: int) -> None:
        self._emit('{\n    "ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %s,\n    "cat": "%s", "name": "%s"%s\n  }'
                   % (ph, ident, pid, tid, us(ts), cat, cat, ', "bp": "e"' if ph == "f" else ""))

    def malloc(self, ts: int, nbytes: int) -> None:
        self.addr += (nbytes + 511) // 512 * 512
        self.allocated += nbytes
        self.live.append((self.addr, nbytes))
        self._memory(ts, self.addr, nbytes)

    def free_oldest(self, ts: int) -> None:
        if self.live:
            addr, nbytes = self.live.pop(0)
            self.allocated -= nbytes
            self._memory(ts, addr, -nbytes)

    def _memory(self, ts: int, addr: int, nbytes: int) -> None:
        self._emit('{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n    "pid": %d, '
                   '"tid": %d,\n    "ts": %s,\n    "args": {\n      "Total Reserved": %d, "Total Allocated": %d, '
                   '"Bytes": %d, "Addr": %d, "Device Id": 0, "Device Type": 1\n    }\n  }'
                   % (PID, MAIN_TID, us(ts), 2 ** 34, self.allocated, nbytes, addr))
        self.truth.memory_events += 1


def contiguous(dims: list[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    return strides[::-1]
