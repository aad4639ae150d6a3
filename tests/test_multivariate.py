"""Multivariate groups and vector features: exact mergeable moments, the tests on them, config and validation.

Statistics are checked against numpy on the full data (covariance within the 31-bit rounding of each
value: relative 1e-8 here) and the tests' false-alarm rate against its level with a binomial bound.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import stats

from driftwarden.core.errors import InvalidEventError
from driftwarden.core.projection import project, projection_matrix
from driftwarden.pipeline.judging import analyze_summary
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.summary import WindowSummary, merge_summaries, summarize_window
from driftwarden.schemas.config import DEFAULT_GROUP, ModelConfig, MonitorConfig
from driftwarden.schemas.events import EventRules, validate_event
from driftwarden.sketches import DriftPolicy, Reference
from driftwarden.sketches.moments import SCALE, GroupMoments, quantize
from driftwarden.sketches.multivariate import build_group_reference, group_pvalues, group_scores

NAMES = ("a", "b", "c")


def _correlated(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    cov = [[1.0, rho, 0.2], [rho, 1.0, 0.0], [0.2, 0.0, 1.0]]
    return rng.multivariate_normal([5.0, -2.0, 0.0], cov, size=n) * [1.0, 30.0, 0.01]


# -- moments ---------------------------------------------------------------------------------------------------

def test_moments_are_the_exact_sums_of_the_rounded_values_and_numpys_covariance():
    rng = np.random.default_rng(3)
    rows = rng.lognormal(0, 4, size=(400, 3)) * rng.choice([-1, 1], size=(400, 3))
    m = GroupMoments(NAMES).update(rows)
    q, p = quantize(rows)
    for i in range(3):
        exact = sum(Fraction(int(a)) * Fraction(2) ** int(b) for a, b in zip(q[:, i], p[:, i]))
        assert Fraction(m.sums[i], 1 << SCALE) == exact
    product = sum(Fraction(int(q[r, 0] * q[r, 2])) * Fraction(2) ** int(p[r, 0] + p[r, 2]) for r in range(400))
    assert Fraction(m.products[2], 1 << SCALE) == product  # the (a, c) term
    np.testing.assert_allclose(m.covariance(), np.cov(rows.T), rtol=1e-8)
    np.testing.assert_allclose(m.mean(), rows.mean(axis=0), rtol=1e-8)


def test_cancellation_does_not_lose_the_covariance():
    rows = np.array([[1e9 + 1, 1.0], [1e9 - 1, -1.0], [1e9 + 2, 2.0], [1e9 - 2, -2.0]])
    m = GroupMoments(("x", "y")).update(rows)
    np.testing.assert_allclose(m.covariance(), np.cov(rows.T), rtol=1e-8)


def test_incomplete_rows_are_counted_and_left_out():
    rows = np.array([[1.0, 2.0], [np.nan, 1.0], [np.inf, 1.0], [2.0 ** 128, 1.0], [1e-300, 3.0], [-0.0, 1.0]])
    m = GroupMoments(("x", "y")).update(rows)
    assert (m.n, m.incomplete) == (3, 3)
    np.testing.assert_allclose(m.mean(), [1.0 / 3, 2.0])  # 1e-300 counts as 0.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(*[st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.none())] * 3),
                min_size=0, max_size=40), st.randoms(use_true_random=False))
def test_any_order_and_split_gives_the_same_bytes(rows, rnd: random.Random):
    data = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64).reshape(-1, 3)
    whole = GroupMoments(NAMES).update(data).serialize()
    order = list(range(len(data)))
    rnd.shuffle(order)
    cut = sorted(rnd.sample(range(len(data) + 1), k=min(2, len(data) + 1)))
    parts = [data[order[a:b]] for a, b in zip([0, *cut], [*cut, len(data)])]
    merged = GroupMoments(NAMES)
    for part in reversed(parts):
        merged.merge(GroupMoments(NAMES).update(part))
    assert merged.serialize() == whole
    assert GroupMoments.deserialize(whole).serialize() == whole


# -- the tests ---------------------------------------------------------------------------------------------------

def _reference(rng, windows=20, n=3000, rho=0.8, structure_only=True):
    moments = [GroupMoments(NAMES).update(_correlated(rng, n, rho)) for _ in range(windows)]
    return build_group_reference("g", moments, 5, structure_only)


def test_the_covariance_is_the_exact_ratio_rounded_once():
    """mean() and covariance() round each exact ratio once (int / int, no gcd): the float of the Fraction, on
    values whose sums need hundreds of bits (a float division of the rounded integers would differ)."""
    rng = np.random.default_rng(8)
    rows = rng.lognormal(0, 30, size=(300, 3)) * rng.choice([-1, 1], size=(300, 3))
    m = GroupMoments(NAMES).update(rows)
    scale = (m.n * (m.n - 1)) << (2 * SCALE)
    for t, (i, j) in enumerate(zip(*np.triu_indices(3))):
        exact = m.n * (m.products[t] << SCALE) - m.sums[i] * m.sums[j]
        assert m.covariance()[i, j] == float(Fraction(exact, scale))
    assert m.mean().tolist() == [float(Fraction(s, m.n << SCALE)) for s in m.sums]


@pytest.mark.parametrize("structure_only", [True, False])
def test_scores_from_the_kept_reference_parts_are_the_scores_computed_afresh(structure_only):
    """A reference's mean, covariance and subspaces are computed once (GroupReference.parts) and kept for every
    window: the scores are those computed from the moments afresh, window after window, also when the reference
    has a constant feature (left out of the subspace) and windows change between kinds."""
    rng = np.random.default_rng(9)

    def window(rho, n=2000):
        rows = _correlated(rng, n, rho)
        return GroupMoments(NAMES + ("k",)).update(np.c_[rows, np.full(n, 3.0)])
    ref = build_group_reference("g", [window(0.8) for _ in range(8)], 3, structure_only=structure_only)
    windows = [window(rho, int(n)) for rho, n in zip([0.8, -0.8, 0.0, 0.8, 0.5], rng.integers(500, 4000, size=5))]
    windows.append(GroupMoments(NAMES + ("k",)).update(_correlated(rng, 1, 0.8) @ np.eye(3, 4)))  # n = 1: none live
    for w in windows:
        kept = group_scores(w, ref.moments, structure_only, parts=ref.parts())
        fresh = group_scores(w, ref.moments, structure_only)
        assert kept == fresh
    assert ref.parts() is ref.parts() and len(ref.parts()._subspaces) == 2


def test_a_correlation_flip_with_unchanged_marginals_is_found_with_its_pair():
    rng = np.random.default_rng(1)
    ref = _reference(rng)
    flipped = GroupMoments(NAMES).update(_correlated(rng, 3000, -0.8))
    scores = group_scores(flipped, ref.moments, True)
    assert min(group_pvalues(scores, ref)) < 1e-12
    top = scores.pairs[0]
    assert top["features"] == ["a", "b"] and top["reference"] == pytest.approx(0.8, abs=0.02)
    assert top["window"] == pytest.approx(-0.8, abs=0.03)
    assert scores.matrix["features"][:2] == ["a", "b"]


@pytest.mark.parametrize("structure_only", [True, False])
def test_drift_free_windows_stay_within_the_level(structure_only):
    """Windows of the reference's own law at other sizes: the share of p-values below 0.01 stays within
    the binomial 99.9% upper bound of 0.01 (400 windows per test)."""
    rng = np.random.default_rng(7)
    ref = _reference(rng, structure_only=structure_only)
    ps = np.array([group_pvalues(group_scores(GroupMoments(NAMES).update(_correlated(rng, int(n), 0.8)),
                                              ref.moments, structure_only), ref)
                   for n in rng.integers(1000, 6000, size=400)])
    bound = stats.binom.ppf(0.999, 400, 0.01) / 400
    assert np.all((ps < 0.01).mean(axis=0) <= bound), (ps < 0.01).mean(axis=0)


def test_a_shift_off_the_subspace_moves_the_mean_and_the_reconstruction_error():
    rng = np.random.default_rng(2)
    basis = np.linalg.qr(rng.normal(size=(6, 2)))[0]
    off = np.linalg.qr(np.c_[basis, rng.normal(size=6)])[0][:, 2]
    names = tuple("uvwxyz")

    def window(shift=0.0):
        return GroupMoments(names).update(rng.normal(size=(3000, 2)) @ basis.T + 0.01 * rng.normal(size=(3000, 6))
                                          + shift * off)
    ref = build_group_reference("e", [window() for _ in range(15)], 5, structure_only=False)
    moved = group_scores(window(0.05), ref.moments)
    p_mean, _, p_recon = group_pvalues(moved, ref)
    assert p_mean < 1e-9 and p_recon < 1e-9 and moved.variance_lost > 0


def test_judging_names_the_group_beside_the_features():
    rng = np.random.default_rng(4)
    config = ModelConfig(name="m", features={"a": "numeric", "b": "numeric", "c": "numeric"})

    def window(i, rho):
        return summarize_window("m", i * 1000, 1000, [dict(zip(NAMES, map(float, row))) for row in
                                                      _correlated(rng, 1000, rho)], config)
    reference = reference_from_summaries([window(i, 0.8) for i in range(12)], config.sketch_kinds, DriftPolicy())
    assert Reference.deserialize(reference.serialize()).groups[DEFAULT_GROUP].null_scores.shape == (12, 3)
    report = analyze_summary(window(99, -0.8), reference, DriftPolicy(alpha=1e-3))
    drifted = {f.name: f for f in report.features if f.drifted}
    assert set(drifted) == {DEFAULT_GROUP}  # no single feature moved
    group = drifted[DEFAULT_GROUP]
    assert group.kind == "group" and group.evidence["test"] == "correlation"
    assert group.evidence["pairs"][0]["features"] == ["a", "b"] and "variance_lost" in group.evidence


def test_merged_summaries_merge_their_groups():
    config = ModelConfig(name="m", features={"a": "numeric", "b": "numeric"})
    one = summarize_window("m", 0, 1000, [{"a": 1.0, "b": 2.0}, {"a": None, "b": 1.0}], config)
    two = summarize_window("m", 1000, 1000, [{"a": 3.0, "b": 5.0}], config)
    both = merge_summaries([one, two])
    assert (both.groups[DEFAULT_GROUP].n, both.groups[DEFAULT_GROUP].incomplete) == (2, 1)
    assert WindowSummary.deserialize(both.serialize()).groups == both.groups


# -- config ------------------------------------------------------------------------------------------------------

def test_default_group_needs_two_to_64_numeric_features():
    assert ModelConfig(name="m", features={"a": "numeric", "c": "categorical"}).groups == {}
    assert ModelConfig(name="m", features={"a": "numeric", "b": "numeric"}).groups == {DEFAULT_GROUP: ("a", "b")}
    many = {f"x{i}": "numeric" for i in range(65)}
    assert ModelConfig(name="m", features=many).groups == {}
    assert ModelConfig(name="m", features={"a": "numeric", "b": "numeric"}, multivariate=[]).groups == {}


@pytest.mark.parametrize("group,message", [
    ({"name": "g", "features": ["a", "c"]}, "'c', not numeric features"),
    ({"name": "g", "features": ["a", "zz"]}, "'zz', not numeric features"),
    ({"name": "a", "features": ["a", "b"]}, "already a feature's"),
    ({"name": "g", "features": ["a", "a"]}, "repeated: 'a'"),
])
def test_a_bad_group_is_refused_naming_what_is_wrong(group, message):
    with pytest.raises(ValidationError, match=message):
        ModelConfig(name="m", features={"a": "numeric", "b": "numeric", "c": "categorical"}, multivariate=[group])


# -- vector features -----------------------------------------------------------------------------------------------

VECTOR = MonitorConfig.model_validate({"models": [{"name": "e", "features": {"emb": {"vector": 8, "projections": 4},
                                                                              "x": "numeric"}}]})


def _event(value) -> bytes:
    return orjson.dumps({"event_time": 1_767_225_600_000, "model": "e", "features": {"emb": value, "x": 1.5}})


def test_a_vector_is_projected_exactly_and_the_same_everywhere():
    rng = np.random.default_rng(0)
    x = rng.normal(size=8)
    y = project(x.tolist(), 8, 4)
    fixed = np.rint(np.ldexp(x, 20))
    np.testing.assert_allclose(y, projection_matrix(8, 4) @ fixed / math.ldexp(math.sqrt(8), 20), rtol=0, atol=0)
    np.testing.assert_allclose(y, projection_matrix(8, 4) @ x / math.sqrt(8), atol=1e-6)
    assert set(np.unique(projection_matrix(384, 16))) == {-1, 1} and projection_matrix(384, 16).sum() != 0


@pytest.mark.parametrize("value,reason", [([1.0] * 7, "bad_vector:wrong_length:7"), ([1.0] * 7 + ["x"], "bad_vector:not_numeric"),
                                          ([True] * 8, "bad_vector:not_numeric"), ("text", "bad_vector:not_array"),
                                          ([1e300] * 8, "bad_vector:out_of_range")])
def test_a_bad_vector_is_an_invalid_value_of_its_feature_and_the_event_is_kept(value, reason):
    kinds = VECTOR.model("e").kinds
    event = validate_event(_event(value), lambda _model: kinds)
    assert event.invalid["emb[0]"].reason == reason
    assert event.features["x"] == 1.5 and event.features["emb[1]"] is None
    with pytest.raises(InvalidEventError, match="type_mismatch:emb"):
        validate_event(_event(value), lambda _model: kinds, EventRules(reject_invalid=True))


def test_a_vector_summary_has_projected_histograms_and_its_group():
    kinds = VECTOR.model("e").kinds
    event = validate_event(_event([0.5] * 8), lambda _model: kinds)
    assert [n for n in event.features if n.startswith("emb")] == [f"emb[{i}]" for i in range(4)]
    bad = validate_event(_event([0.5] * 3), lambda _model: kinds)
    summary = summarize_window("e", 0, 1000, [event.features, bad.features], VECTOR.model("e"))
    assert summary.sketches["emb[2]"].count == 2 and summary.groups["emb"].n == 1
    assert VECTOR.model("e").groups == {"emb": tuple(f"emb[{i}]" for i in range(4))}


# -- end to end: reference build, replay (JSON, HTML, worker processes) ---------------------------------------------

T0 = 1_767_225_600_000
HOSTILE_GROUP = "<b>core&</b>"


def _stream(path, rng, windows, flip_from, vector_from, per_window=400, bad_every=0):
    """JSONL events, one minute a window: a, b correlated 0.8 (-0.8 from ``flip_from``), c independent, and an
    8-dim embedding near a 2-dim subspace (moved off it from ``vector_from``); every ``bad_every``-th array
    has the wrong length."""
    basis = np.linalg.qr(np.random.default_rng(5).normal(size=(8, 3)))[0]
    with open(path, "wb") as out:
        for w in range(windows):
            rho = -0.8 if w >= flip_from else 0.8
            ab = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=per_window)
            emb = rng.normal(size=(per_window, 2)) @ basis[:, :2].T + 0.02 * rng.normal(size=(per_window, 8))
            if w >= vector_from:
                emb += 0.2 * basis[:, 2]
            for i in range(per_window):
                vector = emb[i].tolist()
                if bad_every and i % bad_every == 0:
                    vector = vector[:5]
                event = {"event_time": T0 + w * 60_000 + i * 100, "model": "m",
                         "features": {"a": float(ab[i, 0]), "b": float(ab[i, 1]), "c": float(rng.normal()),
                                      "emb": vector}}
                out.write(orjson.dumps(event) + b"\n")
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    from typer.testing import CliRunner

    from driftwarden.cli import app

    folder = tmp_path_factory.mktemp("mv")
    config = folder / "monitor.yaml"
    config.write_text("window: {size: 60s}\nmodels:\n  - name: m\n    features: {a: numeric, b: numeric, c: numeric, "
                      "emb: {vector: 8, projections: 6}}\n    multivariate:\n"
                      f"      - {{name: '{HOSTILE_GROUP}', features: [a, b, c]}}\n")
    rng = np.random.default_rng(11)
    reference_events = _stream(folder / "ref.jsonl", rng, 12, 99, 99, bad_every=50)  # as many bad arrays: no drift
    stream = _stream(folder / "stream.jsonl", rng, 6, 3, 4, bad_every=50)
    runner = CliRunner()
    built = runner.invoke(app, ["reference", "build", "-i", str(reference_events), "-o", str(folder / "ref.dwref"),
                                "-c", str(config)])
    assert built.exit_code == 0, built.output
    docs = []
    for workers in ("0", "2"):
        out = folder / f"r{workers}.json"
        result = runner.invoke(app, ["replay", "--no-progress", "--input", str(stream), "--config", str(config),
                                     "--reference", str(folder / "ref.dwref"), "--report-json", str(out),
                                     "--report-html", str(folder / f"r{workers}.html"), "--workers", workers])
        assert result.exit_code == 0, result.output
        docs.append(orjson.loads(out.read_bytes()))
    return docs, [(folder / f"r{w}.html").read_text() for w in ("0", "2")]


def _entries(doc, name):
    return [next(f for f in w["features"] if f["name"] == name) for w in doc["windows"]]


def test_replay_finds_the_flip_in_the_group_alone_and_the_vector_off_its_subspace(replayed):
    from driftwarden.replay.report import validate_report

    (doc, _), _ = replayed
    validate_report(doc)
    group = _entries(doc, HOSTILE_GROUP)
    assert [g["drifted"] for g in group] == [False] * 3 + [True] * 3
    assert all(g["kind"] == "group" for g in group)
    assert group[3]["evidence"]["pairs"][0]["features"] == ["a", "b"]
    assert group[3]["evidence"]["pairs"][0]["delta"] == pytest.approx(-1.6, abs=0.15)
    assert not any(f["drifted"] for w in doc["windows"] for f in w["features"] if f["name"] in ("a", "b", "c"))
    vector = _entries(doc, "emb")
    assert [v["drifted"] for v in vector] == [False] * 4 + [True] * 2 and vector[4]["kind"] == "group"
    early = [(i, f["name"]) for i, w in enumerate(doc["windows"][:3]) for f in w["features"] if f["drifted"]]
    assert early == []  # no false alarm before


def test_replay_counts_bad_arrays_as_invalid_values_of_the_vector(replayed):
    (doc, _), _ = replayed
    first = _entries(doc, "emb[0]")
    assert [e["invalid"] for e in first] == [8] * 6  # every 50th of 400 events
    assert first[0]["invalid_examples"][0]["reason"] == "bad_vector:wrong_length:5"
    assert [e["missing"] for e in _entries(doc, "emb")] == [8] * 6  # incomplete rows of the vector's group


def test_worker_processes_give_the_same_report_and_the_page_escapes_the_group(replayed):
    (one, two), (page, _) = replayed
    strip = lambda d: {k: v for k, v in d.items() if k != "generated_at"}  # noqa: E731
    assert strip(one) == strip(two)
    assert HOSTILE_GROUP not in page and "&lt;b&gt;core&amp;&lt;/b&gt;" in page
    assert "share of variance the reference" in page and "a / b" in page


def test_moments_frames_cut_short_or_out_of_range_are_refused_with_their_reason():
    """The sums are read in one loop over the frame's bytes (a segmented window has a frame per segment): exact
    integers of any sign and size back, and a frame cut inside an integer or with one out of range refused."""
    from driftwarden.core.errors import SerializationError
    from driftwarden.sketches.moments import KIND_GROUP_MOMENTS
    from driftwarden.sketches.serialization import Writer

    rows = np.array([[1.5, -2.0, 0.0], [4.0, -5.0, -6.25], [2.0 ** 60, -(2.0 ** -40), 6.25]])
    moments = GroupMoments(NAMES).update(rows)
    back = GroupMoments.deserialize(moments.serialize())
    assert (back.sums, back.products, back.n) == (moments.sums, moments.products, 3)
    assert 0 in back.sums and any(v < 0 for v in back.sums) and max(abs(v) for v in back.products) > 2 ** 200
    whole = moments.serialize()
    for cut in (1, 4, 6, 9):  # inside the last integer's bytes, its length, its shift
        with pytest.raises(SerializationError, match="truncated sketch bytes"):
            GroupMoments.deserialize(whole[:-cut])

    def frame(zeros: int, data: bytes) -> bytes:
        w = Writer(KIND_GROUP_MOMENTS).pack("I", 1).text("x").pack("qqI", 1, 0, 2)
        return w.pack("I", 0).blob(b"").pack("I", zeros).blob(data).getvalue()

    assert GroupMoments.deserialize(frame(3, b"\xff")).products == [-8]
    with pytest.raises(SerializationError, match="an integer of 1 bytes shifted by 5000"):
        GroupMoments.deserialize(frame(5000, b"\x01"))
    with pytest.raises(SerializationError, match="an integer of 600 bytes"):
        GroupMoments.deserialize(frame(0, b"\x01" * 600))
    with pytest.raises(SerializationError, match="trailing"):
        GroupMoments.deserialize(frame(0, b"\x01") + b"\x00")
