"""Runs side by side: every figure with its ratio to the first run, op-by-op time deltas, and the
peak ratio set against the measured speed ratio.

Pure: finished `Profile`s in, a `Comparison` out. The first profile is the reference ("A").
Ops are matched by the op that launched the kernels (`Profile.op_groups`), because kernel names
differ between GPUs and libraries. Op times are per traced iteration, so runs whose trace windows
hold different numbers of iterations compare fairly; a run with no iterations (a trace without
ProfilerStep spans) has no per-iteration op times, and says so.

Every run is named by a label (`--label`, else model, device and batch) and carries its measurement
quality: an unreliable run says so, and a ratio of throughputs carries its 95 % interval from both
runs' intervals (`ratio_interval`). Runs that are not the same workload (model, batch or framework
differ; two traces launching different ops) get no speed ratio and no attribution of the gap to ops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tbd.analysis.op_groups import NO_LAUNCH_OP
from tbd.core.comparison import ComparedRun, Comparison, Gap, MetricComparison, OpComparison
from tbd.core.profile_cluster import Cluster
from tbd.core.profile_result import MEMORY_CATEGORIES, PARTIAL, Profile, partial_reason

_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: The spec keys whose difference changes what a ratio means (the device is what is being compared).
_SPEC_KEYS = ("model", "framework", "batch", "precision", "size", "threads")


@dataclass(frozen=True)
class Side:
    """One profile to compare, where it came from (the path given) and its name (None: made from the profile)."""

    source: str
    profile: Profile
    name: str | None = None


def compare_profiles(sides: Sequence[Side], notes: Sequence[str] = ()) -> Comparison:
    """Compare two or more profiles against the first.

    Args:
        sides: the profiles in the order given; the first is the reference.
        notes: the caller's own notes to keep with the comparison (which peak an option set, ...).
    Returns:
        The Comparison: runs, metrics with ratios, ops by largest time delta, one Gap per later run.
    """
    if len(sides) < 2:
        raise ValueError("compare_profiles needs at least two profiles")
    profiles = [s.profile for s in sides]
    names = run_names(profiles, [s.name for s in sides], [s.source for s in sides])
    runs = [_run(run_label(i), s, name) for i, (s, name) in enumerate(zip(sides, names))]
    iterations = [r.traced_iterations for r in runs]
    unlike = [None] + [not_same_workload(profiles[0], p) for p in profiles[1:]]
    ops = op_comparisons(profiles, iterations, attributable=[u is None for u in unlike])
    metrics = metric_comparisons(profiles, ops)
    gaps = [_gap(runs[0], runs[i], metrics, ops, i, unlike[i]) for i in range(1, len(runs))]
    return Comparison(runs=runs, metrics=metrics, ops=ops, gaps=gaps, differences=differences(profiles),
                      notes=[*notes, *_notes(runs, profiles)])


def run_label(i: int) -> str:
    """The letter of the i-th run (0-based): A, B, ..., Z, then R27, R28, ..."""
    return _LABELS[i] if i < len(_LABELS) else f"R{i + 1}"


def _trace_stem(source: str) -> str:
    """A trace file's name without its directory and its .json/.json.gz/.pt.trace ending."""
    name = re.split(r"[\\/]", source.rstrip("/\\"))[-1]
    return re.sub(r"(\.pt\.trace)?\.json(\.gz)?$", "", name) or name


def default_name(profile: Profile) -> str:
    """A run's name from what ran: "resnet50 · Tesla V100-SXM2-16GB · batch 32" (a trace: its file's stem)."""
    spec, env = profile.spec, profile.environment
    gpu, cpu = env.get("gpu") or {}, env.get("cpu") or {}
    model = _trace_stem(str(spec.get("model") or "")) if "trace" in spec else spec.get("model")
    parts = [str(model or "n/a"), short_device_name(str(gpu.get("name") or cpu.get("model") or spec.get("device") or "n/a"))]
    if spec.get("batch") is not None:
        parts.append(f"batch {spec['batch']}")
    return " · ".join(parts)


