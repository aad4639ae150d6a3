"""analyze_segments: the global view as analyze_window judges it, segments under hierarchical FDR, attribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.sketches import DriftPolicy, Reference, ReservoirSample, analyze_segments, analyze_window, build_feature_reference
from driftwarden.sketches.feature import new_sketch
from driftwarden.sketches.fdr import hierarchical_adjusted
from driftwarden.sketches.policy import budget_alpha

COUNTRIES, SHARES = ["US", "DE", "FR"], [0.6, 0.3, 0.1]
CATS = ["red", "green", "blue"]
POLICY = DriftPolicy(alpha=budget_alpha(1.0, 300_000))  # one false alert a week at five-minute windows
MIN_COUNT = 200


def events(rng: np.random.Generator, n: int, shift: dict | None = None) -> dict[str, np.ndarray]:
    """n events: country, amount ~ N(10, 2), score ~ N(0, 1), colour; ``shift``: {(feature, country): sd}."""
    country = rng.choice(COUNTRIES, n, p=SHARES)
    data = {"country": country, "amount": rng.normal(10, 2, n), "score": rng.normal(0, 1, n),
            "colour": rng.choice(CATS, n)}
    for (feature, where), sd in (shift or {}).items():
        if feature == "colour":  # a share sd of the segment's colours turns red
            data[feature] = np.where((country == where) & (rng.uniform(size=n) < sd), "red", data[feature])
        else:
            data[feature] = data[feature] + sd * (2.0 if feature == "amount" else 1.0) * (country == where)
    return data


def summary(data: dict[str, np.ndarray], features=("amount", "score", "colour"), seed: int = 1) -> dict:
    """The {feature: (sketch, sample)} window of these events, as the pipeline keeps it."""
    out = {}
    for i, name in enumerate(features):
        kind = "categorical" if name == "colour" else "numeric"
        values = data[name].tolist()
        out[name] = (new_sketch(kind, name).update(values), ReservoirSample(seed=seed + i).update(values))
    return out


def split(data: dict[str, np.ndarray]) -> dict[tuple[str, ...], dict[str, np.ndarray]]:
    return {(c,): {k: v[data["country"] == c] for k, v in data.items()} for c in COUNTRIES}


def reference_of(windows: list[dict[str, np.ndarray]]) -> Reference:
    return Reference({name: build_feature_reference(name, "categorical" if name == "colour" else "numeric",
                                                    [w[name].tolist() for w in windows], POLICY)
                      for name in ("amount", "score", "colour")})


@pytest.fixture(scope="module")
def references() -> tuple[Reference, dict[tuple[str, ...], Reference]]:
    rng = np.random.default_rng(21)
    windows = [events(rng, 3000) for _ in range(12)]
    return reference_of(windows), {key: reference_of([split(w)[key] for w in windows]) for key in split(windows[0])}


def test_without_judged_segments_the_verdicts_are_analyze_windows(references) -> None:
    ref, _ = references
    rng = np.random.default_rng(22)
    for trial in range(40):
        n = int(rng.choice([50, 300, 3000]))
        shift = {("amount", "US"): float(rng.choice([0.0, 0.1, 0.5])), ("colour", "DE"): float(rng.choice([0.0, 0.3]))}
        data = events(rng, n, shift)
        if rng.uniform() < 0.3:
            data["score"] = data["score"] * float(rng.choice([1.0, 1.5]))
        features = [f for f in ("amount", "score", "colour") if rng.uniform() > 0.15] + ["extra"] * (trial % 7 == 0)
        data["extra"] = rng.normal(size=n)
        window = summary(data, features, seed=trial)
        policy = DriftPolicy(alpha=0.05, sequential_alpha=float(rng.choice([0.0, 0.01])))
        state = {fv.name: fv.cusum for fv in analyze_window(window, ref, policy) if fv.cusum is not None}
        expected = analyze_window(window, ref, policy, state)
        assert analyze_segments(window, {}, ref, {}, policy, MIN_COUNT, state) == (expected, {})
        # segments that are never judged (too few events, or no reference of their own) change nothing
        parts = {key: summary(part) for key, part in split(data).items()}
        small = {key: ref for key, part in split(data).items() if len(part["amount"]) < MIN_COUNT}
        glob, segs = analyze_segments(window, parts, ref, small, policy, MIN_COUNT, state)
        assert glob == expected and list(segs) == list(parts)
        for key, verdicts in segs.items():
            assert [v.count for v in verdicts] == [len(split(data)[key][f]) for f in ("amount", "score", "colour")]
            assert not any(v.alarm or v.drifted or v.p_adjusted is not None for v in verdicts)


def test_a_small_segments_shift_is_attributed_to_that_segment(references) -> None:
    ref, seg_refs = references
    rng = np.random.default_rng(23)
    found, global_drifted = 0, 0
    for trial in range(20):
        data = events(rng, 3000, {("amount", "FR"): 0.5})  # a 10% segment moves by half a standard deviation
        parts = {key: summary(part, seed=trial) for key, part in split(data).items()}
        assert len(split(data)[("FR",)]["amount"]) >= MIN_COUNT
        glob, segs = analyze_segments(summary(data, seed=trial), parts, ref, seg_refs, POLICY, MIN_COUNT)
        drifted = [(key, v.name) for key, vs in segs.items() for v in vs if v.drifted]
        drifted += [(None, v.name) for v in glob if v.drifted]
        assert set(drifted) <= {(("FR",), "amount"), (None, "amount")}
        found += (("FR",), "amount") in drifted
        global_drifted += (None, "amount") in drifted
        # p_adjusted is the hierarchical one: families per feature of the global test and the judged segments
        members = {name: [v for v in [*glob, *(v for vs in segs.values() for v in vs)] if v.name == name]
                   for name in ("amount", "score", "colour")}
        families = [[m.deep.pvalue if m.deep else 1.0 for m in ms] for ms in members.values()]
        for ms, expect in zip(members.values(), hierarchical_adjusted(families, POLICY.alpha)):
            assert [m.p_adjusted for m in ms] == [e if m.deep else None for m, e in zip(ms, expect)]
    print(f"\nFR (10% of 3000 events) amount +0.5 sd: found in {found}/20 windows as (amount, FR); "
          f"the global amount drifted in {global_drifted}/20")
    assert found == 20


def test_drift_free_windows_with_segments_stay_within_the_budget(references) -> None:
    ref, seg_refs = references
    rng = np.random.default_rng(25)
    policy, windows, alarmed = DriftPolicy(alpha=0.05), 400, 0
    for trial in range(windows):
        data = events(rng, 3000)
        parts = {key: summary(part, seed=trial) for key, part in split(data).items()}
        glob, segs = analyze_segments(summary(data, seed=trial), parts, ref, seg_refs, policy, MIN_COUNT)
        alarmed += any(v.drifted for v in [*glob, *(v for vs in segs.values() for v in vs)])
    ci = stats.binomtest(alarmed, windows).proportion_ci(0.95)
    print(f"\ndrift-free, 3 features x (global + 3 segments), alpha {policy.alpha}: {alarmed}/{windows} windows "
          f"reported drift (95% CI {ci.low:.4f}..{ci.high:.4f})")
    assert ci.low <= policy.alpha


def test_a_segment_below_min_count_is_never_judged(references) -> None:
    ref, seg_refs = references
    rng = np.random.default_rng(24)
    data = events(rng, 1500, {("amount", "FR"): 5.0})  # FR: about 150 events, moved by five sd
    parts = {key: summary(part) for key, part in split(data).items()}
    n_fr = len(split(data)[("FR",)]["amount"])
    assert 100 <= n_fr < MIN_COUNT
    _, segs = analyze_segments(summary(data), parts, ref, seg_refs, POLICY, MIN_COUNT)
    fr = {v.name: v for v in segs[("FR",)]}
    assert fr["amount"].count == n_fr and not fr["amount"].alarm and fr["amount"].p_adjusted is None
    _, judged = analyze_segments(summary(data), parts, ref, seg_refs, POLICY, 100)  # at min_count 100 it is
    assert {v.name: v for v in judged[("FR",)]}["amount"].drifted
