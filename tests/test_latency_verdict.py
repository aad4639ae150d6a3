"""The latency verdict: its statistics on synthetic latencies, and a whole run on real (small, CPU) TorchScript models.

No assertion here rests on how fast this machine runs: the verdicts on real timings are
``bench/bench_latency.py cpu``'s checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
import torch  # a declared dependency (the bench extra, installed by make setup): fail, never skip

from driftwarden.latency import runner, samples, verdict
from driftwarden.latency.options import BenchOptions


SHORT = dict(min_duration_s=0.3, min_count=100, warmup=10, memory_iterations=0, threads=1)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Models, event files and the adapter of the run."""
    d = tmp_path_factory.mktemp("latency")
    out = {
        "seq": samples.save_sequence_model(d / "seq.pt"),
        "seq_heavy": samples.save_sequence_model(d / "seq_heavy.pt", dim=256),
        "ref": samples.write_events(d / "ref.jsonl", 256, seq_len=(8, 16)),
        "long": samples.write_events(d / "long.jsonl", 256, seq_len=(100, 128), seed=1),
        "seqcfg": d / "seq.yaml",
    }
    out["seqcfg"].write_text(samples.SEQUENCE_ADAPTER)
    return out


def _run(**kwargs) -> runner.RunResult:
    return runner.run(runner.prepare(BenchOptions(**{**SHORT, **kwargs})))


def test_a_run_on_real_models_reports_each_arm_bucket_and_the_decomposition(files: dict[str, Path]) -> None:
    """The whole run on real (small, CPU) TorchScript models, on reference and incident inputs: what the report
    holds, not how fast anything ran. The verdicts on real timings (a heavier candidate is a regression with the
    ratio an independent measurement gives, a copy is no change, longer inputs are blamed on the inputs) are
    wall-clock claims: ``bench/bench_latency.py cpu`` checks them."""
    result = _run(baseline=files["seq"], candidate=files["seq_heavy"], reference_input=files["ref"],
                  incident_input=files["long"], adapter=files["seqcfg"], batch_sizes=(8,))
    cell = result.cells[0]
    assert cell["status"] == "ok" and cell["batch_size"] == 8
    buckets = {(a["inputs"], b["bucket"]) for a in cell["arms"] for b in a["by_bucket"]}
    assert buckets == {("reference", "tokens=16"), ("incident", "tokens=128")}
    assert {p["inputs"] for p in result.preprocessing} == {"reference", "incident"}
    for arm in cell["arms"]:
        assert arm["latency_ms"]["p50"] > 0 and arm["requests"] >= SHORT["min_count"]
    d = cell["decomposition"]
    assert d["total_ratio_p50"] == pytest.approx(d["model_ratio_p50"] * d["input_ratio_p50"])
    assert cell["verdict"] in (verdict.REGRESSION, verdict.IMPROVEMENT, verdict.NO_CHANGE)


def test_median_interval_covers_the_median_and_narrows_with_rounds() -> None:
    rng = np.random.default_rng(1)
    few = verdict.median_interval(rng.normal(1.2, 0.05, 8), 0.95)
    many = verdict.median_interval(rng.normal(1.2, 0.05, 200), 0.95)
    assert few[1] <= few[0] <= few[2] and many[1] <= many[0] <= many[2]
    assert many[2] - many[1] < (few[2] - few[1]) / 2
    assert verdict.classify(*many[1:], 0.05) == verdict.REGRESSION


def test_per_round_ratios_cancel_drift_that_pooling_would_not() -> None:
    """Machine slows down 3x over the run; both arms of each round see the same speed."""
    rng = np.random.default_rng(2)
    speed = np.linspace(1.0, 3.0, 12)
    base = [rng.normal(100 * s, 2, 200) for s in speed]
    cand = [rng.normal(100 * s, 2, 200) for s in speed]
    eff = verdict.effect([cand], [base], 0.05, 0.95)
    assert eff["verdict"] == verdict.NO_CHANGE
    assert abs(eff["p50"]["ratio"] - 1.0) < 0.02
    slower = verdict.effect([[c * 1.3 for c in cand]], [base], 0.05, 0.95)
    assert slower["verdict"] == verdict.REGRESSION and abs(slower["p50"]["ratio"] - 1.3) < 0.03