#: What a device's name may lose in a run's name: trademark marks, "Processor"/"CPU", the clock ("@ 2.90GHz"), and
#: NVIDIA's prefix ("NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3").
_DEVICE_NOISE = re.compile(r"\((R|TM|tm|r)\)|\bProcessor\b|\bCPU\b|@\s*[\d.]+\s*[GM]Hz|^NVIDIA\s+")


def short_device_name(name: str) -> str:
    """A device's name as a run's name shows it: "Intel(R) Xeon(R) Processor @ 2.90GHz" -> "Intel Xeon"."""
    return " ".join(_DEVICE_NOISE.sub(" ", name).split()) or name


def run_names(profiles: Sequence[Profile], given: Sequence[str | None], sources: Sequence[str]) -> list[str]:
    """Each run's name: the one given, else `default_name`; default names two runs share get what
    tells them apart (the spec keys that differ, "threads 1" / "threads 2", else the path given)."""
    names = [g or default_name(p) for g, p in zip(given, profiles)]
    for name in set(names):
        same = [i for i, n in enumerate(names) if n == name and not given[i]]
        if len(same) < 2:
            continue
        keys = [k for k in _SPEC_KEYS if len({str(profiles[i].spec.get(k)) for i in same}) > 1]
        for i in same:
            extra = ", ".join(f"{k} {profiles[i].spec.get(k)}" for k in keys) or _trace_stem(sources[i])
            names[i] = f"{name} ({extra})"
    return names


def traced_iterations(profile: Profile) -> int | None:
    """Iterations in the trace window (ProfilerSteps of a trace), None when there are none."""
    it = profile.iterations
    if it is None or not it.trace_window:
        return None
    return it.trace_window[1] - it.trace_window[0] + 1


def mean_iteration_s(profile: Profile) -> float | None:
    """Mean iteration time over the timing window (a trace's steps), None when there is none."""
    it = profile.iterations
    if it is None or not it.timing_window or not it.times_s:
        return None
    first, last = it.timing_window
    times = it.times_s[first:last + 1]
    return sum(times) / len(times) if times else None


def _run(label: str, side: Side, name: str) -> ComparedRun:
    p = side.profile
    spec, env = p.spec, p.environment
    gpu, cpu = env.get("gpu") or {}, env.get("cpu") or {}
    bw = p.metrics.memory_bandwidth
    units, unit_name = _compute_units(gpu, cpu)
    return ComparedRun(label=label, source=side.source, status=p.status, model=spec.get("model"),
                       framework=spec.get("framework"), batch=spec.get("batch"), device=spec.get("device"),
                       device_name=gpu.get("name") or cpu.get("model"),
                       peak_fp32_flops=p.metrics.flop_util_pct.peak_flops,
                       peak_source=p.metrics.flop_util_pct.peak_source,
                       memory_bandwidth=bw.value if bw is not None else None,
                       traced_iterations=traced_iterations(p), compute_units=units, compute_unit_name=unit_name,
                       device_memory_bytes=_positive_int(gpu.get("memory_bytes")),
                       peaks_by_precision=dict(p.metrics.flop_util_pct.peaks_by_precision), name=name,
                       reliable=p.quality.reliable if p.quality is not None else None,
                       quality_warnings=list(p.quality.warnings) if p.quality is not None else [],
                       quality_reason=None if p.quality is not None else _no_quality(p),
                       throughput_interval_pct=p.metrics.throughput.interval_pct)


def _no_quality(p: Profile) -> str:
    if "trace" in p.spec:
        return "a trace tbd did not run: no measurement-quality record"
    return "the profile has no measurement-quality record (written by an older tbd)"


