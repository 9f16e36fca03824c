"""Raw records that flow from collectors to analysis (docs/architecture.md, "Data model").

Times inside tbd are integer nanoseconds; the unit is in every name. Tables are columnar
(numpy arrays of one length), never lists of objects, so analysis stays vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: FLOP sources: an analytic formula over shapes, or a hardware counter.
ANALYTIC = "analytic"
MEASURED = "measured"

#: Why a kernel row has no FLOP count, as a trace reader can tell (KernelTable.flop_gap).
NO_LAUNCH_OP = "no_launch_op"  # no runtime call or no op enclosing it: nothing to count from
SHAPES_NOT_RECORDED = "shapes_not_recorded"  # its op has a formula, the trace has no shapes for it
SHAPES_UNREADABLE = "shapes_unreadable"  # its op has a formula, the recorded arguments did not fit it
NO_FORMULA = "no_formula"  # no op in its launching call stack has a formula
FLOP_GAPS = (NO_LAUNCH_OP, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE, NO_FORMULA)


@dataclass(frozen=True)
class RunSpec:
    """What the user asked to run: one workload, one framework, one batch, one device."""

    model: str
    framework: str = "pytorch"
    batch: int | None = None  # None: the workload's default batch
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:N"
    precision: str = "fp32"
    size: str = "full"  # "full" (the paper's architecture) or "test" (tiny, for CI)
    warmup: int | None = None  # None: detect the end of warm-up automatically
    iterations: int = 20  # timing-window length in iterations
    trace_iterations: int = 3  # trace-window length in iterations
    max_seconds: float = 600.0  # budget for the whole run, warm-up included
    max_warmup_iterations: int = 200
    seed: int = 0
    threads: int | None = None  # CPU threads for the framework; None: framework default
    memory_limit_bytes: int | None = None  # address-space cap of the workload process (RLIMIT_AS)
    peak_flops: float | None = None  # the user's FP32 peak FLOP/s (--peak-flops), else the device's model
    repeat: int = 1  # timing windows run back to back: the throughput's median and spread come from them
    window_seconds: float | None = None  # each timing repeat (and the trace window) cut to about this long
    # torch.distributed (PyTorch only): processes per machine and machines, launched under torchrun.
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0's rendezvous; None: this machine, a free port
    rdzv_timeout_s: float = 300.0  # the machines must have joined within this
    rank_timeout_s: float = 300.0  # a collective that waits this long for a rank ends the run
    data_parallel: str = "ddp"  # "ddp" (DistributedDataParallel) or "fsdp" (FSDP2 fully_shard)

    @property
    def world_size(self) -> int:
        """Processes in the run, all machines together (1: a plain single-process run)."""
        return self.nproc_per_node * self.nnodes

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass(frozen=True)
class OpShapes:
    """One op call as a trace records it: name, per-argument dims, dtypes and scalar values."""

    name: str  # e.g. "aten::addmm", "aten::convolution_backward"
    input_dims: tuple  # Kineto "Input Dims": a list per input, [] for scalars/None
    input_types: tuple  # Kineto "Input type": "float", "c10::Half", "Scalar", "ScalarList", ""
    concrete_inputs: tuple  # Kineto "Concrete Inputs": strings, "" when not recorded
    # Shapes of the outputs when another record of the call gives them (a forward op's autograd
    # node holds its output gradients: profilers.kineto.completion); () when unknown.
    output_dims: tuple = ()


@dataclass(frozen=True)
class KernelTable:
    """Device work, one row per kernel (GPU) or per op's self time (CPU), columnar.

    On the CPU, ops play the role of kernels: each op row covers that op's *self* time (its
    duration minus its child ops), so rows never double count and their durations add up to the
    busy time of the thread.
    """

    name: np.ndarray  # object: kernel or op name
    start_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64 (self time for CPU op rows)
    device: np.ndarray  # int64: CUDA ordinal, -1 for the CPU
    stream: np.ndarray  # int64: CUDA stream, or thread id for CPU ops
    op: np.ndarray  # object: the op whose FLOPs the row inherits ("" if none)
    flops: np.ndarray  # float64: FLOPs attributed to the row, NaN when unknown
    flop_source: np.ndarray  # object: ANALYTIC, MEASURED or "" (unknown)
    precision: np.ndarray  # object: "fp32", "tf32", "fp16", "bf16", "fp64", "int", ""
    step: np.ndarray  # int64: ProfilerStep number the row belongs to, -1 if none
    # object: why a row's FLOPs are unknown, as the reader can tell from the trace (FLOP_GAPS);
    # "" where they are known. None: the reader does not tell.
    flop_gap: np.ndarray | None = None
    # The drill-down (Kineto readers): the launch configuration (-1 / NaN where not recorded),
    # the shapes and Python stack of the op whose FLOPs the row inherits, and the bytes it moves
    # (an analytic estimate split like the FLOPs; NaN unknown). None: the reader does not tell.
    grid: np.ndarray | None = None  # (n, 3) int64
    block: np.ndarray | None = None  # (n, 3) int64
    registers: np.ndarray | None = None  # int64 registers per thread
    shared_memory: np.ndarray | None = None  # int64 bytes per block
    occupancy: np.ndarray | None = None  # float64: the trace's "est. achieved occupancy %"
    op_shapes: np.ndarray | None = None  # object: "33×100, 100×100 (float)", "" unknown
    op_stack: np.ndarray | None = None  # object: Python frames, innermost first, " < "-joined; ""
    bytes: np.ndarray | None = None  # float64
    # int64 start of the row's launching runtime call (-1 none): launch order, which on several
    # streams differs from kernel start order and is the order ncu counts launches in.
    launch_ns: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.name)
        for col in self.__dataclass_fields__:
            value = getattr(self, col)
            if value is not None and len(value) != n:
                raise ValueError(f"KernelTable column {col} has {len(value)} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.name)

    def select(self, mask: np.ndarray) -> "KernelTable":
        """Rows where `mask` (boolean or index array) holds."""
        return KernelTable(**{col: None if getattr(self, col) is None else getattr(self, col)[mask]
                              for col in self.__dataclass_fields__})

    @classmethod
    def empty(cls) -> "KernelTable":
        obj = np.array([], dtype=object)
        i64 = np.array([], dtype=np.int64)
        return cls(obj, i64, i64, i64, i64, obj, np.array([], dtype=np.float64), obj, obj, i64)


@dataclass(frozen=True)
class OpTable:
    """Host-side framework ops (ATen, TF, MXNet operators), columnar; nested ops included."""

    name: np.ndarray  # object
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    tid: np.ndarray  # int64 thread id

    def __len__(self) -> int:
        return len(self.name)


@dataclass(frozen=True)
class MemoryEvents:
    """Allocator events in time order: positive bytes allocate, negative free."""

    ts_ns: np.ndarray  # int64
    addr: np.ndarray  # uint64 allocation address
    bytes: np.ndarray  # int64
    total_allocated: np.ndarray  # int64: allocator's live bytes after the event
    device: np.ndarray  # int64: -1 CPU, else CUDA ordinal

    def __len__(self) -> int:
        return len(self.ts_ns)


@dataclass(frozen=True)
class StepSpan:
    """One training iteration as the trace marks it (`ProfilerStep#N`)."""

    number: int
    start_ns: int  # host start
    host_end_ns: int  # host end of the span
    end_ns: int  # max(host end, end of the last kernel launched inside the span)


@dataclass(frozen=True)
class TraceRecords:
    """Everything a trace reader extracts from one trace window."""

    source: str
    device_kind: str  # "cuda" or "cpu": what the kernel rows ran on
    kernels: KernelTable
    busy_start_ns: np.ndarray  # device occupancy intervals: kernels (GPU) or top-level ops (CPU)
    busy_end_ns: np.ndarray
    steps: tuple[StepSpan, ...]
    window_start_ns: int
    window_end_ns: int
    ops: OpTable
    memory: MemoryEvents | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What GPU idle time waited on (analysis.idle_time), as (start_ns, end_ns) int64 arrays: the GPU's memcpy/memset
    # intervals and the host's synchronisation calls. None: the reader does not keep them.
    copies: tuple[np.ndarray, np.ndarray] | None = None
    syncs: tuple[np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True)
class IterationLog:
    """Every iteration's wall time and which iterations each window sampled (inclusive indices)."""

    times_ns: np.ndarray  # int64, one per iteration in run order
    warmup: int  # iterations before the stable phase (where it was found, or --warmup)
    warmup_detected: bool  # False when --warmup was given, or the budget ran out before a stable phase
    stable: bool | None  # False: never reached within the budget; None: not checked (--warmup given)
    timing_window: tuple[int, int] | None
    trace_window: tuple[int, int] | None
    timing_window_ns: int | None  # wall time of the timing window, device-synchronised ends
    # Samples all workers processed during the timing window, when the workload counts them
    # itself (several workers, A3C); None: samples_per_step x iterations.
    timing_window_samples: float | None = None
    # The iterations are a trace's ProfilerStep spans (`tbd analyze`), not a run tbd timed itself:
    # no warm-up was watched, and times_ns are the spans' lengths. step_numbers are their N.
    from_trace: bool = False
    step_numbers: tuple[int, ...] = ()
    # Warm-up iterations run: the detector decides some iterations after the start it finds (it
    # needs two windows beyond it), so more run than `warmup`. None: a log from before this field.
    warmup_run: int | None = None

    @property
    def warmup_seconds(self) -> float:
        return float(self.times_ns[: self.warmup].sum()) / 1e9


@dataclass(frozen=True)
class CpuSample:
    """Per-core OS time counters (seconds) at the two ends of a window."""

    busy_s: np.ndarray  # per core: active time during the window
    total_s: np.ndarray  # per core: elapsed counter time during the window
    wall_ns: int
    cores: int


@dataclass(frozen=True)
class NvmlSample:
    """`utilization.gpu` readings (percent) taken during the timing window."""

    utilization_pct: np.ndarray  # float64
    device_index: int
