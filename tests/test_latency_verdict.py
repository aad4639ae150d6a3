"""The verdict on real (small, CPU) TorchScript models: regression, no change, input attribution."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch  # a declared dependency (the bench extra, installed by make setup): fail, never skip

from driftwarden.latency import runner, samples, verdict
from driftwarden.latency.options import BenchOptions


SHORT = dict(min_duration_s=0.3, min_count=100, warmup=10, memory_iterations=0, threads=1)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Models, event files and adapters shared by the tests of this module."""
    d = tmp_path_factory.mktemp("latency")
    out = {
        "base": samples.save_mlp(d / "base.pt"),
        "heavy": samples.save_mlp(d / "heavy.pt", extra_width=1024),
        "seq": samples.save_sequence_model(d / "seq.pt"),
        "seq_heavy": samples.save_sequence_model(d / "seq_heavy.pt", dim=256),
        "ref": samples.write_events(d / "ref.jsonl", 256, seq_len=(8, 16)),
        "long": samples.write_events(d / "long.jsonl", 256, seq_len=(100, 128), seed=1),
        "dense": d / "dense.yaml", "seqcfg": d / "seq.yaml",
    }
    out["dense"].write_text(samples.DENSE_ADAPTER)
    out["seqcfg"].write_text(samples.SEQUENCE_ADAPTER)
    out["base2"] = Path(shutil.copy(out["base"], d / "base_copy.pt"))
    out["seq2"] = Path(shutil.copy(out["seq"], d / "seq_copy.pt"))
    return out


def _run(**kwargs) -> runner.RunResult:
    return runner.run(runner.prepare(BenchOptions(**{**SHORT, **kwargs})))


def _true_ratio(base: Path, cand: Path, x: torch.Tensor, blocks: int = 8, per_block: int = 100) -> float:
    """Median latency ratio measured independently: blocks of plain calls to each model in turn, no bench code."""
    torch.set_num_threads(1)
    models = torch.jit.load(str(base)), torch.jit.load(str(cand))
    times: tuple[list[int], list[int]] = ([], [])
    with torch.inference_mode():
        for _ in range(20):
            models[0](x), models[1](x)
        for i in range(2 * blocks):
            model, out = models[i % 2], times[i % 2]
            model(x)
            for _ in range(per_block):
                t0 = time.perf_counter_ns()
                model(x)
                out.append(time.perf_counter_ns() - t0)
    return float(np.median(times[1]) / np.median(times[0]))


def test_heavier_candidate_is_a_regression_with_the_true_ratio(files: dict[str, Path]) -> None:
    result = _run(baseline=files["base"], candidate=files["heavy"], reference_input=files["ref"],
                  adapter=files["dense"], batch_sizes=(8,))
    cell = result.cells[0]
    true = _true_ratio(files["base"], files["heavy"], torch.randn(8, 8))
    p50 = cell["model_effect"]["p50"]
    assert true > 1.5, f"the heavy layer should cost clearly more (true ratio {true:.2f})"
    assert cell["verdict"] == verdict.REGRESSION
    assert p50["ci_low"] > 1.05
    assert abs(np.log(p50["ratio"] / true)) < np.log(1.2), (p50, true)
    print(f"bench p50 ratio {p50['ratio']:.3f} [{p50['ci_low']:.3f}, {p50['ci_high']:.3f}], independent {true:.3f}")


def test_same_model_twice_is_no_change_in_at_least_nine_of_ten_runs(files: dict[str, Path]) -> None:
    verdicts = []
    for seed in range(10):
        result = _run(baseline=files["base"], candidate=files["base2"], reference_input=files["ref"],
                      adapter=files["dense"], batch_sizes=(8,), seed=seed, min_duration_s=0.2)
        verdicts.append(result.cells[0]["verdict"])
    assert verdicts.count(verdict.NO_CHANGE) >= 9, verdicts


def test_longer_incident_inputs_are_attributed_to_inputs_not_the_model(files: dict[str, Path]) -> None:
    result = _run(baseline=files["seq"], candidate=files["seq2"], reference_input=files["ref"],
                  incident_input=files["long"], adapter=files["seqcfg"], batch_sizes=(8,))
    cell = result.cells[0]
    assert cell["input_effect"]["verdict"] == verdict.REGRESSION
    assert cell["input_effect"]["p50"]["ci_low"] > 2.0
    assert cell["model_effect"]["verdict"] == verdict.NO_CHANGE
    assert cell["attribution"] == "inputs"
    assert cell["decomposition"]["input_share"] > 0.9
    buckets = {(a["inputs"], b["bucket"]) for a in cell["arms"] for b in a["by_bucket"]}
    assert buckets == {("reference", "tokens=16"), ("incident", "tokens=128")}
    assert {p["inputs"] for p in result.preprocessing} == {"reference", "incident"}