def _compute_units(gpu: dict, cpu: dict) -> tuple[int | None, str | None]:
    if gpu:
        count = _positive_int(gpu.get("sm_count"))
        return count, ("CUs" if gpu.get("vendor") == "amd" else "SMs") if count else None
    count = _positive_int(cpu.get("cores_logical"))
    return count, "cores" if count else None


def _positive_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def op_comparisons(profiles: Sequence[Profile], iterations: Sequence[int | None],
                   attributable: Sequence[bool] | None = None) -> list[OpComparison]:
    """Per launching op: time per traced iteration in each run, its delta to the first and share of the gap.

    An op a run did not launch counts 0 s there (its kernels are absent, a measurement); a run
    without iterations has None throughout. Shares of the net change are null when that change is
    below MATERIAL_CHANGE_PCT of the first run's kernel time per iteration, and for a run whose
    `attributable` is False (not the same workload as the first: `not_same_workload`). Largest
    absolute delta first (ties: the first run's time).
    """
    attributable = list(attributable) if attributable is not None else [True] * len(profiles)
    per_run = [{g.name: g for g in p.op_groups} for p in profiles]
    names = list(dict.fromkeys(name for groups in per_run for name in groups))
    totals = [_per_iteration(sum(g.time_s for g in groups.values()), n) for groups, n in zip(per_run, iterations)]
    total_delta = [None if t is None or totals[0] is None else t - totals[0] for t in totals]
    rows = []
    for name in names:
        times = [_per_iteration(groups[name].time_s if name in groups else 0.0, n)
                 for groups, n in zip(per_run, iterations)]
        utils = [groups[name].util_pct if name in groups else None for groups in per_run]
        delta = [None if t is None or times[0] is None else t - times[0] for t in times]
        share = [100.0 * d / td if d is not None and ok and _net_change_is_material(td, totals[0]) else None
                 for d, td, ok in zip(delta, total_delta, attributable)]
        rows.append(OpComparison(op=name, time_per_iteration_s=times, util_pct=utils, delta_s=delta,
                                 gap_share_pct=share))
    rows.sort(key=lambda r: (-max((abs(d) for d in r.delta_s if d is not None), default=0.0),
                             -(r.time_per_iteration_s[0] or 0.0), r.op))
    return rows


def _per_iteration(seconds: float, iterations: int | None) -> float | None:
    return None if not iterations else seconds / iterations


def kernel_time_per_iteration(ops: Sequence[OpComparison], run: int) -> float | None:
    """Summed kernel (op self) time per traced iteration of run `run`, None without iterations."""
    times = [o.time_per_iteration_s[run] for o in ops]
    if not times or any(t is None for t in times):
        return None
    return sum(times)


def metric_comparisons(profiles: Sequence[Profile], ops: Sequence[OpComparison]) -> list[MetricComparison]:
    """The contract's figures for every run, each with its ratio to the first."""
    rows = [_throughput(profiles)]
    means = [mean_iteration_s(p) for p in profiles]
    rows.append(_metric("iteration_s", "Iteration time", "s", False,
                        [(m, None if m is not None else "no timed iterations") for m in means]))
    kernel_times = [kernel_time_per_iteration(ops, i) for i in range(len(profiles))]
    no_ops = "no iterations to divide the trace window's kernel time by"
    rows.append(_metric("kernel_time_per_iteration_s", "Kernel time / traced iteration", "s", False,
                        [(t, None if t is not None else no_ops) for t in kernel_times]))
    for key, label, better in (("gpu_busy_pct", "GPU busy", True), ("gpu_busy_nvml_pct", "GPU busy (NVML)", True),
                               ("flop_util_pct", "FLOP utilization", True), ("cpu_util_pct", "CPU utilization", None)):
        rows.append(_metric(key, label, "%", better, [_value_of(key)(p) for p in profiles]))
    for cat in (*MEMORY_CATEGORIES, "allocator_peak"):
        rows.append(_metric(f"memory.{cat}", _MEMORY_LABELS[cat], "bytes", None, [_memory_of(cat)(p) for p in profiles]))
    return rows + cluster_comparisons(profiles)


