"""The reference choice (pipeline/references.py): one rule and one contract over either window store.

The live job keeps the warm-up and rolling windows in SQL (``SqlWindows``), replay and the front door
in memory (``MemoryWindows``): each test runs on both (SQL on SQLite and on the real PostgreSQL), and
the same windows give the same reference bytes whichever store held them.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from sqlalchemy import func, select

from driftwarden.core.store import make_engine
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import References, reference_from_summaries
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.window_store import MemoryWindows, SqlWindows
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.tables import window_summaries

WINDOW = 10_000
CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "reference": {"mode": "warmup", "warmup_windows": 3},
    "thresholds": {"min_count": 30},
    "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}],
})
MODEL = CONFIG.models[0]
ROLLING = CONFIG.model_copy(update={"reference": CONFIG.reference.model_copy(
    update={"mode": "rolling", "rolling_windows": 2, "lag_windows": 1})})


def _maps(n: int, shift: float = 0.0, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": None if i % 40 == 0 else float(rng.normal(shift)), "c": str(rng.choice(["a", "b"]))}
            for i in range(n)]


def _window(w: int, n: int = 300, shift: float = 0.0, model: str = "m"):
    return summarize_window(model, w * WINDOW, WINDOW, _maps(n, shift, seed=w), MODEL)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def window_store(request, tmp_path):
    """Makes a window store, as replay (memory) or the live job (SQL, in one open transaction) has it."""
    @contextmanager
    def make(name: str = "store"):
        if request.param == "memory":
            yield MemoryWindows()
            return
        url = (f"sqlite:///{tmp_path / name}.db" if request.param == "sqlite"
               else request.getfixturevalue("pg_engine").url.render_as_string(hide_password=False))
        engine = make_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(window_summaries.delete())
                yield SqlWindows(conn)
        finally:
            engine.dispose()
    return make


def _judge(references: References, windows, w: int):
    """What the live job and replay do per window: its reference, then the window kept."""
    summary = _window(w)
    reference = references.reference_for("m", summary.window_start_ms, windows)
    references.remember(summary, windows)
    return reference


def test_warmup_judges_only_windows_after_the_first_n(window_store):
    references = References(CONFIG, drift_policy(CONFIG.thresholds))
    with window_store() as windows:
        early = [_judge(references, windows, w) for w in range(3)]
        reference = _judge(references, windows, 3)
        assert [r.features for r in early] == [{}, {}, {}]  # counted, not judged: an empty reference
        assert references.reference_for("m", 0, windows).features == {}  # a warm-up window is never judged,
        assert references.reference_for("m", 2 * WINDOW, windows).features == {}  # the last one neither (a restart)
        assert _judge(references, windows, 7) is reference  # after the warm-up: always the same one
        assert windows.first_starts("m", 10) == [0, WINDOW, 2 * WINDOW]  # later windows are not kept
        if isinstance(windows, SqlWindows):
            assert windows.conn.execute(select(func.count()).select_from(window_summaries)).scalar_one() == 3
    assert reference.features["x"].sketch.n == sum(m["x"] is not None for w in range(3) for m in _maps(300, seed=w))
    verdicts = {f.name: f for f in analyze_summary(_window(8, 800, shift=1.0), reference,
                                                   drift_policy(CONFIG.thresholds)).features}
    assert verdicts["x"].drifted and not verdicts["c"].drifted


def test_rolling_uses_the_last_m_windows_before_the_lag(window_store):
    references = References(ROLLING, drift_policy(ROLLING.thresholds))
    with window_store() as windows:
        for w in range(5):
            references.remember(_window(w, 100 * (w + 1)), windows)
        reference = references.reference_for("m", 5 * WINDOW, windows)  # lag 1: windows 2 and 3, not 4
        assert references.reference_for("m", 2 * WINDOW, windows).features == {}  # one window before the lag
    assert reference.features["c"].sketch.count == 300 + 400


def test_memory_keeps_only_the_windows_a_rolling_reference_can_need():
    references, windows = References(ROLLING, drift_policy(ROLLING.thresholds)), MemoryWindows()
    for w in range(6):
        references.remember(_window(w), windows)
    assert windows.first_starts("m", 10) == [3 * WINDOW, 4 * WINDOW, 5 * WINDOW]  # rolling 2 + lag 1


def test_the_same_windows_give_the_same_reference_in_every_store(window_store):
    """The bytes of the reference (sketches, samples, calibrated thresholds) do not depend on the store."""
    policy = drift_policy(ROLLING.thresholds)
    expected = reference_from_summaries([_window(3), _window(2)], MODEL.monitored, policy,  # newest first
                                        prediction=MODEL.monitor_prediction).serialize()
    references = References(ROLLING, policy)
    with window_store() as windows:
        for w in range(4):
            references.remember(_window(w), windows)
        assert references.reference_for("m", 5 * WINDOW, windows).serialize() == expected


def test_a_reference_is_built_once_per_set_of_windows(window_store, monkeypatch):
    """Windows judged against the same kept windows reuse the reference; a new set rebuilds it."""
    import driftwarden.pipeline.references as module

    builds = []
    real = module.reference_from_summaries
    monkeypatch.setattr(module, "reference_from_summaries",
                        lambda summaries, *rest, **options: builds.append([s.window_start_ms for s in summaries])
                        or real(summaries, *rest, **options))
    config = ROLLING.model_copy(update={"reference": ROLLING.reference.model_copy(update={"lag_windows": 0})})
    for cfg in (CONFIG, config):
        references = References(cfg, drift_policy(cfg.thresholds))
        with window_store(cfg.reference.mode) as windows:
            for w in range(4):
                references.remember(_window(w, 200), windows)
            first = references.reference_for("m", 4 * WINDOW, windows)
            assert references.reference_for("m", 4 * WINDOW, windows) is first
            references.remember(_window(4, 200), windows)
            later = references.reference_for("m", 5 * WINDOW, windows)
            assert (later is first) == (cfg.reference.mode == "warmup")  # rolling: windows 4 and 3 now
    assert builds == [[0, WINDOW, 2 * WINDOW], [3 * WINDOW, 2 * WINDOW], [4 * WINDOW, 3 * WINDOW]]  # rolling: newest first


def test_a_file_reference_for_every_window_and_nothing_for_a_model_without_one():
    policy = drift_policy(CONFIG.thresholds)
    reference = reference_from_summaries([_window(w) for w in range(4)], MODEL.monitored, policy)
    two_models = CONFIG.model_copy(update={"models": [MODEL, MODEL.model_copy(update={"name": "n"})]})
    references, windows = References(two_models, policy, ReferenceSet({"m": reference})), MemoryWindows()
    assert references.mode == "file"
    assert references.reference_for("m", 0, windows) is reference  # from the first window on
    assert references.reference_for("n", 0, windows).features == {}  # the file has none for n: counted only
    assert references.reference_for("other", 0, windows).features == {}  # not monitored
    references.remember(_window(0), windows)
    assert windows.first_starts("m", 5) == []  # a file reference keeps no window
    only_x = References(CONFIG, policy, ReferenceSet({"m": reference}), features=["x"])
    assert set(only_x.reference_for("m", 0, windows).features) == {"x"}


def test_a_model_not_monitored_is_counted_not_judged_and_not_kept(window_store):
    references = References(CONFIG, drift_policy(CONFIG.thresholds))
    with window_store() as windows:
        for w in range(5):
            references.remember(_window(w, model="other"), windows)
        assert references.reference_for("other", 9 * WINDOW, windows).features == {}
        assert windows.first_starts("other", 5) == []


def test_file_mode_without_a_reference_set_says_so():
    config = CONFIG.model_copy(update={"reference": CONFIG.reference.model_copy(update={"mode": "file",
                                                                                       "path": "r.dwref"})})
    with pytest.raises(ValueError, match="needs the reference set"):
        References(config, drift_policy(config.thresholds))


GROUPED = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "reference": {"mode": "warmup", "warmup_windows": 3},
    "thresholds": {"min_count": 30},
    "models": [{"name": "m", "features": {"x": "numeric", "y": "numeric", "c": "categorical"}}],
})


def _grouped_window(w: int):
    rng = np.random.default_rng(w)
    maps = [{"x": float(x), "y": float(x + rng.normal()), "c": str(rng.choice(["a", "b"]))}
            for x in rng.normal(size=300)]
    return summarize_window("m", w * WINDOW, WINDOW, maps, GROUPED.models[0])


@pytest.mark.parametrize("mode", ["file", "warmup", "rolling"])
def test_every_mode_carries_the_models_multivariate_group_as_its_features(mode, window_store):
    """x and y make the model's default group, "(numeric)": its reference comes with the features' in every
    mode; replay's ``--features`` keeps it only when all its features are kept (or it is named)."""
    policy = drift_policy(GROUPED.thresholds)
    config = GROUPED if mode != "rolling" else GROUPED.model_copy(update={"reference": GROUPED.reference.model_copy(
        update={"mode": "rolling", "rolling_windows": 3, "lag_windows": 0})})
    model = GROUPED.models[0]
    built = reference_from_summaries([_grouped_window(w) for w in range(3)], model.sketch_kinds, policy,
                                     prediction=model.monitor_prediction)  # as References builds one
    assert set(built.groups) == {"(numeric)"}
    reference_set = ReferenceSet({"m": built}) if mode == "file" else None
    with window_store() as windows:
        references = References(config, policy, reference_set)
        for w in range(3):
            references.remember(_grouped_window(w), windows)
        reference = references.reference_for("m", 3 * WINDOW, windows)
        assert set(reference.features) == {"x", "y", "c"} and set(reference.groups) == {"(numeric)"}
        assert reference.serialize() == built.serialize()  # the same windows, the same bytes, group included
    for features, groups in ((["x"], set()), (["x", "y"], {"(numeric)"}), (["(numeric)"], {"(numeric)"})):
        only = References(config, policy, ReferenceSet({"m": built}), features=features)
        assert set(only.reference_for("m", 3 * WINDOW, MemoryWindows()).groups) == groups, features


