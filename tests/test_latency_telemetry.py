"""NVML telemetry: summary, energy counter and clock-event reasons, through an NVML stand-in where no GPU is."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pynvml
import pytest

from driftwarden.latency.telemetry import Telemetry


class FakeNvml:
    """The handful of NVML calls the sampler makes, with pynvml's constants; power limit always active."""

    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    nvmlClocksEventReasonSwPowerCap = pynvml.nvmlClocksEventReasonSwPowerCap
    nvmlClocksEventReasonGpuIdle = pynvml.nvmlClocksEventReasonGpuIdle
    NVMLError = pynvml.NVMLError

    def __init__(self) -> None:
        self.energy = 1_000_000
        self.shut = False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: self.shut = True  # noqa: E704
    def nvmlDeviceGetHandleByIndex(self, i: int) -> str: return f"gpu{i}"  # noqa: E704
    def nvmlDeviceGetHandleByPciBusId(self, pci: str) -> str: raise pynvml.NVMLError(1)  # noqa: E704
    def nvmlDeviceGetUtilizationRates(self, h: str): return SimpleNamespace(gpu=87, memory=40)  # noqa: E704
    def nvmlDeviceGetMemoryInfo(self, h: str): return SimpleNamespace(used=2 << 30)  # noqa: E704
    def nvmlDeviceGetPowerUsage(self, h: str) -> int: return 350_000  # noqa: E704
    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int: return 1980  # noqa: E704
    def nvmlDeviceGetTemperature(self, h: str, kind: int) -> int: return 61  # noqa: E704
    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int: return pynvml.nvmlClocksEventReasonSwPowerCap  # noqa: E704

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:
        self.energy += 5_000
        return self.energy


def test_sampler_summarises_metrics_reasons_and_energy() -> None:
    nvml = FakeNvml()
    telemetry = Telemetry("cuda:0", interval_s=0.01, nvml=nvml).start()
    first = telemetry.energy_mj()
    time.sleep(0.1)
    second = telemetry.energy_mj()
    telemetry.stop()
    summary = telemetry.summary()
    assert summary["status"] == "ok" and summary["samples"] >= 3
    assert summary["metrics"]["power_w"]["mean"] == pytest.approx(350.0)
    assert summary["metrics"]["sm_clock_mhz"]["max"] == 1980
    assert summary["clock_event_reasons"] == {"sw_power_cap": summary["samples"]}
    assert second - first == 5_000 and nvml.shut


def test_unsupported_metric_is_left_out_not_fatal() -> None:
    nvml = FakeNvml()
    nvml.nvmlDeviceGetPowerUsage = lambda h: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
    telemetry = Telemetry("cuda:0", interval_s=0.01, nvml=nvml).start()
    time.sleep(0.05)
    telemetry.stop()
    metrics = telemetry.summary()["metrics"]
    assert "power_w" not in metrics and "gpu_util_percent" in metrics


def test_cpu_device_has_no_telemetry() -> None:
    summary = Telemetry("cpu", nvml=FakeNvml()).summary()
    assert summary == {"status": "unavailable", "reason": "device is cpu: no GPU is benchmarked"}