#: Why a cluster row is null for a profile without a cluster summary.
NO_CLUSTER = "no cluster summary: a single-process run"


def cluster_comparisons(profiles: Sequence[Profile]) -> list[MetricComparison]:
    """Multi-rank figures (Profile.cluster) side by side: world size, global throughput, mean
    communication share, scaling efficiency at the largest process count measured. None when no
    profile has a cluster summary (the comparison then holds exactly what it held before them)."""
    clusters = [p.cluster for p in profiles]
    if all(c is None for c in clusters):
        return []
    first_unit = next((c.throughput_unit for c in clusters if c is not None and c.throughput_unit), None)

    def figure(read: Callable[[Cluster], tuple[float | None, str | None]]) -> list[tuple[float | None, str | None]]:
        return [(None, NO_CLUSTER) if c is None else read(c) for c in clusters]

    throughput = _metric("cluster.global_throughput", "Global throughput", first_unit or "", True, figure(
        lambda c: (c.global_throughput, c.reasons.get("global_throughput"))))
    for i, c in enumerate(clusters):
        if c is not None and c.throughput_unit != first_unit and throughput.ratios[i] is not None:
            throughput.ratios[i] = None
            throughput.reasons[i] = f"unit {c.throughput_unit} differs from {first_unit}: no ratio"
    return [
        _metric("cluster.world_size", "World size", "ranks", None, figure(
            lambda c: (c.world_size, None if c.world_size is not None else "the job's world size was not recorded"))),
        throughput,
        _metric("cluster.comm_share_pct", "Communication share (mean)", "%", False, figure(
            lambda c: (c.comm_share_mean_pct, c.reasons.get("comm_share_mean_pct")))),
        _metric("cluster.scaling_efficiency_pct", "Scaling efficiency (largest N)", "%", True,
                figure(_largest_scaling)),
    ]


def _largest_scaling(c: Cluster) -> tuple[float | None, str | None]:
    """The scaling efficiency at the largest process count, or why there is none."""
    if not c.scaling:
        return None, c.scaling_reason or "scaling not measured"
    row = max(c.scaling, key=lambda r: r.processes)
    if row.efficiency_pct is None:
        return None, f"at {row.processes} processes: {row.reason or 'not known'}"
    return row.efficiency_pct, None


_MEMORY_LABELS = {"weights": "Weights", "gradients": "Gradients", "feature_maps": "Feature maps",
                  "workspace": "Workspace", "dynamic": "Dynamic", "allocator_peak": "Allocator peak"}


def _value_of(key: str) -> Callable[[Profile], tuple[float | None, str | None]]:
    def read(p: Profile) -> tuple[float | None, str | None]:
        v = getattr(p.metrics, key)
        return v.value, v.reason
    return read


def _memory_of(cat: str) -> Callable[[Profile], tuple[float | None, str | None]]:
    def read(p: Profile) -> tuple[float | None, str | None]:
        m = p.metrics.memory_bytes
        value = getattr(m, cat)
        return value, None if value is not None else m.reasons.get(cat, "not measured")
    return read


def _metric(key: str, label: str, unit: str, better: bool | None,
            pairs: Sequence[tuple[float | None, str | None]]) -> MetricComparison:
    values = [None if v is None else float(v) for v, _ in pairs]
    return MetricComparison(key=key, label=label, unit=unit, values=values, reasons=[r for _, r in pairs],
                            ratios=_ratios(values), higher_is_better=better)


def _ratios(values: Sequence[float | None]) -> list[float | None]:
    first = values[0]
    return [None if v is None or not first else v / first for v in values]


