"""analyze_window end to end: flags clear drift, stays quiet without it, and handles the odd cases."""

from __future__ import annotations

import numpy as np
import pytest

from driftwarden.core.errors import SketchError
from driftwarden.sketches import (CategoricalSketch, DriftPolicy, NumericSketch, Reference, ReservoirSample,
                      analyze_window, build_feature_reference)

POLICY = DriftPolicy()
CATS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def reference() -> Reference:
    rng = np.random.default_rng(3)
    return Reference({
        "amount": build_feature_reference("amount", "numeric", [rng.normal(10, 2, 2000) for _ in range(30)], POLICY),
        "colour": build_feature_reference("colour", "categorical",
                                          [rng.choice(CATS, 2000).tolist() for _ in range(30)], POLICY),
    })


def window(amount, colour) -> dict:
    out = {}
    if amount is not None:
        out["amount"] = (NumericSketch().update(amount), ReservoirSample(seed=1).update(amount))
    if colour is not None:
        out["colour"] = (CategoricalSketch().update(colour), ReservoirSample(seed=2).update(colour))
    return out


def by_name(verdicts) -> dict:
    return {v.name: v for v in verdicts}


def test_no_drift_window_is_quiet(reference: Reference) -> None:
    rng = np.random.default_rng(4)
    v = by_name(analyze_window(window(rng.normal(10, 2, 2000), rng.choice(CATS, 2000).tolist()), reference, POLICY))
    assert not any(f.drifted for f in v.values()) and all(f.severity == "none" for f in v.values())


def test_mean_shift_and_new_category_are_flagged(reference: Reference) -> None:
    rng = np.random.default_rng(5)
    colours = rng.choice(CATS + ["purple"], 2000, p=[0.25, 0.25, 0.25, 0.25]).tolist()
    v = by_name(analyze_window(window(rng.normal(11, 2, 2000), colours), reference, POLICY))
    assert v["amount"].alarm and v["amount"].drifted and v["amount"].severity in ("moderate", "major")
    assert v["amount"].p_adjusted <= POLICY.alpha and v["amount"].deep.ks_stat > 0.1
    assert v["colour"].alarm and v["colour"].drifted and v["colour"].gate.new_share == pytest.approx(0.25, abs=0.05)


def test_feature_missing_on_either_side(reference: Reference) -> None:
    rng = np.random.default_rng(6)
    w = window(rng.normal(10, 2, 2000), None)
    w["brand_new"] = (NumericSketch().update(rng.normal(size=500)), ReservoirSample().update(rng.normal(size=500)))
    v = by_name(analyze_window(w, reference, POLICY))
    assert [f.name for f in analyze_window(w, reference, POLICY)] == ["amount", "colour", "brand_new"]
    assert v["colour"].count == 0 and not v["colour"].alarm and v["colour"].severity == "none"
    assert v["brand_new"].count == 500 and v["brand_new"].gate.ks is None and not v["brand_new"].alarm


def test_small_and_empty_windows_never_alarm(reference: Reference) -> None:
    tiny = by_name(analyze_window(window([50.0] * 20, ["purple"] * 20), reference, POLICY))
    empty = by_name(analyze_window(window([], []), reference, POLICY))
    few_nulls = by_name(analyze_window(window([None] * 20, [None] * 20), reference, POLICY))
    assert few_nulls["amount"].gate.missing_delta == 1.0
    assert not any(f.alarm for f in [*tiny.values(), *empty.values(), *few_nulls.values()])
    assert tiny["amount"].count == 20 and empty["amount"].count == 0


def test_all_null_window_is_a_missing_rate_drift(reference: Reference) -> None:
    v = by_name(analyze_window(window([None] * 500, None), reference, POLICY))["amount"]
    assert v.gate.missing_delta == 1.0 and v.gate.ks is None
    assert v.alarm and v.drifted and v.severity == "major" and v.deep.missing_pvalue < 1e-10


def test_kind_mismatch_names_the_feature(reference: Reference) -> None:
    """A window sketch of another kind than the reference's (a config changed under its reference): that
    feature is not judged, its error kept with the feature's name; the window is still judged."""
    w = {"amount": (CategoricalSketch().update(["x"] * 200), ReservoirSample().update(["x"] * 200))}
    v = by_name(analyze_window(w, reference, POLICY))["amount"]
    assert (v.error, v.drifted, v.count) == ("not judged: SketchError", False, 200)
    with pytest.raises(SketchError, match="'amount'"):
        raise v.exception


def test_bh_counts_every_feature_and_the_budget_sets_its_level() -> None:
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.schemas.config import ThresholdConfig
    from driftwarden.sketches.policy import budget_alpha

    rng = np.random.default_rng(8)
    names = [f"f{i}" for i in range(20)]
    ref = Reference({n: build_feature_reference(n, "numeric", [rng.normal(size=1000) for _ in range(10)], POLICY)
                     for n in names})
    w = {n: (NumericSketch().update(rng.normal(size=1000)), ReservoirSample().update(rng.normal(size=1000)))
         for n in names}
    moved = rng.normal(0.3, 1.0, 1000)
    w["f0"] = (NumericSketch().update(moved), ReservoirSample(seed=3).update(moved))
    v = by_name(analyze_window(w, ref, POLICY))["f0"]
    gated = sum(f.alarm for f in analyze_window(w, ref, POLICY))
    assert gated < 20 and v.p_adjusted == pytest.approx(min(1.0, v.deep.pvalue * 20))  # ranked first of 20
    policy = drift_policy(ThresholdConfig(), 300_000)  # half the budget per window, half to the slow-drift CUSUM
    assert policy.alpha == policy.sequential_alpha == budget_alpha(1.0, 300_000) / 2 == pytest.approx(1 / 4032)
    assert drift_policy(ThresholdConfig(alpha=0.01), 300_000).alpha == 0.01
