"""Memory across iterations: a model that keeps a tensor per call leaks; a plain one is steady."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch  # a declared dependency (the bench extra, installed by make setup): fail, never skip

from driftwarden.latency import memory, samples
from driftwarden.latency.adapter import load_adapter
from driftwarden.latency.inputs import build_pool, read_events
from driftwarden.latency.models import load_model


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory):
    """A pool of batch-8 dense requests."""
    d = tmp_path_factory.mktemp("memory")
    events = read_events(samples.write_events(d / "ref.jsonl", 64)).events
    (d / "a.yaml").write_text(samples.DENSE_ADAPTER)
    return build_pool("reference", events, load_adapter(d / "a.yaml", events), 8, torch.float32, "cpu")


def _classify(path: Path, pool, iterations: int = 200) -> dict:
    model = load_model(path, "cpu")
    with torch.inference_mode():
        return memory.classify(memory.probe(model.module, pool, iterations, "cpu"))


def test_model_appending_to_a_list_each_call_is_a_leak(tmp_path: Path, pool) -> None:
    result = _classify(samples.save_leaky(tmp_path / "leaky.pt", leak_floats=65536), pool)
    assert result["status"] == memory.LEAK, result
    assert result["signal"] == "rss"
    # 65536 float32 = 256 KiB kept per call; RSS must grow by about that per iteration
    assert 0.5 * 262144 < result["allocated"]["slope_bytes_per_iter"] < 2 * 262144


def test_a_leak_shows_after_the_process_freed_much_memory(tmp_path: Path, pool) -> None:
    """Freed heap memory is reused without the RSS growing: the probe trims the heap first, or a leak
    of 256 KiB a call looks steady for 200 calls after 750 MiB were freed (the latency chunks before it)."""
    freed = [torch.zeros(65536) for _ in range(3000)]
    del freed
    result = _classify(samples.save_leaky(tmp_path / "leaky.pt", leak_floats=65536), pool)
    assert result["status"] == memory.LEAK, result


def test_steady_model_is_not_a_leak(tmp_path: Path, pool) -> None:
    result = _classify(samples.save_mlp(tmp_path / "mlp.pt", width=256), pool)
    assert result["status"] == memory.STEADY, result


def test_slope_test_ignores_a_one_off_step_but_flags_steady_growth() -> None:
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 20_000, 300)
    step = 100e6 + np.where(np.arange(300) > 150, 8e6, 0) + noise
    ramp = 100e6 + np.arange(300) * 50_000 + noise
    assert not memory.growth(step, 4 << 20)["growing"]
    assert memory.growth(ramp, 4 << 20)["growing"]
    assert not memory.growth(100e6 + np.arange(300) * 100.0 + noise, 4 << 20)["growing"], "below the floor"


def test_cuda_trace_tells_cache_growth_from_a_leak() -> None:
    n = np.arange(200, dtype=float)
    flat = np.full(200, 50e6)
    cache = memory.MemoryTrace("cuda:0", flat, 60e6 + n * 2e6)
    leak = memory.MemoryTrace("cuda:0", 50e6 + n * 2e6, 60e6 + n * 2e6)
    steady = memory.MemoryTrace("cuda:0", flat, flat + 10e6)
    assert memory.classify(cache)["status"] == memory.CACHE_GROWTH
    assert memory.classify(leak)["status"] == memory.LEAK
    assert memory.classify(steady)["status"] == memory.STEADY
