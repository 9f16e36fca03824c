"""Light collectors: CPU counters, NVML sampler (fake pynvml), environment, GEMM ceiling."""

from __future__ import annotations

import threading
import time
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import psutil
import pytest

from tbd.profilers import host
from tbd.profilers.cpu import CpuWindow
from tbd.profilers.nvml import POLLING, SAMPLES, NvmlSampler, nvml_available, nvml_device_facts

# ---------------------------------------------------------------- CPU counters

Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")


def _fake_reader(*readings):
    calls = iter(readings)
    return lambda percpu: next(calls)


def _fake_clock(*ns):
    values = iter(ns)
    return lambda: next(values)


def test_cpu_window_busy_and_total_per_core():
    before = [Times(10, 1, 5, 100, 2, 0.5, 0.5, 3, 4, 0), Times(20, 0, 4, 90, 0, 0, 0, 0, 0, 0)]
    after = [Times(12, 1.5, 6, 101, 2.5, 0.75, 0.75, 4, 5, 0), Times(20.5, 0, 4.5, 92, 0, 0, 0, 0, 0, 0)]
    window = CpuWindow(clock=_fake_clock(1_000, 3_001_000), read_times=_fake_reader(before, after))
    window.start()
    sample = window.stop()
    # busy = user + nice + system + irq + softirq; guest is inside user already, steal is not ours.
    np.testing.assert_allclose(sample.busy_s, [2 + 0.5 + 1 + 0.25 + 0.25, 0.5 + 0.5])
    # total adds idle, iowait and steal.
    np.testing.assert_allclose(sample.total_s, [(2 + 0.5 + 1 + 0.25 + 0.25) + 1 + 0.5 + 1, (0.5 + 0.5) + 2])
    assert sample.wall_ns == 3_001_000 - 1_000
    assert sample.cores == 2


def test_cpu_window_backwards_idle_counts_as_zero():
    before = [Times(1, 0, 0, 50, 3, 0, 0, 0, 0, 0)]
    after = [Times(2, 0, 0, 51, 2.99, 0, 0, 0, 0, 0)]  # iowait stepped back (tickless kernel)
    window = CpuWindow(clock=_fake_clock(0, 10), read_times=_fake_reader(before, after))
    window.start()
    sample = window.stop()
    np.testing.assert_allclose(sample.total_s, [1 + 1])


def test_cpu_window_real_counters():
    window = CpuWindow()
    window.start()
    deadline = time.perf_counter() + 0.05
    while time.perf_counter() < deadline:
        pass
    sample = window.stop()
    assert sample.cores == psutil.cpu_count()
    assert sample.wall_ns > 0
    assert np.all(sample.busy_s <= sample.total_s + 1e-9)


def test_cpu_window_stop_before_start():
    with pytest.raises(RuntimeError):
        CpuWindow().stop()


# ---------------------------------------------------------------- NVML (fake pynvml)


class _NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def _fake_nvml(util=(30, 70), samples=None, init_fails=False):
    """A pynvml stand-in: utilization readings cycle through `util`; `samples` is the driver buffer."""
    state = SimpleNamespace(init=0, shutdown=0, reads=0, buffer=list(samples or []), lock=threading.Lock())

    def init():
        if init_fails:
            raise _NVMLError(12)
        state.init += 1

    def util_rates(handle):
        with state.lock:
            value = util[state.reads % len(util)]
            state.reads += 1
        return SimpleNamespace(gpu=value, memory=0)

    def get_samples(handle, kind, since):
        if samples is None:
            raise _NVMLError(3)  # NOT_SUPPORTED
        with state.lock:
            fresh = [s for s in state.buffer if s.timeStamp >= since]  # NVML may repeat `since`
        if not fresh:
            raise _NVMLError(6)  # NOT_FOUND: nothing newer
        return 1, fresh

    lib = SimpleNamespace(
        NVMLError=_NVMLError, NVML_ERROR_NOT_FOUND=6, NVML_GPU_UTILIZATION_SAMPLES=0, NVML_CLOCK_SM=1,
        NVML_VALUE_TYPE_DOUBLE=0, NVML_VALUE_TYPE_UNSIGNED_INT=1,
        nvmlInit=init, nvmlShutdown=lambda: setattr(state, "shutdown", state.shutdown + 1),
        nvmlDeviceGetHandleByIndex=lambda i: ("handle", i),
        nvmlDeviceGetHandleByUUID=lambda u: ("uuid", u),
        nvmlDeviceGetUtilizationRates=util_rates, nvmlDeviceGetSamples=get_samples,
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
        nvmlDeviceGetMaxClockInfo=lambda h, clk: 1980,
    )
    return lib, state