def test_heavier_model_on_longer_inputs_is_attributed_to_both(files: dict[str, Path]) -> None:
    result = _run(baseline=files["seq"], candidate=files["seq_heavy"], reference_input=files["ref"],
                  incident_input=files["long"], adapter=files["seqcfg"], batch_sizes=(8,))
    cell = result.cells[0]
    assert cell["model_effect"]["verdict"] == verdict.REGRESSION
    assert cell["input_effect"]["verdict"] == verdict.REGRESSION
    assert cell["attribution"] == "model and inputs"
    d = cell["decomposition"]
    assert d["total_ratio_p50"] == pytest.approx(d["model_ratio_p50"] * d["input_ratio_p50"])
    assert 0.0 < d["model_share"] < 1.0


def test_bootstrap_interval_covers_the_median_and_narrows_with_rounds() -> None:
    rng = np.random.default_rng(1)
    few = verdict.bootstrap_ratio(rng.normal(1.2, 0.05, 8), 2000, 0.95, rng)
    many = verdict.bootstrap_ratio(rng.normal(1.2, 0.05, 200), 2000, 0.95, rng)
    assert few[1] <= few[0] <= few[2] and many[1] <= many[0] <= many[2]
    assert many[2] - many[1] < (few[2] - few[1]) / 2
    assert verdict.classify(*many[1:], 0.05) == verdict.REGRESSION


def test_per_round_ratios_cancel_drift_that_pooling_would_not() -> None:
    """Machine slows down 3x over the run; both arms of each round see the same speed."""
    rng = np.random.default_rng(2)
    speed = np.linspace(1.0, 3.0, 12)
    base = [rng.normal(100 * s, 2, 200) for s in speed]
    cand = [rng.normal(100 * s, 2, 200) for s in speed]
    eff = verdict.effect([cand], [base], 0.05, 2000, 0.95, rng)
    assert eff["verdict"] == verdict.NO_CHANGE
    assert abs(eff["p50"]["ratio"] - 1.0) < 0.02
    slower = verdict.effect([[c * 1.3 for c in cand]], [base], 0.05, 2000, 0.95, rng)
    assert slower["verdict"] == verdict.REGRESSION and abs(slower["p50"]["ratio"] - 1.3) < 0.03


def test_a_burst_in_one_round_does_not_decide_the_p99() -> None:
    """Round 5 of one arm is hit by a burst of load: pooled p99 would blame that arm, grouped rounds do not."""
    rng = np.random.default_rng(3)
    base = [rng.normal(100, 3, 400) for _ in range(12)]
    cand = [rng.normal(100, 3, 400) for _ in range(12)]
    cand[5][:80] *= 20
    pooled = np.percentile(np.concatenate(cand), 99) / np.percentile(np.concatenate(base), 99)
    eff = verdict.effect([cand], [base], 0.05, 2000, 0.95, rng)
    assert pooled > 10
    assert eff["p99"]["verdict"] == verdict.NO_CHANGE and abs(eff["p99"]["ratio"] - 1) < 0.03
    everywhere = [c * np.where(np.arange(c.size) < 8, 3.0, 1.0) for c in cand]
    assert verdict.effect([everywhere], [base], 0.05, 2000, 0.95, rng)["p99"]["verdict"] == verdict.REGRESSION


def test_p99_without_enough_requests_claims_nothing() -> None:
    rng = np.random.default_rng(4)
    base = [rng.normal(100, 3, 20) for _ in range(10)]
    eff = verdict.effect([[b * 2 for b in base]], [base], 0.05, 2000, 0.95, rng)
    assert np.isnan(eff["p99"]["ci_low"]) and eff["p99"]["verdict"] == verdict.NO_CHANGE
    assert eff["p99"]["ratio"] == pytest.approx(2.0)
    assert eff["p50"]["verdict"] == verdict.REGRESSION and eff["verdict"] == verdict.REGRESSION