def _throughput(profiles: Sequence[Profile]) -> MetricComparison:
    """Throughput; a run whose unit differs from the first's (images/s vs sentences/s) gets no ratio."""
    first_unit = profiles[0].metrics.throughput.unit
    values = [p.metrics.throughput.value for p in profiles]
    reasons = [p.metrics.throughput.reason for p in profiles]
    ratios = _ratios(values)
    for i, p in enumerate(profiles):
        if p.metrics.throughput.unit != first_unit and ratios[i] is not None:
            ratios[i] = None
            reasons[i] = f"unit {p.metrics.throughput.unit} differs from A's {first_unit}: no ratio"
    bounds = [ratio_interval(r, profiles[0].metrics.throughput.interval_pct, p.metrics.throughput.interval_pct)
              if r is not None else (None, None, None) for r, p in zip(ratios, profiles)]
    units = [p.metrics.throughput.unit for p in profiles]
    units = units if len(set(units)) > 1 else []
    if all(low is None for low, _, _ in bounds):
        return MetricComparison(key="throughput", label="Throughput", unit=first_unit, values=values,
                                reasons=reasons, ratios=ratios, higher_is_better=True, units=units)
    return MetricComparison(key="throughput", label="Throughput", unit=first_unit, values=values, reasons=reasons,
                            ratios=ratios, higher_is_better=True, ratio_low=[low for low, _, _ in bounds],
                            ratio_high=[high for _, high, _ in bounds], units=units)


def ratio_interval(ratio: float, ref_pct: float | None, run_pct: float | None) -> tuple[float | None, float | None,
                                                                                       str | None]:
    """The 95 % interval of a ratio run / ref from each side's own 95 % interval: the ratio of the bounds.

    Each side's value x lies within x (1 ± h) (h: its interval's half-width, `interval_pct` / 100);
    the ratio then lies within [r (1 - h_run) / (1 + h_ref), r (1 + h_run) / (1 - h_ref)]: each
    side taken at its worst against the other. That is wider than a propagated interval (relative
    half-widths added in quadrature), and assumes nothing about how the two runs' noise is distributed.

    Args:
        ratio: run / ref, the two values' ratio.
        ref_pct, run_pct: the half-widths, % of each value; None: that side has no interval.
    Returns:
        (low, high, reason): both None without an interval; high None (unbounded, the reason says so)
        when the reference's interval reaches 0 (h_ref >= 1); low 0 when the run's does.
    """
    if ref_pct is None or run_pct is None:
        return None, None, None
    h_ref, h_run = ref_pct / 100.0, run_pct / 100.0
    low = max(0.0, ratio * (1.0 - h_run) / (1.0 + h_ref))
    if h_ref >= 1.0:
        return low, None, f"the reference's interval (±{ref_pct:.3g} %) reaches 0: unbounded above"
    return low, ratio * (1.0 + h_run) / (1.0 - h_ref), None


def _find(metrics: Sequence[MetricComparison], key: str) -> MetricComparison:
    return next(m for m in metrics if m.key == key)


def _gap(ref: ComparedRun, run: ComparedRun, metrics: Sequence[MetricComparison], ops: Sequence[OpComparison],
         i: int, unlike: str | None = None) -> Gap:
    peak_ratio = (run.peak_fp32_flops / ref.peak_fp32_flops
                  if run.peak_fp32_flops and ref.peak_fp32_flops else None)
    total = _find(metrics, "kernel_time_per_iteration_s")
    delta = None if total.values[i] is None or total.values[0] is None else total.values[i] - total.values[0]
    reliable = both_reliable(ref.reliable, run.reliable)
    if unlike is not None:
        return Gap(label=run.label, peak_ratio=peak_ratio, speed_ratio=None, speed_basis=None,
                   speed_reason="not the same workload: no speed ratio is claimed",
                   kernel_time_delta_s=delta, top_op=None, top_op_delta_s=None, top_op_share_pct=None,
                   reliable=reliable, comparable=False, not_comparable_reason=unlike)
    speed, basis, reason = speed_ratio(metrics, i, same_batch=ref.batch == run.batch)
    low = high = None
    interval_reason = None
    if speed is not None and basis == "throughput":
        low, high, interval_reason = ratio_interval(speed, ref.throughput_interval_pct, run.throughput_interval_pct)
        if low is None:
            interval_reason = _no_interval([r for r in (ref, run) if r.throughput_interval_pct is None])
    elif speed is not None:
        interval_reason = "one measurement per run: no interval"
    moved = [o for o in ops if o.delta_s[i]]
    # The op that moved most in the direction of the net change (any direction when there is none).
    top = max(moved, key=lambda o: o.delta_s[i] * (1 if not delta or delta > 0 else -1), default=None)
    share = top.gap_share_pct[i] if top is not None else None
    return Gap(label=run.label, peak_ratio=peak_ratio, speed_ratio=speed, speed_basis=basis, speed_reason=reason,
               kernel_time_delta_s=delta, top_op=top.op if top is not None else None,
               top_op_delta_s=top.delta_s[i] if top is not None else None, top_op_share_pct=share,
               speed_ratio_low=low, speed_ratio_high=high, speed_interval_reason=interval_reason,
               reliable=reliable)