def _sample(ts, value):
    return SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=value, dVal=float("nan")))


def test_nvml_sampler_polls_when_samples_unsupported():
    lib, state = _fake_nvml(util=(30, 70))
    sampler = NvmlSampler(index=0, interval_s=0.005, nvml=lib)
    sampler.start()
    time.sleep(0.05)
    result = sampler.stop()
    assert sampler.method == POLLING
    assert result.device_index == 0
    assert len(result.utilization_pct) == state.reads >= 2
    # Readings alternate 30, 70, 30, ... in the order taken.
    expected = [(30, 70)[i % 2] for i in range(state.reads)]
    np.testing.assert_array_equal(result.utilization_pct, expected)
    assert state.init == state.shutdown == 1


def test_nvml_sampler_uses_driver_samples_newer_than_start():
    old = [_sample(100, 5), _sample(200, 6)]  # already buffered before start(): not in the window
    lib, state = _fake_nvml(samples=old)
    sampler = NvmlSampler(interval_s=0.005, nvml=lib)
    sampler.start()
    with state.lock:
        state.buffer += [_sample(300, 40), _sample(400, 60)]
    time.sleep(0.03)
    with state.lock:
        state.buffer += [_sample(500, 80)]
    result = sampler.stop()
    assert sampler.method == SAMPLES
    np.testing.assert_array_equal(result.utilization_pct, [40, 60, 80])
    assert state.reads == 0


def test_nvml_sampler_short_window_falls_back_to_one_reading():
    lib, state = _fake_nvml(util=(55,), samples=[_sample(100, 5)])
    sampler = NvmlSampler(interval_s=10, nvml=lib)
    sampler.start()
    result = sampler.stop()
    assert sampler.method == POLLING
    np.testing.assert_array_equal(result.utilization_pct, [55])


def test_nvml_sampler_init_failure_is_none_with_reason():
    lib, _ = _fake_nvml(init_fails=True)
    sampler = NvmlSampler(nvml=lib)
    sampler.start()
    assert sampler.stop() is None
    assert "NVML unavailable" in sampler.reason
    assert nvml_available(0, nvml=lib) == (False, sampler.reason)


def test_nvml_on_this_machine_without_driver():
    ok, reason = nvml_available(0)
    if ok:
        pytest.skip("this machine has a working NVML")
    assert reason
    sampler = NvmlSampler()
    sampler.start()
    assert sampler.stop() is None and sampler.reason == reason


def test_nvml_device_facts_with_fake():
    lib, state = _fake_nvml()
    facts = nvml_device_facts(0, uuid="0c1d-2e", nvml=lib)
    assert facts["max_sm_clock_hz"] == 1980 * 1e6
    assert facts["driver"] == "550.54.15"
    assert facts["nvml_lookup"] == "uuid"
    assert state.shutdown == 1


# ---------------------------------------------------------------- environment


