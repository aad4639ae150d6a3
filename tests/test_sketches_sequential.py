"""Slow drift (issue 16, deliverable 4): the CUSUM over per-window z-scores, its threshold, its state."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest
from sqlalchemy import create_engine

from driftwarden.core.store import create_schema
from driftwarden.pipeline.judging import analyze_summary, cusum_state, drift_policy
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.results import previous_cusum, store_window
from driftwarden.schemas.config import MonitorConfig
from driftwarden.sketches.sequential import CUSUM_K, CusumState, cusum_threshold

WINDOW_MS, PER_WINDOW = 60_000, 1000
CONFIG = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric", "y": "numeric"}}]})
POLICY = drift_policy(CONFIG.thresholds, WINDOW_MS)


def _summary(rng: np.random.Generator, index: int, shift: float = 0.0):
    x, y = rng.normal(shift, 1.0, PER_WINDOW).tolist(), rng.normal(size=PER_WINDOW).tolist()  # JSON's own floats
    return summarize_window("m", index * WINDOW_MS, WINDOW_MS, [{"x": a, "y": b} for a, b in zip(x, y)],
                            CONFIG.model("m"))


@pytest.fixture(scope="module")
def reference():
    rng = np.random.default_rng(40)
    return reference_from_summaries([_summary(rng, i) for i in range(24)], dict(CONFIG.model("m").features),
                                    drift_policy(CONFIG.thresholds))


def _run(reference, rng, shifts, start=100):
    state, out = None, []
    for i, shift in enumerate(shifts):
        report = analyze_summary(_summary(rng, start + i, shift), reference, POLICY, state)
        state = cusum_state(report)
        out.append(report.features[0])
    return out


@pytest.mark.parametrize("alpha", [1 / 200, 1 / 1000])
def test_threshold_gives_the_in_control_run_length_it_promises(alpha: float) -> None:
    """Simulated run length to the first alarm on N(0, 1) scores: within [1/2, 2] x 1 / alpha (Siegmund)."""
    h, rng = cusum_threshold(alpha), np.random.default_rng(1)
    chains, s, alive, lengths = 2000, np.zeros(2000), np.ones(2000, bool), np.zeros(2000)
    for t in range(1, int(20 / alpha)):
        s = np.where(alive, np.maximum(0.0, s + rng.normal(size=chains) - CUSUM_K), s)
        fired = alive & (s > h)
        lengths[fired], alive = t, alive & ~fired
        if not alive.any():
            break
    assert 0.5 / alpha <= lengths.mean() <= 2 / alpha, (lengths.mean(), 1 / alpha)


def test_persistent_shift_too_small_for_one_window_is_caught_within_a_few_windows(reference) -> None:
    """0.1 sd at 1,000 events per window: no single window is drifted by its own test, the CUSUM is within 6."""
    out = _run(reference, np.random.default_rng(41), [0.0] * 5 + [0.1] * 10)
    assert not any(f.drifted for f in out[:5])
    first = next(i for i, f in enumerate(out) if f.drifted) - 5
    assert 0 <= first <= 5, [round(f.cusum_up, 2) for f in out]
    assert all(f.drifted for f in out[5 + first:])
    assert out[5 + first].evidence["test"] == "cusum" and out[5 + first].severity == "minor"


def test_drift_free_stream_raises_no_cusum_alarm(reference) -> None:
    """300 drift-free windows x 2 features x 2 sides at h for ARL0 = 8 / alpha (alpha 4.96e-5): expected alarms ~0."""
    out = _run(reference, np.random.default_rng(42), [0.0] * 300)
    assert not any(f.drifted for f in out)
    assert max(f.cusum_up for f in out) > 0  # the sums move


def test_live_state_read_back_from_the_store_is_the_replay_state(reference, tmp_path) -> None:
    """What a restarted live job reads for window t is what replay carried in memory from window t - 1."""
    engine = create_engine(f"sqlite:///{tmp_path / 's.db'}")
    create_schema(engine)
    rng, state = np.random.default_rng(43), None
    with engine.begin() as conn:
        for i, shift in enumerate([0.0, 0.1, 0.1, 0.1]):
            summary = _summary(rng, 200 + i, shift)
            stored = previous_cusum(conn, "m", datetime.fromtimestamp(summary.window_start_ms / 1000, timezone.utc))
            assert stored == (state or {}), i
            report = analyze_summary(summary, reference, POLICY, stored)
            store_window(conn, report, summary.events, 0, None)
            state = cusum_state(report)
    assert state["x"].up > 0 and set(state) == {"x", "y"}
    assert CusumState(1.0, 0.0).step(5.0, h=2.0) == CusumState(3.0, 0.0)  # capped at h + k


def test_a_finished_drift_stops_alarming_after_one_window_without_it() -> None:
    """Capped at h + k, a sum driven far past h by a large change is back at h after one window with
    z = 0: the feature reads drifted no longer than the change lasted, and its alert can resolve."""
    h, state = 6.0, CusumState()
    for _ in range(5):
        state = state.step(20.0, h)
    assert state.alarm(h)
    assert not state.step(0.0, h).alarm(h)


def test_the_references_own_error_does_not_add_up_over_large_windows(reference) -> None:
    """Windows of 20,000 events whose mean sits 1.5 standard errors of the 24,000-event reference's
    mean away from it (what that reference's own error looks like): no drift. The error is in every
    window's score; a sum that counted it once per score drifted on it (red with CUSUM_HORIZON = 1;
    the bench's 200 drift-free features x 20,000 events drifted in 0.41% of cells)."""
    from driftwarden.sketches import HistogramSketch, ReservoirSample, analyze_window

    rng, state, drifted = np.random.default_rng(44), {}, []
    ref = {name: reference.features[name].sketch for name in ("x", "y")}
    centre = {name: r.mean + 1.5 * r.std / np.sqrt(r.n) for name, r in ref.items()}
    for _ in range(60):
        window = {name: (HistogramSketch().update(rng.normal(centre[name], ref[name].std, 20_000)), ReservoirSample())
                  for name in ref}
        verdicts = analyze_window(window, reference, POLICY, state)
        state.update({v.name: v.cusum for v in verdicts if v.cusum is not None})
        drifted += [v.name for v in verdicts if v.drifted]
    assert drifted == []