def test_a_burst_in_one_round_does_not_decide_the_p99() -> None:
    """Round 5 of one arm is hit by a burst of load: pooled p99 would blame that arm, grouped rounds do not."""
    rng = np.random.default_rng(3)
    base = [rng.normal(100, 3, 400) for _ in range(12)]
    cand = [rng.normal(100, 3, 400) for _ in range(12)]
    cand[5][:80] *= 20
    pooled = np.percentile(np.concatenate(cand), 99) / np.percentile(np.concatenate(base), 99)
    eff = verdict.effect([cand], [base], 0.05, 0.95)
    assert pooled > 10
    assert eff["p99"]["verdict"] == verdict.NO_CHANGE and abs(eff["p99"]["ratio"] - 1) < 0.03
    everywhere = [c * np.where(np.arange(c.size) < 8, 3.0, 1.0) for c in cand]
    assert verdict.effect([everywhere], [base], 0.05, 0.95)["p99"]["verdict"] == verdict.REGRESSION


def test_p99_without_enough_requests_claims_nothing() -> None:
    rng = np.random.default_rng(4)
    base = [rng.normal(100, 3, 20) for _ in range(10)]
    eff = verdict.effect([[b * 2 for b in base]], [base], 0.05, 0.95)
    assert np.isnan(eff["p99"]["ci_low"]) and eff["p99"]["verdict"] == verdict.NO_CHANGE
    assert eff["p99"]["ratio"] == pytest.approx(2.0)
    assert eff["p50"]["verdict"] == verdict.REGRESSION and eff["verdict"] == verdict.REGRESSION


def _same_model_cell(rng: np.random.Generator, rounds: int = 20, requests: int = 300) -> tuple[list, list]:
    """Candidate and baseline arms (reference and incident inputs each) of one model: the machine's speed
    drifts from round to round, each arm's round jitters by 3%, requests are lognormal."""
    speed = np.exp(rng.normal(0, 0.2, rounds))

    def arm() -> list[np.ndarray]:
        return [rng.lognormal(np.log(100 * s), 0.3, requests) * np.exp(rng.normal(0, 0.03)) for s in speed]

    return [arm(), arm()], [arm(), arm()]


def test_a_runs_false_alarm_rate_keeps_its_budget() -> None:
    """400 runs of a model against itself, two cells each, judged with no tolerance to hide behind: the run's
    verdict calls a change in at most 1 - confidence = 5% of them (the Clopper-Pearson 95% interval of the rate
    reaches 5%). The percentile bootstrap with a per-cell Bonferroni this replaced called 13.8% of 1,000 such runs."""
    rng = np.random.default_rng(7)
    runs = 400
    alarms = sum(
        any(verdict.effect(cand, base, 0.0, 0.95, cells=2)["verdict"] != verdict.NO_CHANGE
            for cand, base in (_same_model_cell(rng), _same_model_cell(rng)))
        for _ in range(runs)
    )
    interval = stats.binomtest(alarms, runs).proportion_ci(0.95)
    assert interval.low <= 0.05, f"{alarms} false alarms in {runs} runs: rate interval [{interval.low:.3f}, {interval.high:.3f}]"


def test_each_interval_is_at_the_level_the_whole_run_needs() -> None:
    rng = np.random.default_rng(8)
    cand, base = _same_model_cell(rng)
    assert verdict.effect(cand, base, 0.05, 0.95, cells=3)["ci_level"] == pytest.approx(1 - 0.05 / 6)
    assert verdict.min_rounds(1 - 0.05 / 6) == 8
    low, high = verdict.median_interval(np.arange(1.0, 9.0), 1 - 0.05 / 6)[1:]
    assert (low, high) == (1.0, 8.0)  # 8 rounds: the extremes are the only interval that holds the level
    assert np.isnan(verdict.median_interval(np.arange(1.0, 8.0), 1 - 0.05 / 6)[1])