def _no_interval(runs: Sequence[ComparedRun]) -> str:
    """Why the runs given have no throughput interval: "no interval: A and B have one timing window (--repeat 1)"."""
    by_reason: dict[str, list[str]] = {}
    for r in runs:
        traced = r.quality_reason is not None and "trace" in r.quality_reason
        by_reason.setdefault("a trace" if traced else "one timing window (--repeat 1)", []).append(r.label)
    return "no interval: " + "; ".join(f"{' and '.join(labels)} {'has' if len(labels) == 1 else 'have'} {why}"
                                       for why, labels in by_reason.items())


def both_reliable(a: bool | None, b: bool | None) -> bool | None:
    """Two runs' reliability together: False if either is unreliable, None if either is unknown, else True."""
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


#: Two traces are taken for the same workload when the ops both launch hold at least this share of
#: each one's kernel time. A trace names no model or batch (its "model" is its file name), so the ops
#: it launched are its fingerprint. On the shared real traces: two ResNet-50 traces (PyTorch 1.8 and
#: 1.9) share 100 % both ways; ResNet-50 on a V100 against a recommendation model on an A100 7.5 % and
#: 4.0 %; against AlexNet 25 % and 99 %. PyTorch renamed ops between versions (2.x launches
#: aten::convolution_backward where 1.x launched aten::cudnn_convolution_backward_weight), so one model
#: traced by two far-apart versions may fall below it: then no ratio is claimed, never a wrong one.
SAME_WORKLOAD_OP_SHARE_PCT = 50.0
#: The spec keys that make two tbd runs different workloads: then no speed ratio is claimed.
_WORKLOAD_KEYS = ("model", "framework", "batch")


def not_same_workload(ref: Profile, run: Profile) -> str | None:
    """Why `run` is not the same workload as `ref` (so no speed ratio or gap attribution), or None.

    Two tbd runs differ when their model, framework or batch does. A trace (spec "trace") names
    neither model nor batch: the framework is compared, then the ops both launch must hold at least
    SAME_WORKLOAD_OP_SHARE_PCT of each one's kernel time (op groups, kernels with no launching op left out).
    """
    traced = "trace" in ref.spec or "trace" in run.spec
    keys = ("framework",) if traced else _WORKLOAD_KEYS
    differ = [f"{k}: {ref.spec.get(k)} / {run.spec.get(k)}" for k in keys
              if ref.spec.get(k) is not None and run.spec.get(k) is not None
              and str(ref.spec.get(k)) != str(run.spec.get(k))]
    if differ:
        return "; ".join(differ)
    if not traced:
        return None
    shares = shared_op_time_pct(ref, run)
    if shares is None:
        return "a trace names no model, and one side has no op times to tell the models apart by"
    if min(shares) < SAME_WORKLOAD_OP_SHARE_PCT:
        return (f"the ops both traces launch hold {shares[0]:.3g} % and {shares[1]:.3g} % of their kernel time, "
                f"under {SAME_WORKLOAD_OP_SHARE_PCT:.0f} %: different models")
    return None


