"""GPU idle time by cause on real traces, against a recompute written here and against HTA's own figure.

The recompute reads the raw JSON with plain loops and shares no code with tbd: times as exact
integer ns from the decimal text; the window is the ProfilerStep spans, each ending at the later of
its host end and the end of the last kernel whose launching runtime call (same correlation id) starts
inside it; GPU idle is the window less the union of the kernels that overlap it; the part of each idle
interval that a memcpy or memset covers is memcpy time; the rest of it is host bound when the
earliest-launched kernel starting at its end was launched after it began (or no kernel ends it: the
window's tail), and then synchronisation if it began inside a runtime call named *Synchronize; a launch
gap when the interval is shorter than 30 us with that kernel queued; other otherwise.

HTA (HolisticTraceAnalysis 0.5.0, `.venv-hta`): `TraceAnalysis(trace_dir=D).get_idle_time_breakdown(
visualize=False)` on pt19_resnet50_v100 (copied into D as rank-0.json.gz) printed, for its one stream 7:
host_wait 16475.0, kernel_wait 1728.0, other 0.0 (microseconds). HTA sums the gaps between consecutive
kernels, memcpys and memsets of a stream over the whole file and leaves out the window's edges, so the
test checks the recompute in HTA's terms reproduces HTA, and tbd's interior host-bound time against it.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace

NAMES = ("pt19_resnet50_v100", "pt2x_v100_ns_resolution_no_shapes", "pt1x_v100_nccl2_cudagraph_async_flows",
         "pt2x_a100_tf32_nccl16_cudagraph")
LAUNCH_GAP_NS = 30_000
COPIES = ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
RUNTIME = ("cuda_runtime", "cuda_driver", "Runtime")
HTA_PT19_US = {"host_wait": 16475.0, "kernel_wait": 1728.0, "other": 0.0}


def _path(name):
    path = real_trace(f"gpu/{name}.json.gz")
    if not path.exists():
        pytest.skip("real GPU traces not fetched (tests/fixtures/README.md)")
    return path


def _ns(value) -> int:
    return int(Decimal(str(value)) * 1000)


def _events(path):
    with gzip.open(path) as f:
        return json.loads(f.read(), parse_float=Decimal)["traceEvents"]


def _launches(events):
    first = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None and corr not in first:
                first[corr] = _ns(e["ts"])
    return first


def recompute(path) -> dict[str, int]:
    """Idle ns per cause over tbd's window, by the definition in the module docstring."""
    events = _events(path)
    launch = _launches(events)
    kernels = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            start = _ns(e["ts"])
            kernels.append((start, start + max(_ns(e["dur"]), 0), launch.get(e["args"].get("correlation"))))
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    lo = min(s for s, _ in steps)
    hi = lo
    for s, host_end in steps:
        end = host_end
        for _, k_end, k_launch in kernels:
            if k_launch is not None and s <= k_launch <= host_end:
                end = max(end, k_end)
        hi = max(hi, end)
    inside = sorted((max(s, lo), min(e, hi), la) for s, e, la in kernels if s < hi and e > lo)
    # The union, then the gaps.
    busy = []
    for s, e, _ in inside:
        if e <= s:
            continue
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    gaps, cursor = [], lo
    for s, e in busy:
        if s > cursor:
            gaps.append((cursor, s))
        cursor = max(cursor, e)
    if hi > cursor:
        gaps.append((cursor, hi))
    copies = sorted((_ns(e["ts"]), _ns(e["ts"]) + max(_ns(e.get("dur", 0)), 0)) for e in events
                    if e.get("ph") == "X" and e.get("cat") in COPIES)
    syncs = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and e.get("cat") in RUNTIME and str(e.get("name", "")).endswith("Synchronize")]
    out = {"host_bound": 0, "synchronisation": 0, "memcpy": 0, "launch_gap": 0, "other": 0, "idle": 0,
           "lead_host_bound": 0}
    for g0, g1 in gaps:
        out["idle"] += g1 - g0
        # the copies' union inside [g0, g1), walked in start order
        covered, reach = 0, g0
        for s, e in copies:
            s, e = max(s, reach), min(e, g1)
            if e > s:
                covered += e - s
                reach = e
        out["memcpy"] += covered
        rest = g1 - g0 - covered
        launched = [la for s, _, la in inside if s == g1 and la is not None]
        ends = any(s == g1 for s, _, _ in inside)
        if not ends or (launched and min(launched) > g0):
            synced = any(s <= g0 < e for s, e in syncs)
            out["synchronisation" if synced else "host_bound"] += rest
            if g0 == lo and not synced:
                out["lead_host_bound"] = rest
        elif launched and g1 - g0 < LAUNCH_GAP_NS:
            out["launch_gap"] += rest
        else:
            out["other"] += rest
    return out


