"""No window may crash the analysis (a category rename upstream stopped the live job and replay).

* The rename itself: a window whose values are all categories the reference never saw is judged
  major drift, its new-category share 100%, the new values named in the evidence, with 1, 2 or many
  reference categories, with and without nulls, in the global view and in a segment.
* A property-based search over pairs of reference and window summaries of every kind the job
  builds drives :func:`pipeline.judging.analyze_summary` (the function the live job and replay call):
  every pair is judged, no exception, no feature left "not judged".
* Defence in depth: a statistic forced to raise for one feature leaves that feature "not judged:
  <exception type>", logged once with its model and window, and the rest of the window judged.

The live job and replay with the rename, and a statistic forced to raise inside the live job, are
in tests/test_judging_errors_job.py.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftwarden.pipeline.judging import analyze_summary, cusum_state, drift_policy, segment_references
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.reference_build import build_reference_set
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import Event

WINDOW_MS = 60_000
T0 = 1_790_000_040_000
#: Pairs the property-based search judges (each a reference of 1-6 windows and two windows after it).
PAIRS = 150


def _config(features: dict[str, str], min_count: int = 30, segments: dict | None = None) -> MonitorConfig:
    model = {"name": "m", "features": features, "monitor_prediction": False}
    if segments is not None:
        model["segments"] = segments
    return MonitorConfig.model_validate({"window": {"size": "60s"}, "reference": {"mode": "file", "path": "unused.dwref"},
                                         "thresholds": {"min_count": min_count}, "models": [model]})


def _events(columns: dict[str, list], start_ms: int) -> list[Event]:
    n = max((len(v) for v in columns.values()), default=0)
    step = max(WINDOW_MS // max(n, 1), 1)
    return [Event("m", start_ms + i * step, {name: values[i] for name, values in columns.items()}) for i in range(n)]


def _judge(config: MonitorConfig, reference_windows: list[dict[str, list]], windows: list[dict[str, list]]):
    """Build the reference from its windows as `reference build` does, then judge each window in turn as
    the live job does (the CUSUM carried from one window to the next); the reports."""
    policy = drift_policy(config.thresholds, WINDOW_MS)
    events = [e for k, cols in enumerate(reference_windows) for e in _events(cols, T0 - (len(reference_windows) - k) * WINDOW_MS)]
    references = build_reference_set(events, config, policy)
    model = config.model("m")
    reference = references.models["m"]
    keys = references.segment_keys_by("m", model.segments.by) if model.segments else None
    reports, state = [], None
    for k, cols in enumerate(windows):
        group = _events(cols, T0 + k * WINDOW_MS)
        summary = summarize_window("m", T0 + k * WINDOW_MS, WINDOW_MS, [e.features for e in group], model,
                                   segments=keys)
        report = analyze_summary(summary, reference, policy, state,
                                 *segment_references(summary, references.segment_reference, model))
        state = cusum_state(report)
        reports.append(report)
    return reports


# ------------------------------------------------------------------------------------------ the rename
@pytest.mark.parametrize("categories", [["DE"], ["DE", "FR"], ["DE", "FR", "US"], [f"C{i:02d}" for i in range(40)]])
@pytest.mark.parametrize("null_share", [0.0, 0.2])
def test_a_window_of_only_new_categories_is_major_drift(categories, null_share):
    rng = np.random.default_rng(len(categories))

    def column(values: list[str], n: int) -> list:
        return [None if rng.random() < null_share else str(rng.choice(values)) for _ in range(n)]

    renamed = [c.lower() for c in categories]
    reports = _judge(_config({"c": "categorical", "x": "numeric"}),
                     [{"c": column(categories, 600), "x": rng.normal(size=600).tolist()} for _ in range(6)],
                     [{"c": column(categories, 600), "x": rng.normal(size=600).tolist()},
                      {"c": column(renamed, 600), "x": rng.normal(size=600).tolist()}])
    before, after = ({f.name: f for f in r.features} for r in reports)
    assert not before["c"].drifted and before["c"].error is None
    c = after["c"]
    assert (c.error, c.drifted, c.severity) == (None, True, "major")
    assert c.gate_new_share == 1.0
    new = [m["category"] for m in c.evidence["moved"] if m["ref_share"] == 0.0]  # the new values lead the evidence
    assert c.evidence["moved"][:len(new)] == [m for m in c.evidence["moved"] if m["ref_share"] == 0.0]
    assert len(new) == min(3, len(renamed)) and set(new) <= set(renamed), c.evidence
    assert not after["x"].drifted


def test_a_renamed_segment_is_judged_with_the_rest():
    """The rename in one segment only (country=DE's device values): that cell major, the window judged."""
    rng = np.random.default_rng(5)
    config = _config({"country": "categorical", "device": "categorical"}, segments={"by": ["country"], "top": 3})

    def window(renamed: bool) -> dict[str, list]:
        country = rng.choice(["DE", "FR", "US"], 900).tolist()
        device = [str(rng.choice(["ios", "web"])) for _ in country]
        if renamed:
            device = [d.upper() if c == "DE" else d for c, d in zip(country, device)]
        return {"country": country, "device": device}

    [quiet, moved] = _judge(config, [window(False) for _ in range(6)], [window(False), window(True)])
    cells = {(f.name, (f.segment or {}).get("country")): f for f in moved.features}
    de = cells["device", "DE"]
    assert (de.error, de.drifted, de.severity, de.gate_new_share) == (None, True, "major", 1.0)
    assert not any(f.drifted for key, f in cells.items() if key[1] in ("FR", "US"))
    assert all(f.error is None for f in quiet.features + moved.features)


def test_a_reference_of_subnormal_values_gives_finite_gate_scores():
    """Buckets narrower than 1e-308 (values at +-5e-324 beside 0): the CDF's slope there overflows in np.interp;
    the gate's KS and PSI stay numbers (found by a random search beyond the derandomized one below)."""
    rng = np.random.default_rng(11)
    config = _config({"x": "numeric"}, min_count=1)
    reference = [{"x": rng.choice([1e308, -1e308, 5e-324, -5e-324, 0.0], 400).tolist()},
                 {"x": rng.normal(0.0, 0.05, 1_500).tolist()}]
    [moved] = _judge(config, reference, [{"x": [3.1]}])
    [x] = moved.features
    assert x.error is None
    assert math.isfinite(x.gate_ks) and math.isfinite(x.gate_psi), (x.gate_ks, x.gate_psi)


# ------------------------------------------------------------------------- the property-based search
def _numeric(kind: str, seed: int, n: int) -> list:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(rng.uniform(-5, 5), rng.uniform(0.01, 10), n).tolist()
    if kind == "constant":
        return [float(rng.choice([0.0, 1.0, -3.5, 1e-300]))] * n
    if kind == "null":
        return [None] * n
    if kind == "nan_inf":
        return [float(rng.choice([math.nan, math.inf, -math.inf, 1.0, 2.0])) for _ in range(n)]
    if kind == "extreme":
        return rng.choice([1e308, -1e308, 5e-324, -5e-324, 0.0], n).tolist()
    if kind == "integers":
        return rng.integers(-3, 4, n).astype(float).tolist()
    return [None if rng.random() < 0.5 else float(v) for v in rng.lognormal(0, 3, n)]  # half null, heavy tail


def _categorical(kind: str, seed: int, n: int, offset: int) -> list:
    rng = np.random.default_rng(seed)
    if kind == "one":
        return [f"v{offset}"] * n
    if kind == "few":
        return [f"v{offset + int(i)}" for i in rng.integers(0, 3, n)]
    if kind == "many":  # past the exact cap of a window sketch (capped counts, a high-cardinality profile)
        return [f"id-{offset}-{int(i)}" for i in rng.integers(0, 5_000, n)]
    if kind == "null":
        return [None] * n
    return [None if rng.random() < 0.4 else f"v{offset + int(i)}" for i in rng.integers(0, 30, n)]


NUMERIC_KINDS = ["normal", "constant", "null", "nan_inf", "extreme", "integers", "sparse"]
CATEGORICAL_KINDS = ["one", "few", "many", "null", "sparse"]
SIZES = st.sampled_from([0, 1, 3, 40, 400, 1_500])


@st.composite
def pairs(draw):
    """A config and the columns of a reference's windows and of two windows after it."""
    segmented = draw(st.booleans())
    config = _config({"x": "numeric", "c": "categorical", "s": "categorical"}, min_count=draw(st.sampled_from([1, 5, 30])),
                     segments={"by": ["s"], "top": 2, "min_count": draw(st.sampled_from([1, 50]))} if segmented else None)

    def window(offset: int) -> dict[str, list]:
        n = draw(SIZES)
        segments = draw(st.sampled_from(["one", "few", "sparse"]))
        return {"x": _numeric(draw(st.sampled_from(NUMERIC_KINDS)), draw(st.integers(0, 2**16)), n),
                "c": _categorical(draw(st.sampled_from(CATEGORICAL_KINDS)), draw(st.integers(0, 2**16)), n, offset),
                "s": _categorical(segments, draw(st.integers(0, 2**16)), n, 0)}

    reference = [window(0) for _ in range(draw(st.integers(1, 6)))]
    if not any(len(w["x"]) for w in reference):
        reference[0] = {"x": [1.0], "c": ["v0"], "s": ["v0"]}  # a reference needs one event
    return config, reference, [window(draw(st.sampled_from([0, 0, 1, 100]))) for _ in range(2)]


def test_no_pair_of_summaries_makes_judging_raise():
    """Every pair the search draws is judged: a verdict for each feature (and segment), never an exception,
    never the "not judged" fallback (which would hide a raise)."""
    tried: list[int] = []

    @settings(max_examples=PAIRS, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(pairs())
    def judged(case) -> None:
        config, reference, windows = case
        reports = _judge(config, reference, windows)
        errors = [(f.name, f.segment, f.error) for r in reports for f in r.features if f.error is not None]
        assert not errors, errors
        assert all(f.severity in ("none", "minor", "moderate", "major") for r in reports for f in r.features)
        # a score is a number or absent, never NaN; only a distance may be infinite (values near 1e308 apart)
        not_numbers = [(f.name, f.segment, name, value) for r in reports for f in r.features
                       for name, value in f.scores().items() if value is not None and not math.isfinite(value)
                       and (math.isnan(value) or not name.endswith("emd"))]
        assert not not_numbers, not_numbers
        tried.append(1)

    judged()
    print(f"judged {len(tried)} pairs of reference and window summaries")
    assert len(tried) == PAIRS


# ------------------------------------------------------------------------------ defence in depth
def test_a_statistic_that_raises_leaves_one_feature_not_judged(monkeypatch, caplog):
    """``histogram_tests`` (x's deep test) raises: x is "not judged: ZeroDivisionError", logged once with
    its model and window; c, drifted in the same window, is judged and drifted."""
    from driftwarden.sketches import analysis

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("forced")

    rng = np.random.default_rng(2)
    reference = [{"x": rng.normal(size=500).tolist(), "c": rng.choice(["a", "b"], 500).tolist()} for _ in range(6)]
    shifted = {"x": rng.normal(3, 1, 500).tolist(), "c": ["z"] * 500}
    monkeypatch.setattr(analysis, "histogram_tests", broken)
    with caplog.at_level(logging.ERROR, logger="driftwarden.pipeline.summary"):
        [report] = _judge(_config({"x": "numeric", "c": "categorical"}), reference, [shifted])
    by_name = {f.name: f for f in report.features}
    x, c = by_name["x"], by_name["c"]
    assert (x.error, x.drifted, x.severity, x.alarm, x.count) == ("not judged: ZeroDivisionError", False, "none", False, 500)
    assert (c.error, c.drifted, c.severity) == (None, True, "major")
    records = [r for r in caplog.records if "not judged" in r.getMessage()]
    assert len(records) == 1
    message = records[0].getMessage()
    assert "'x'" in message and "'m'" in message and "2026-09-21T14:14:00" in message
    assert records[0].exc_info and records[0].exc_info[0] is ZeroDivisionError


def test_a_step_across_features_that_raises_leaves_every_feature_not_judged(monkeypatch):
    """Should the FDR step itself raise, the window is still reported: every feature "not judged", counts kept."""
    from driftwarden.sketches import analysis

    def broken(*_args, **_kwargs):
        raise FloatingPointError("forced")

    monkeypatch.setattr(analysis, "hierarchical_adjusted", broken)
    rng = np.random.default_rng(3)
    reference = [{"x": rng.normal(size=300).tolist()} for _ in range(6)]
    [report] = _judge(_config({"x": "numeric"}), reference, [{"x": rng.normal(size=300).tolist()}])
    assert [(f.name, f.count, f.error) for f in report.features] == [("x", 300, "not judged: FloatingPointError")]
