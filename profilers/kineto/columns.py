"""A Kineto trace as columns: what `profilers.kineto.decode` produces and `profilers.kineto.reader` reads.

Every table is in file order; names, threads and op call signatures are integer codes into the
tables `KinetoTrace` holds. Times are integer ns on the trace's own origin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OpColumns:
    """cpu_ops in file order."""

    name: np.ndarray  # int32 name code
    start_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64
    thread: np.ndarray  # int64 thread key (one per (pid, tid) pair)
    tid: np.ndarray  # int64 thread id
    signature: np.ndarray  # int32 signature code
    # The autograd "Sequence number" (-1 none) and the "Call stack" text code (KinetoTrace.stack_texts);
    # None for the python_function frames, which have neither.
    sequence: np.ndarray | None = None  # int64
    stack: np.ndarray | None = None  # int32


@dataclass(frozen=True)
class StepColumns:
    """ProfilerStep#N spans in file order."""

    number: np.ndarray  # int64 N
    start_ns: np.ndarray
    dur_ns: np.ndarray


@dataclass(frozen=True)
class AnnotationColumns:
    """user_annotation spans other than ProfilerStep#N, in file order (read leniently: one whose
    "ts" is unreadable is left out, an unreadable or negative "dur" counts as 0 ns). Gloo's
    collectives are recorded this way (`gloo:all_reduce` on its worker threads): profilers.kineto.comm."""

    name: np.ndarray  # int32 name code
    start_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64
    thread: np.ndarray  # int64 thread key, as OpColumns.thread


@dataclass(frozen=True)
class LaunchColumns:
    """Runtime/driver calls that carry a correlation id, in file order."""

    correlation: np.ndarray  # int64
    start_ns: np.ndarray
    thread: np.ndarray  # int64 thread key, as OpColumns.thread


@dataclass(frozen=True)
class SpanColumns:
    """Events kept only as time spans, in file order: memcpy/memset on the GPU, synchronisation calls on the host."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64


@dataclass(frozen=True)
class KernelColumns:
    """GPU kernels in file order."""

    name: np.ndarray  # int32 name code
    start_ns: np.ndarray
    dur_ns: np.ndarray
    device: np.ndarray  # int64: args.device, else pid
    stream: np.ndarray  # int64: args.stream, else tid
    correlation: np.ndarray  # int64, -1 when absent
    # Launch configuration (CUPTI's kernel record); -1 / NaN where the trace does not say.
    grid: np.ndarray  # (n, 3) int64
    block: np.ndarray  # (n, 3) int64
    registers: np.ndarray  # int64 registers per thread
    shared_memory: np.ndarray  # int64 bytes of shared memory per block (static + dynamic)
    occupancy: np.ndarray  # float64: the trace's "est. achieved occupancy %"


@dataclass(frozen=True)
class MemoryColumns:
    """"[memory]" instants in file order."""

    ts_ns: np.ndarray
    addr: np.ndarray  # uint64
    bytes: np.ndarray
    total_allocated: np.ndarray
    device: np.ndarray  # "Device Id", -1 when absent


@dataclass(frozen=True)
class Signature:
    """One distinct op call signature: what a FLOP formula needs, as the trace wrote it (JSON text)."""

    name: str
    input_dims: bytes  # b"" when not recorded
    input_types: bytes
    concrete_inputs: bytes
    output_dims: bytes = b""  # JSON text of the outputs' shapes when recovered (profilers.kineto.completion)


@dataclass(frozen=True)
class KinetoTrace:
    """A Kineto trace as columns; names and signatures are tables the columns index."""

    source: str
    metadata: dict  # the top-level fields of _METADATA present in the file, decoded
    names: np.ndarray  # object: name code -> str
    signatures: tuple[Signature, ...]
    ops: OpColumns
    steps: StepColumns
    launches: LaunchColumns
    kernels: KernelColumns
    python: OpColumns  # python_function frames (torch.profiler with_stack=True); tid/signature unused
    memory: MemoryColumns
    copies: int  # gpu_memcpy/gpu_memset events
    timed_start_ns: int | None  # first start and last end over the timed events (None if none)
    timed_end_ns: int | None
    categories: tuple[str, ...]  # every event "cat" the trace holds, sorted
    memory_problem: str | None  # why the "[memory]" events could not be used, None if they could
    negative_durations: int = 0  # events whose "dur" was negative, read as 0 ns
    decode_notes: tuple[str, ...] = ()
    # "Call stack" texts of PyTorch 1.8-1.10 ops (with_stack=True): code -> text, "" for none.
    stack_texts: tuple[str, ...] = ("",)  # what was repaired to decode the text (invalid UTF-8, lone surrogates)
    annotations: AnnotationColumns | None = None  # None: a trace built before this field (every reader sets it)
    # gpu_memcpy/gpu_memset spans, and the runtime's *Synchronize calls (cudaStreamSynchronize, ...): what GPU idle
    # time waited on (analysis.idle_time). None: a trace built before these fields.
    copy_spans: SpanColumns | None = None
    sync_spans: SpanColumns | None = None