def hta_style(path) -> dict[str, float]:
    """HTA's breakdown of each stream (hta/analyzers/breakdown_analysis.py), summed over streams, in us."""
    events = _events(path)
    launch = _launches(events)
    streams = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"):
            streams.setdefault(e["args"].get("stream"), []).append(
                (_ns(e["ts"]), _ns(e["dur"]), launch.get(e["args"].get("correlation"))))
    out = {"host_wait": 0, "kernel_wait": 0, "other": 0}
    for ops in streams.values():
        ops.sort(key=lambda op: op[0])
        for (p_start, p_dur, _), (start, _, la) in zip(ops, ops[1:]):
            gap = start - (p_start + p_dur)
            if la is not None and la > p_start + p_dur:
                out["host_wait"] += gap
            elif gap < LAUNCH_GAP_NS:
                out["kernel_wait"] += gap
            else:
                out["other"] += gap
    return {k: v / 1000 for k, v in out.items()}


@pytest.mark.parametrize("name", NAMES)
def test_gpu_idle_matches_the_recompute(name):
    path = _path(name)
    idle = profile_from_trace(path).metrics.gpu_idle
    want = recompute(path)
    assert round(idle.idle_s * 1e9) == want["idle"]
    for cause in ("host_bound", "synchronisation", "memcpy", "launch_gap", "other"):
        assert round(idle.seconds[cause] * 1e9) == want[cause], cause
    assert not idle.reasons


def test_gpu_idle_is_the_rest_of_gpu_busy_and_survives_json():
    path = _path("pt19_resnet50_v100")
    profile = profile_from_trace(path)
    idle = profile.metrics.gpu_idle
    assert idle.idle_pct == pytest.approx(100.0 - profile.metrics.gpu_busy_pct.value)
    assert sum(v for v in idle.seconds.values() if v is not None) == pytest.approx(idle.idle_s)
    back = type(profile).from_dict(json.loads(json.dumps(profile.to_dict())))
    assert back.metrics.gpu_idle == idle


def test_hta_definition_reproduces_hta_and_tbd_agrees_with_it():
    path = _path("pt19_resnet50_v100")
    assert hta_style(path) == HTA_PT19_US
    idle = profile_from_trace(path).metrics.gpu_idle
    # HTA's kernel wait is tbd's launch gap: both the gaps under 30 us with the next kernel queued (1,728 us).
    assert idle.seconds["launch_gap"] * 1e6 == pytest.approx(HTA_PT19_US["kernel_wait"], abs=0.5)
    # tbd's host-bound time = the GPU's wait for the step's first kernel (74.2 ms, mostly data loading on the
    # host) + the waits between kernels. HTA's span starts at the first GPU op, the input's memcpy 73.8 ms into
    # the step, so the ~0.4 ms between that copy and the first kernel (76.18 ms) is in its host wait and in tbd's
    # lead: the waits between kernels agree to 3 %.
    interior_host_us = (idle.seconds["host_bound"] * 1e9 - recompute(path)["lead_host_bound"]) / 1000
    assert interior_host_us == pytest.approx(HTA_PT19_US["host_wait"], rel=0.03)