def test_environment_cpu_section_is_plausible():
    env = host.environment({"torch": "x.y"})
    cpu = env["cpu"]
    assert cpu["cores_logical"] == psutil.cpu_count()
    assert cpu["cores_logical"] >= cpu["cores_physical"] >= 1
    assert cpu["max_clock_hz"] is None or 1e8 < cpu["max_clock_hz"] < 1e10
    assert cpu["clock_source"]
    assert env["gpu"] is None and env["gpu_reason"] == "no CUDA device"
    assert env["versions"]["torch"] == "x.y"


def test_cpu_clock_sources_in_order():
    cpuinfo = "model name\t: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz\ncpu MHz\t\t: 1200.000\n"
    assert host.cpu_clock(cpuinfo, "3300000\n") == (3300000 * 1e3, f"{host.CPUFREQ_MAX} (maximum)")
    hz, source = host.cpu_clock(cpuinfo, None)
    assert hz == 2.40 * 1e9 and "model name" in source
    vm = "model name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2599.998\n"
    assert host.cpu_clock(vm, None) == (None, "CPU clock hidden by the VM")
    info = host.cpu_info(vm, "")
    # The current clock is kept beside, never passed off as the maximum.
    assert info["max_clock_hz"] is None and info["current_clock_hz"] == 2599.998 * 1e6
    assert "cpu MHz" in info["clock_source"]
    assert host.cpu_clock("processor\t: 0\n", None) == (None, "CPU clock hidden by the VM")


def test_cpu_info_parses_flags_x86_and_aarch64():
    x86 = host.cpu_info("model name\t: X\nflags\t\t: fpu sse2 avx fma avx2 avx512f hypervisor\n", "")
    assert x86["isa"] == ["sse2", "avx", "fma", "avx2", "avx512f"] and x86["model"] == "X"
    arm = host.cpu_info("processor\t: 0\nFeatures\t: fp asimd evtstrm sve\n", "")
    assert arm["isa"] == ["asimd", "sve"] and arm["max_clock_hz"] is None


def test_torch_gpu_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert host.torch_gpu(torch, 0) == (None, "no CUDA device")


def test_environment_with_torch_on_cpu():
    torch = pytest.importorskip("torch")
    env = host.environment({"torch": torch.__version__}, torch=torch, device=torch.device("cpu"))
    assert env["gpu"] is None and env["gpu_reason"] == "the run used device cpu"
    assert env["cpu"]["cores_logical"] >= env["cpu"]["threads_in_use"] >= 1


def test_torch_gpu_with_fake_torch(monkeypatch):
    props = SimpleNamespace(name="NVIDIA H100", uuid="abc", major=9, minor=0, multi_processor_count=132,
                            total_memory=80 * 2**30, clock_rate=1980000)
    fake = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True, device_count=lambda: 1,
                                                get_device_properties=lambda i: props),
                           version=SimpleNamespace(cuda="12.4"))
    monkeypatch.setattr(host._nvml, "nvml_device_facts",
                        lambda i, u: {"driver": None, "max_sm_clock_hz": None, "nvml_reason": "no driver"})
    gpu, reason = host.torch_gpu(fake, 0)
    assert reason is None
    assert gpu["compute_capability"] == [9, 0] and gpu["sm_count"] == 132
    # NVML missing: the CUDA attribute (kHz) is the fallback and the source says so.
    assert gpu["max_sm_clock_hz"] == 1980000 * 1e3 and gpu["clock_source"] == "cudaDeviceProp.clockRate"


# ---------------------------------------------------------------- GEMM ceiling


def test_gemm_ceiling_on_cpu():
    torch = pytest.importorskip("torch")
    from tbd.profilers.ceilings import measured_gemm_ceiling

    before = torch.get_float32_matmul_precision()
    result = measured_gemm_ceiling(torch, "cpu", n=256, repeats=3)
    assert result["n"] == 256 and result["repeats"] == 3
    assert result["flops_per_s"] == pytest.approx(2 * 256**3 / result["seconds"])
    assert 1e9 < result["flops_per_s"] < 1e14
    assert torch.get_float32_matmul_precision() == before