def test_a_capped_categorical_features_unseen_null_comes_from_each_windows_own_sample() -> None:
    """reference_from_summaries builds each window's deep-test sample only when calibration reads it (a capped
    categorical feature's unseen null, with every value's count as the reference build gives): the same null
    scores as handing every window's sample over built."""
    from collections import Counter

    from driftwarden.sketches import DriftPolicy
    from driftwarden.sketches.reference import reference_from_window_sketches, unseen_null

    policy = DriftPolicy(min_windows=5)
    rng = np.random.default_rng(3)
    values = [[f"v{v}" for v in rng.integers(0, 20_000 + 400 * i, 2500)] for i in range(6)]
    summaries = [summarize_window("m", i * WINDOW, WINDOW, [{"x": 1.0, "c": c} for c in window], MODEL)
                 for i, window in enumerate(values)]
    counts = [dict(Counter(window)) for window in values]
    built = reference_from_summaries(summaries, MODEL.sketch_kinds, policy, {"c": counts}).features["c"]
    eager = reference_from_window_sketches("c", "categorical", [s.sketches["c"] for s in summaries],
                                           summaries[0].feature_sample("c"), policy, counts,
                                           [s.feature_sample("c") for s in summaries])
    assert built.profile is not None and not summaries[0].sketches["c"].is_exact  # windows capped: samples read
    assert np.array_equal(unseen_null(built), unseen_null(eager), equal_nan=True)
