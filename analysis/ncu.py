"""Nsight Compute (ncu) command lines: the one that measures exactly the chosen launches of one
kernel (`ncu_command`), and the one session that measures the top ranked kernels of a run
(`ncu_plan`, `tbd profile --ncu N`). Pure: names and rows in, argv out.

One kernel's launches. Flags, from the Nsight Compute CLI user guide (NsightComputeCli, v2026.1; "Profile", "NVTX
Filtering", "Console Output", "File" and "Kernel Renaming"):

- `--kernel-name regex:^...$` with `--kernel-name-base demangled` matches a kernel by its whole
  demangled name ("demangled: Demangled function name, including parameters, templates"; a
  `regex:` is a partial match, hence the anchors). `--rename-kernels off` keeps ncu from
  "auto-simplifying" demangled names, which it does by default, and the filter matches the
  simplified name. `--kernel-name-base function` matches the bare function name instead
  ("function: Function name without parameters, templates etc.": "vectorized_elementwise_kernel").
- `--launch-skip S --launch-count C`: "The number takes into account only launches that match the
  kernel filters", so S counts earlier launches of the same kernel name, not all launches (that
  the NVTX filter is one of those filters, so S counts from the range's start, is how tbd reads
  the guide; it does not say so in as many words).
- `--nvtx --nvtx-include "tbd@tbd.trace_window/"`: a push/pop range is written with a trailing "/"
  ("When only a single range name is given, the delimiter must be appended to indicate that this
  refers to a push/pop range") and its domain before "@" ("Include kernels wrapped inside push/pop
  range 'A_range' of 'Domain-A': ncu --nvtx --nvtx-include "Domain-A@A_range/""); the characters
  @ , [ ] / * + in a name are escaped with "\". `--nvtx-push-pop-scope process`: push/pop ranges
  are per thread by default, and PyTorch launches backward kernels from its autograd thread, not
  the thread that pushed tbd's range.
- `--metrics a,b,regex:^...$`: "regex:<expression> expands to all metrics that partially match the
  expression", which "must not include any commas".
- `--csv --page raw --print-units base`: one row per launch, every metric in its base unit (what
  profilers.ncu_csv reads); `--log-file F` sends all of ncu's output there instead of mixing it with
  the program's own stdout. Or `--export R` writes a report R.ncu-rep, printed later with
  `csv_export_command`.
- `--target-processes all`: tbd runs its workload in a child process.

`--rename-kernels` and `--nvtx-push-pop-scope` are in the current guide; an ncu too old to know
them stops with an unknown-option error rather than measuring other launches.

Which name to match with: ncu and Kineto demangle differently. Kineto (and so tbd's traces) print
"void at::native::elementwise_kernel<128, 2, ...{lambda(int)#1}>(int, ...)", ncu prints
"void at::native::elementwise_kernel<(int)128, (int)2, ...[lambda(int) (instance 1)]>(int, T3)"
(and "unsigned int *" for "unsigned int*", "const float *" for "float const*"). A trace's name is
therefore ncu's demangled name only for names both print alike: C-linkage kernels such as cuBLAS's
"ampere_sgemm_128x64_nn". For any other kernel use `name_base="function"` with
`kernel_function_name(name)`, and count the launch skip over every launch with that function name:
ncu then counts them all as the same kernel.

DRAM bytes are measured with ncu's default `--cache-control all` (caches flushed before each
replay pass): a launch's cold-cache traffic, typically more than it moves inside training, where
its inputs may still be in L2.

A run's top kernels in one session. Each ranked row carries its own command (analysis.kernel_rows), which measures that one group in
the last traced iteration; running N of them would repeat the workload's warm-up N times. One
session instead selects every launch of the chosen groups' function names in the *first* traced
iteration: the kernel filter is the alternation of their function names (ncu's
`--kernel-name-base function`; a C-linkage name is its own function name), the NVTX filter tbd's
trace window, and `--launch-count` the number of launches with those function names that one
traced iteration makes (their groups' calls over the traced iterations). In a stable phase every
iteration launches the same kernels, so the first that many matches are that iteration's. Other
template instances of the same function are measured along (they pass the same filter) and merge
into their own rows.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from tbd.core.errors import UsageError
from tbd.core.profile_result import KernelRow, Profile

# Only core imports. The metric names are those analysis.counters reads, the ellipsis the one
# profilers.traces.names.clean_name shortens names with (a test holds both equal).
#: FP32/FP16/FP64 add, mul and fma thread instructions (counter_work.FLOP_METRICS).
FLOP_METRICS = tuple(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum"
                     for p in "fhd" for op in ("add", "mul", "fma"))
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
ELLIPSIS = "\u2026"
#: The NVTX domain and range tbd pushes around its trace window (profilers.pytorch.hook, profilers.loop).
NVTX_DOMAIN = "tbd"
NVTX_RANGE = "tbd.trace_window"
#: Tensor-pipe counters whatever the GPU names them (analysis.counters): warp instructions
#: (sm__inst_executed_pipe_tensor.sum, or per opcode) and math ops per tensor path.
TENSOR_METRICS = (r"regex:^sm__inst_executed_pipe_tensor[a-z0-9_]*\.sum$",
                  r"regex:^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$")
#: FP32/FP16/FP64 add, mul and fma thread instructions, tensor-pipe work, DRAM bytes read and written.
DEFAULT_METRICS = FLOP_METRICS + TENSOR_METRICS + DRAM_METRICS
NAME_BASES = ("demangled", "function")
#: The program a command runs for a trace tbd did not run: the user writes their own there (the report says so once).
#: ncu takes the program and its arguments after its own options (`ncu [options] program [arguments]`).
TARGET_PLACEHOLDER = ("python", "train.py")
#: Where the launch skip counts from in a trace from another tool: no NVTX range marks its window.
FOREIGN_SKIP_FROM = ("the start of the trace's window, but ncu counts from the program's start (no NVTX range marks "
                     "the window): add this kernel's launches that ran before the window")
_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}")
_NVTX_SPECIAL = frozenset("@,[]/*+")


def ncu_command(kernel_name: str, launch_skip: int, launch_count: int, target: list[str] | None,
                nvtx_range: str | None = None, metrics: tuple[str, ...] = DEFAULT_METRICS, report: str | None = None,
                *, nvtx_domain: str | None = NVTX_DOMAIN, name_base: str = "demangled", log_file: str | None = None,
                ncu: str = "ncu") -> list[str]:
    """The ncu argv that measures launches S+1 .. S+C of one kernel (module docstring), then runs `target`.

    Args:
        kernel_name: the kernel's demangled name; with name_base "function", its function name or
            any name `kernel_function_name` reduces to it. A name shortened by
            `traces.names.clean_name` (head ... tail) matches by its head and tail.
        launch_skip, launch_count: S and C, counted over the launches ncu matches: inside
            `nvtx_range` when given, of the same name (the same function name with "function").
        target: the program and its arguments, appended last; None leaves them off.
        nvtx_range: a push/pop NVTX range (in `nvtx_domain`, None: the default domain) the launches
            must be inside, e.g. NVTX_RANGE.
        metrics: what to collect (DEFAULT_METRICS).
        report: write an .ncu-rep report there instead of printing the CSV.
        name_base: "demangled" (the whole name) or "function" (the bare function name).
        log_file: with no report, the file the CSV (and ncu's messages) go to instead of stdout.
        ncu: the ncu executable.
    Raises:
        UsageError: an empty or multi-line name, a negative skip, a count below 1, an unknown
            name_base, a metric with a comma, or an NVTX name ncu cannot take.
    """
    if name_base not in NAME_BASES:
        raise UsageError(f"name_base must be one of {', '.join(NAME_BASES)}, not {name_base!r}")
    _check_name(kernel_name)
    if isinstance(launch_skip, bool) or not isinstance(launch_skip, int) or launch_skip < 0:
        raise UsageError(f"launch skip must be a whole number >= 0, not {launch_skip!r}")
    if isinstance(launch_count, bool) or not isinstance(launch_count, int) or launch_count < 1:
        raise UsageError(f"launch count must be a whole number >= 1, not {launch_count!r}")
    if not metrics or any(not m or "," in m for m in metrics):
        raise UsageError("metrics must be a non-empty list of names without commas")
    regex = name_regex(kernel_name if name_base == "demangled" else kernel_function_name(kernel_name))
    argv = ncu_argv(regex, name_base, launch_skip, launch_count, nvtx_range, metrics, nvtx_domain=nvtx_domain,
                    ncu=ncu)
    if report is not None:
        argv += ["--export", report]
    else:
        argv += ["--csv", "--page", "raw", "--print-units", "base"]
        if log_file is not None:
            argv += ["--log-file", log_file]
    return argv + list(target or [])


def ncu_argv(kernel_regex: str, name_base: str, launch_skip: int | None, launch_count: int, nvtx_range: str | None,
             metrics: tuple[str, ...], *, nvtx_domain: str | None = NVTX_DOMAIN, ncu: str = "ncu") -> list[str]:
    """ncu's process, NVTX, kernel-name, launch and metric options (module docstring), without the
    output options or the target. `kernel_regex` is anchored already; launch_skip None leaves it out."""
    argv = [ncu, "--target-processes", "all"]
    if nvtx_range is not None:
        argv += ["--nvtx", "--nvtx-push-pop-scope", "process", "--nvtx-include", nvtx_filter(nvtx_range, nvtx_domain)]
    # Renaming off for either base: the names ncu prints (and tbd merges by) stay its full demangled ones.
    argv += ["--kernel-name-base", name_base, "--rename-kernels", "off", "--kernel-name", "regex:" + kernel_regex]
    if launch_skip is not None:
        argv += ["--launch-skip", str(launch_skip)]
    return argv + ["--launch-count", str(launch_count), "--metrics", ",".join(metrics)]


def csv_export_command(report: str, *, log_file: str | None = None, ncu: str = "ncu") -> list[str]:
    """The ncu argv that prints a report written by `ncu_command(..., report=R)` as the CSV ncu_csv reads."""
    path = report if report.endswith(".ncu-rep") else report + ".ncu-rep"  # --export appends the suffix
    argv = [ncu, "--import", path, "--csv", "--page", "raw", "--print-units", "base"]
    return argv + (["--log-file", log_file] if log_file is not None else [])


def shell_line(argv: list[str]) -> str:
    """argv as one line for a POSIX shell, every argument quoted where needed."""
    return shlex.join(argv)


def name_regex(name: str) -> str:
    """An anchored regex that matches exactly `name` (or, for a name shortened around "…", its head and
    tail). Only the characters special in ECMAScript, PCRE and Python regexes are escaped, so every
    engine reads the escapes alike (Python's re.escape also escapes " ", "#", "&" and "~")."""
    parts = name.split(ELLIPSIS) if name.count(ELLIPSIS) == 1 else [name]
    return "^" + ".*".join("".join("\\" + c if c in _REGEX_SPECIAL else c for c in part) for part in parts) + "$"


def nvtx_filter(range_name: str, domain: str | None = NVTX_DOMAIN) -> str:
    """ncu's --nvtx-include configuration for push/pop range `range_name` of `domain` (None: the default)."""
    parts = [domain, range_name] if domain is not None else [range_name]
    for part in parts:
        if not part or "\\" in part or part.startswith("regex:") or any(c in part for c in "\n\r\0"):
            raise UsageError(f"NVTX name {part!r} cannot be given to ncu (empty, a backslash, regex:, a line break)")
    escaped = ["".join("\\" + c if c in _NVTX_SPECIAL else c for c in part) for part in parts]
    return "@".join(escaped) + "/"


def kernel_function_name(name: str) -> str:
    """The bare function name ncu's `--kernel-name-base function` matches, from a demangled kernel name
    as Kineto or ncu prints it: the return type, namespaces, template arguments and parameters dropped
    ("void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)" -> "vectorized_elementwise_kernel").
    A name that is already bare is returned as is. A name shortened by `traces.names.clean_name`
    (head ... tail, its brackets no longer balanced) is read from its head: the name before the first
    template argument list or parameter list."""
    text = name.strip()
    head = text.split(ELLIPSIS)[0].replace("(anonymous namespace)", "_").replace("<unnamed>", "_")
    cuts = [i for i in (head.find("<"), head.find("(")) if i >= 0]
    if text.count(ELLIPSIS) == 1 and cuts:
        bare = head[:min(cuts)].rstrip()
        bare = bare[max(bare.rfind("::") + 2 if "::" in bare else 0, bare.rfind(" ") + 1):]
        return bare or text
    for close in (")", ">"):  # the parameter list, then the template arguments
        text = text.rstrip()
        if text.endswith(close):
            opening = _matching_open(text)
            if opening > 0:
                text = text[:opening]
    text = text.rstrip()
    scope, space = _last_at_depth0(text, "::"), _last_at_depth0(text, " ")
    cut = max(scope + 2 if scope >= 0 else 0, space + 1 if space >= 0 else 0)
    return text[cut:] or name.strip()


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise UsageError("the kernel name is empty")
    if any(c in name for c in "\n\r\0"):
        raise UsageError(f"the kernel name {name[:60]!r} has a line break or NUL: no kernel is named so")


def _matching_open(text: str) -> int:
    """Index of the bracket that opens the group `text` ends with, -1 if unbalanced."""
    pairs = {")": "(", ">": "<", "]": "[", "}": "{"}
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c in pairs:
            depth += 1
        elif c in "(<[{":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _last_at_depth0(text: str, token: str) -> int:
    """Index of the last `token` outside every bracket, -1 if none."""
    depth, last = 0, -1
    for i, c in enumerate(text):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif depth == 0 and text.startswith(token, i):
            last = i
    return last


@dataclass(frozen=True)
class NcuPlan:
    rows: list[KernelRow]  # the ranked groups aimed at, in the ranking's order (`ranked_rows`)
    functions: list[str]  # their function names, as the kernel filter's alternatives
    launch_count: int  # launches of those function names in one traced iteration
    argv: list[str]  # the ncu command, the target last


def ranked_rows(profile: Profile, top: int) -> list[KernelRow]:
    """The first `top` groups of the default ranking that have a measuring command (CUDA groups): the
    most time reaching the roofline would win back first (`Profile.recoverable_kernels`); for a
    profile saved before that ranking, the longest groups of the two Table V rankings."""
    ranking = profile.recoverable_kernels or sorted(profile.low_util_kernels + profile.low_bandwidth_kernels,
                                                    key=lambda r: -r.time_s)
    seen, rows = set(), []
    for row in ranking:
        if row.name not in seen and row.ncu and row.ncu.get("command"):
            seen.add(row.name)
            rows.append(row)
    return rows[:top]


def ncu_plan(profile: Profile, top: int, target: list[str], report: str, *, ncu: str = "ncu",
             metrics: tuple[str, ...] = DEFAULT_METRICS) -> NcuPlan | str:
    """The session measuring the `top` ranked groups, or why there is none (a sentence).

    target: the command that repeats the run's windows (analysis.assemble.ncu_target, filled in).
    report: the .ncu-rep path ncu writes (`ncu_command.csv_export_command` prints it as CSV).
    """
    rows = ranked_rows(profile, top)
    if not rows:
        return "no ranked CUDA kernel to measure (a CPU run, or no kernel in the ranking)"
    window = profile.iterations.trace_window if profile.iterations else None
    if not window:
        return "the run has no trace window to count launches in"
    iterations = window[-1] - window[0] + 1
    functions = list(dict.fromkeys(kernel_function_name(r.name) for r in rows))
    wanted = set(functions)
    calls = sum(r.calls for r in profile.kernels if kernel_function_name(r.name) in wanted)
    count = max(1, math.ceil(calls / iterations))
    alternatives = "|".join(name_regex(f)[1:-1] for f in functions)  # name_regex anchors each: ^...$
    argv = ncu_argv(f"^({alternatives})$", "function", None, count, NVTX_RANGE, metrics, ncu=ncu)
    argv += ["--export", report, "--force-overwrite"]
    return NcuPlan(rows, functions, count, argv + list(target))
