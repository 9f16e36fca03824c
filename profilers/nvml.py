"""NVML collector: `utilization.gpu` over the timing window, and static device facts.

`utilization.gpu` is the percent of the driver's last sample period (1/6 s to 1 s, by product)
during which at least one kernel ran (NVML API reference, nvmlUtilization_t). It is coarse, so
The metric contract (docs/architecture.md) shows it only beside the trace-based GPU busy % as a cross-check.

Two ways to read it, tried in this order:
1. `nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES, last_seen_ts)`: the driver's own sample
   stream. The thread drains the driver's ring buffer every `interval_s` so no sample is lost
   however long the window is; only samples newer than the newest one seen at start() count.
2. Polling `nvmlDeviceGetUtilizationRates(h).gpu` every `interval_s` when (1) is unsupported.
`NvmlSampler.method` says which one ran. Either way the first reading covers a driver period
that may begin slightly before start(), so very short windows are blurred at their edge. pynvml is imported lazily, so this module imports on
machines without it; every failure becomes None plus a reason, never an empty sample.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tbd.core.records import NvmlSample

SAMPLES = "nvmlDeviceGetSamples"
POLLING = "nvmlDeviceGetUtilizationRates"


def load_nvml(nvml: Any = None) -> tuple[Any, str | None]:
    """Import pynvml (unless `nvml` is given) and call nvmlInit; returns (module or None, reason)."""
    if nvml is None:
        try:
            import pynvml as nvml  # noqa: PLC0415 - optional dependency, imported only when used
        except ImportError as exc:
            return None, f"pynvml not importable: {exc}"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, OSError from ctypes
        return None, f"NVML unavailable: {exc}"
    return nvml, None


def device_handle(nvml: Any, index: int, uuid: str | None = None) -> tuple[Any, str]:
    """Handle of one device, by UUID when given (CUDA and NVML orders can differ), else by index.

    Returns (handle, how) where `how` says which lookup found it. Raises what NVML raises.
    """
    if uuid:
        # torch prints the CUDA UUID without NVML's "GPU-" prefix.
        key = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        try:
            return nvml.nvmlDeviceGetHandleByUUID(key), "uuid"
        except Exception:  # noqa: BLE001 - fall back to the index and say so in `how`
            pass
    return nvml.nvmlDeviceGetHandleByIndex(index), "index (NVML order may differ from CUDA order)"


def nvml_available(index: int = 0, nvml: Any = None) -> tuple[bool, str | None]:
    """Whether NVML can read device `index`; (False, reason) when it cannot."""
    lib, reason = load_nvml(nvml)
    if lib is None:
        return False, reason
    try:
        lib.nvmlDeviceGetHandleByIndex(index)
        return True, None
    except Exception as exc:  # noqa: BLE001 - any NVML error means "not available", with its text
        return False, f"NVML cannot open device {index}: {exc}"
    finally:
        lib.nvmlShutdown()


def nvml_device_facts(index: int, uuid: str | None = None, nvml: Any = None) -> dict:
    """Driver version and max SM clock (Hz) of one device, each None with a reason if unreadable."""
    lib, reason = load_nvml(nvml)
    if lib is None:
        return {"driver": None, "max_sm_clock_hz": None, "nvml_reason": reason}
    try:
        handle, how = device_handle(lib, index, uuid)
        facts: dict = {"nvml_lookup": how, "nvml_reason": None}
        driver = lib.nvmlSystemGetDriverVersion()
        facts["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        # nvmlDeviceGetMaxClockInfo returns MHz; the boost ceiling, as datasheet peaks use.
        facts["max_sm_clock_hz"] = float(lib.nvmlDeviceGetMaxClockInfo(handle, lib.NVML_CLOCK_SM)) * 1e6
        return facts
    except Exception as exc:  # noqa: BLE001
        return {"driver": None, "max_sm_clock_hz": None, "nvml_reason": f"NVML query failed: {exc}"}
    finally:
        lib.nvmlShutdown()


_VALUE_FIELDS = {  # nvmlValueType_t -> field of the c_nvmlValue_t union
    "NVML_VALUE_TYPE_DOUBLE": "dVal", "NVML_VALUE_TYPE_UNSIGNED_INT": "uiVal",
    "NVML_VALUE_TYPE_UNSIGNED_LONG": "ulVal", "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG": "ullVal",
    "NVML_VALUE_TYPE_SIGNED_LONG_LONG": "sllVal", "NVML_VALUE_TYPE_SIGNED_INT": "siVal",
    "NVML_VALUE_TYPE_UNSIGNED_SHORT": "usVal",
}


class NvmlSampler:
    """Records `utilization.gpu` of one device between start() and stop() on a daemon thread."""

    def __init__(self, index: int = 0, interval_s: float = 0.02, uuid: str | None = None, nvml: Any = None):
        """`interval_s`: seconds between reads; `uuid`: CUDA UUID to find the NVML device; `nvml`: a module for tests."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.index = index
        self.interval_s = interval_s
        self.uuid = uuid
        self.method: str | None = None
        self.reason: str | None = None
        self._nvml_arg = nvml
        self._lib: Any = None
        self._handle: Any = None
        self._values: list[float] = []
        self._last_ts = 0
        self._field = "uiVal"
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Open NVML and begin sampling; if NVML is unusable, stop() will return None with `reason`."""
        self._values, self._error, self.reason = [], None, None
        self._lib, self.reason = load_nvml(self._nvml_arg)
        if self._lib is None:
            return
        try:
            self._handle, _ = device_handle(self._lib, self.index, self.uuid)
            self.method = self._choose_method()
        except Exception as exc:  # noqa: BLE001
            self.reason = f"NVML cannot read device {self.index}: {exc}"
            self._lib.nvmlShutdown()
            self._lib = None
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tbd-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> NvmlSample | None:
        """Stop sampling; the readings taken, or None with `reason` set."""
        if self._lib is None:
            return None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self._error is None:
                self._read_once()  # drain what the driver recorded since the last tick
            if self._error is None and not self._values and self.method == SAMPLES:
                # The window was shorter than the driver's sample period; one instantaneous
                # reading is the best NVML offers, and `method` says it was polled.
                self.method = POLLING
                self._read_once()
        except Exception as exc:  # noqa: BLE001
            self._error = f"NVML read failed: {exc}"
        finally:
            self._lib.nvmlShutdown()
            self._lib = None
        if self._error is not None:
            self.reason = self._error
            return None
        if not self._values:
            self.reason = "NVML returned no utilization samples in the window"
            return None
        return NvmlSample(utilization_pct=np.asarray(self._values, dtype=np.float64), device_index=self.index)

    def _choose_method(self) -> str:
        """SAMPLES if the driver keeps a sample buffer for this device, else POLLING."""
        try:
            samples = self._get_samples(0)
        except Exception:  # noqa: BLE001 - NOT_SUPPORTED on some products; polling still works
            return POLLING
        # Only samples newer than those already buffered belong to the window.
        self._last_ts = max((int(s.timeStamp) for s in samples), default=0)
        return SAMPLES

    def _get_samples(self, since_ts: int) -> list:
        lib = self._lib
        try:
            value_type, samples = lib.nvmlDeviceGetSamples(self._handle, lib.NVML_GPU_UTILIZATION_SAMPLES, since_ts)
        except lib.NVMLError as exc:
            if getattr(exc, "value", None) == lib.NVML_ERROR_NOT_FOUND:
                return []  # NVML's way of saying "no sample newer than since_ts"
            raise
        self._field = self._value_field(value_type)
        return list(samples)

    def _value_field(self, value_type: int) -> str:
        for const, fld in _VALUE_FIELDS.items():
            if getattr(self._lib, const, None) == value_type:
                return fld
        raise ValueError(f"unknown NVML sample value type {value_type}")

    def _read_once(self) -> None:
        if self.method == SAMPLES:
            # The buffer may hand back the last seen sample again; keep strictly newer ones.
            fresh = [s for s in self._get_samples(self._last_ts) if int(s.timeStamp) > self._last_ts]
            fresh.sort(key=lambda s: int(s.timeStamp))
            self._values.extend(float(getattr(s.sampleValue, self._field)) for s in fresh)
            if fresh:
                self._last_ts = int(fresh[-1].timeStamp)
        else:
            self._values.append(float(self._lib.nvmlDeviceGetUtilizationRates(self._handle).gpu))

    def _run(self) -> None:
        if self.method == POLLING:
            self._safe_read()
        while not self._stop.wait(self.interval_s) and self._error is None:
            self._safe_read()

    def _safe_read(self) -> None:
        try:
            self._read_once()
        except Exception as exc:  # noqa: BLE001 - reported by stop(), never swallowed
            self._error = f"NVML read failed: {exc}"


def gpu_facts_from_nvml(index: int) -> dict:
    """An environment's "gpu" record from NVML alone, for frameworks with no device-properties API
    (MXNet 1.9, TensorFlow): name, memory, UUID, compute capability, max SM clock, driver."""
    facts = nvml_device_facts(index)
    gpu: dict = {"name": None, "index": index, "uuid": None, "compute_capability": None, "sm_count": None,
                 "memory_bytes": None, "max_sm_clock_hz": facts.get("max_sm_clock_hz"),
                 "clock_source": "nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)" if facts.get("max_sm_clock_hz") else None,
                 "driver": facts.get("driver"), "cuda": None, "nvml_reason": facts.get("nvml_reason"),
                 "sm_count_reason": "neither this framework nor NVML reports the SM count"}
    lib, _ = load_nvml()
    if lib is None:
        return gpu
    try:
        handle, _ = device_handle(lib, index, None)
        name = lib.nvmlDeviceGetName(handle)
        gpu["name"] = name.decode() if isinstance(name, bytes) else str(name)
        gpu["memory_bytes"] = int(lib.nvmlDeviceGetMemoryInfo(handle).total)
        uuid = lib.nvmlDeviceGetUUID(handle)
        gpu["uuid"] = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        gpu["compute_capability"] = list(lib.nvmlDeviceGetCudaComputeCapability(handle))
    except Exception as exc:  # noqa: BLE001 - a fact NVML cannot give stays None, with its reason
        gpu["nvml_reason"] = f"NVML query failed: {exc}"
    finally:
        lib.nvmlShutdown()
    return gpu
