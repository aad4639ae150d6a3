"""GPU telemetry through NVML (nvidia-ml-py, imported as ``pynvml``), sampled in a background thread.

Samples utilisation, memory used, power, SM clock, temperature and clock-event (throttle)
reasons; reads the total-energy counter so that the runner can charge energy to each arm.
Without a GPU, without the NVML library, or on a metric the GPU does not support, the
telemetry says "unavailable" (with the reason) instead of failing the benchmark.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

DEFAULT_INTERVAL_S = 0.05
_REASON_NAMES = {
    "nvmlClocksEventReasonGpuIdle": "gpu_idle",
    "nvmlClocksEventReasonApplicationsClocksSetting": "applications_clocks_setting",
    "nvmlClocksEventReasonSwPowerCap": "sw_power_cap",
    "nvmlClocksEventReasonHwSlowdown": "hw_slowdown",
    "nvmlClocksEventReasonSyncBoost": "sync_boost",
    "nvmlClocksEventReasonSwThermalSlowdown": "sw_thermal_slowdown",
    "nvmlClocksEventReasonHwThermalSlowdown": "hw_thermal_slowdown",
    "nvmlClocksEventReasonHwPowerBrakeSlowdown": "hw_power_brake_slowdown",
    "nvmlClocksEventReasonDisplayClockSetting": "display_clock_setting",
}


class Telemetry:
    """NVML sampler for one GPU; ``available`` is False (with ``reason``) wherever NVML cannot be used.

    ``nvml`` is the NVML binding (default: the ``pynvml`` module of nvidia-ml-py); tests on machines
    without a GPU pass a stand-in with the same functions.
    """

    def __init__(self, device: str, interval_s: float = DEFAULT_INTERVAL_S, nvml: Any = None) -> None:
        self.available = False
        self.reason = ""
        self._interval = interval_s
        self._nvml: Any = None
        self._handle: Any = None
        self._samples: dict[str, list[float]] = {}
        self._reasons: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open(device, nvml)

    def start(self) -> "Telemetry":
        """Start sampling in a daemon thread (a no-op when unavailable)."""
        if self.available and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling and release NVML."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.available:
            self._safe(self._nvml.nvmlShutdown)

    def energy_mj(self) -> int | None:
        """Total energy the GPU has consumed since the driver loaded, in mJ (None if unsupported)."""
        if not self.available:
            return None
        return self._safe(lambda: int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)))

    def summary(self) -> dict:
        """Mean, min and max of each sampled metric, and how often each clock-event reason was active."""
        if not self.available:
            return {"status": "unavailable", "reason": self.reason}
        metrics = {k: _stats(v) for k, v in self._samples.items() if v}
        return {"status": "ok", "samples": max((len(v) for v in self._samples.values()), default=0),
                "interval_s": self._interval, "metrics": metrics, "clock_event_reasons": dict(self._reasons)}

    def _open(self, device: str, nvml: Any) -> None:
        if not device.startswith("cuda"):
            self.reason = f"device is {device}: no GPU is benchmarked"
            return
        try:
            if nvml is None:
                import pynvml as nvml

            nvml.nvmlInit()
            self._handle = _handle_for(nvml, device)
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses, ImportError, torch errors: all mean "unavailable"
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
            return
        self._nvml = nvml
        self.available = True

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._interval)

    def _sample(self) -> None:
        nv, h = self._nvml, self._handle
        self._add("gpu_util_percent", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
        self._add("memory_util_percent", lambda: nv.nvmlDeviceGetUtilizationRates(h).memory)
        self._add("memory_used_bytes", lambda: nv.nvmlDeviceGetMemoryInfo(h).used)
        self._add("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0)
        self._add("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        self._add("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        mask = self._safe(lambda: _event_reasons(nv, h))
        if mask is not None:
            for attr, name in _REASON_NAMES.items():
                if mask & getattr(nv, attr, 0):
                    self._reasons[name] = self._reasons.get(name, 0) + 1

    def _add(self, name: str, read: Callable[[], float]) -> None:
        value = self._safe(read)
        if value is not None:
            self._samples.setdefault(name, []).append(float(value))

    def _safe(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - a metric this GPU does not support is left out, not fatal
            return None


def _handle_for(nvml: Any, device: str) -> Any:
    """The NVML handle of the torch device, matched by PCI bus id (CUDA_VISIBLE_DEVICES reorders indices)."""
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        import torch

        props = torch.cuda.get_device_properties(index)
        pci = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        return nvml.nvmlDeviceGetHandleByPciBusId(pci)
    except Exception:  # noqa: BLE001 - no PCI id from torch, or hidden from NVML in a sandbox: use the index
        return nvml.nvmlDeviceGetHandleByIndex(index)


def _event_reasons(nv: Any, handle: Any) -> int:
    if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons"):
        return int(nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
    return int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _stats(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    return {"mean": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max())}