def shared_op_time_pct(a: Profile, b: Profile) -> tuple[float, float] | None:
    """The share of each profile's op-group time (%) in ops both launched; None when either has none."""
    times = [{g.name: g.time_s for g in p.op_groups if g.name != NO_LAUNCH_OP} for p in (a, b)]
    totals = [sum(t.values()) for t in times]
    if not all(totals):
        return None
    both = set(times[0]) & set(times[1])
    return (100.0 * sum(times[0][n] for n in both) / totals[0], 100.0 * sum(times[1][n] for n in both) / totals[1])


#: A net kernel-time change below this share of the reference's is not split into op shares: ops
#: moving both ways around a near-zero total give shares of several hundred per cent that mean nothing.
MATERIAL_CHANGE_PCT = 5.0


def _net_change_is_material(delta: float | None, reference: float | None) -> bool:
    return bool(delta) and bool(reference) and abs(delta) >= MATERIAL_CHANGE_PCT / 100.0 * reference


def speed_ratio(metrics: Sequence[MetricComparison], i: int, same_batch: bool) -> tuple[float | None, str | None,
                                                                                          str | None]:
    """How many times faster run i ran than the first: (ratio, basis, reason when null).

    Throughput first (samples/s is fair across batch sizes); else, for the same batch (or a
    trace, whose batch is unknown on both sides), the inverse ratio of iteration times, then of
    kernel time per iteration.
    """
    throughput = _find(metrics, "throughput")
    if throughput.ratios[i]:
        return throughput.ratios[i], "throughput", None
    if not same_batch:
        return None, None, "batches differ and a throughput is missing: iteration times are not comparable"
    for key, basis in (("iteration_s", "iteration time"), ("kernel_time_per_iteration_s", "kernel time per iteration")):
        ratio = _find(metrics, key).ratios[i]
        if ratio:
            return 1.0 / ratio, basis, None
    return None, None, "neither throughput, iteration times nor per-iteration kernel times are known for both"


def differences(profiles: Sequence[Profile]) -> list[str]:
    """What differs besides the device, as "key: a / b / ...": a reader must not read it as speed-up."""
    out = []
    for key in _SPEC_KEYS:
        values = [p.spec.get(key) for p in profiles]
        if len({str(v) for v in values}) > 1:
            out.append(f"{key}: " + " / ".join("n/a" if v is None else str(v) for v in values))
    return out


def _notes(runs: Sequence[ComparedRun], profiles: Sequence[Profile]) -> list[str]:
    notes = []
    for run, p in zip(runs, profiles):
        if run.reliable is False:
            notes.append(f"{run.label} ({run.name}) is UNRELIABLE: " + "; ".join(run.quality_warnings))
        if p.status == PARTIAL:
            why = partial_reason(p.notes) or "the run stopped before its end"
            notes.append(f"{run.label} is a partial profile ({why}): its figures cover only what was gathered")
        if p.iterations is not None and p.iterations.stable is False:
            notes.append(f"{run.label} never reached a stable phase: its figures are flagged NOT STABLE")
        if p.kernels and not p.op_groups:
            notes.append(f"{run.label}'s profile.json has no op groups (written before they existed): re-analyse it "
                         "with `tbd analyze` to match its ops")
        if run.traced_iterations is None and p.op_groups:
            notes.append(f"{run.label} has no iterations (ProfilerStep spans): no per-iteration op times")
    largest = [(run.label, max(r.processes for r in p.cluster.scaling)) for run, p in zip(runs, profiles)
               if p.cluster is not None and p.cluster.scaling]
    if len({n for _, n in largest}) > 1:
        notes.append("scaling efficiency is at different process counts: " +
                     ", ".join(f"{label} at {n}" for label, n in largest))
    return notes
