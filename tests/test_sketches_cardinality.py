"""High-cardinality categorical features: Bloom membership, unseen share, head shifts (issue 20).

The stream: a merchant id drawn from a Zipf-like law over 100,000 ids, 3,000 events per window.
The reference is built as ``driftwarden reference build`` builds it (raw events cut into windows);
windows are summarized by ``pipeline.summary.summarize_window`` (WindowRows, the real path) and
judged by ``analyze_summary`` under the production defaults.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.core.errors import SerializationError
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.reference_build import build_reference_set
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.replay.synthetic import zipf_ids
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import Event
from driftwarden.sketches import SCORE_NAMES, CategoricalSketch, Reference
from driftwarden.sketches.categorical import UNCAPPED
from driftwarden.sketches.hashing import value_hash, value_hashes
from driftwarden.sketches.profile import CategoricalProfile, bloom_size, merged_profile, window_profiles

PER_WINDOW, WINDOW_MS, REF_WINDOWS = 3000, 60_000, 24
CONFIG = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"merchant": "categorical"}}]})
POLICY = drift_policy(CONFIG.thresholds)


def summary(values: list[str], index: int):
    """The window summary of one window of merchant ids (WindowRows, as replay builds it)."""
    return summarize_window("m", index * WINDOW_MS, WINDOW_MS, [{"merchant": v} for v in values], CONFIG.model("m"))


def judge(values: list[str], index: int, reference: Reference):
    """The merchant feature's outcome for one window."""
    return analyze_summary(summary(values, index), reference, POLICY).features[0]


@pytest.fixture(scope="module")
def reference() -> Reference:
    """A reference built from 24 windows of raw events, as `driftwarden reference build` does."""
    rng = np.random.default_rng(20)
    events = [Event("m", w * WINDOW_MS + i, {"merchant": v})
              for w in range(REF_WINDOWS) for i, v in enumerate(zipf_ids(rng, PER_WINDOW))]
    return build_reference_set(events, CONFIG, POLICY).models["m"]


def test_value_hashes_match_the_scalar_hash() -> None:
    values = ["", "a", "héllo", "x" * 100, "ab\x00", "\x00", "m123"] + [f"id{i}" for i in range(500)]
    assert [int(h) for h in value_hashes(values)] == [value_hash(v) for v in values]


@pytest.mark.parametrize("spread", [False, True])
def test_value_hashes_of_many_blocks_match_the_scalar_hash(spread: bool) -> None:
    """Over several hashing blocks: ids of near-equal lengths (hashed side by side, the shorter ones
    set aside as they end) among short odd values, or lengths far apart; sliced Arrow arrays."""
    import pyarrow as pa

    rng = np.random.default_rng(int(spread))
    alphabet = np.array(list("ab0é中\x00"))
    odd = ["".join(rng.choice(alphabet, size=rng.integers(0, 60 if spread else 4))) for _ in range(5_000)]
    values = zipf_ids(rng, 70_000, ids=1_000_000, exponent=0.5)
    for i, v in zip(rng.integers(0, len(values), len(odd)), odd):
        values[i] = v
    expected = [value_hash(v) for v in values]
    for column, first in ((pa.array(values), 0), (pa.array(values).slice(33_001), 33_001),
                          (pa.array(values, pa.large_string()).slice(5, 40_000), 5)):
        assert value_hashes(column).tolist() == expected[first:first + len(column)]


def test_bloom_filter_false_positive_rate_and_memory() -> None:
    values = [f"seen{i}" for i in range(100_000)]
    bits, probes = bloom_size(len(values), 0.01)
    profile = CategoricalProfile(bits, probes).add_counts(dict.fromkeys(values, 1))
    assert profile.contains(values).all()  # no false negatives
    fp = int(profile.contains([f"other{i}" for i in range(100_000)]).sum())
    low, high = stats.binomtest(fp, 100_000).proportion_ci(0.999)
    assert low <= 0.01 <= high * 1.1, (fp, low, high)
    assert profile.nbytes == pytest.approx(100_000 * 9.585 / 8, rel=0.01) and probes == 7


def test_window_profiles_merge_to_the_profile_of_all_windows() -> None:
    rng = np.random.default_rng(1)
    windows = [dict.fromkeys(zipf_ids(rng, 500), 1) for _ in range(4)]
    parts = window_profiles(windows)
    together: dict[str, int] = {}
    for counts in windows:
        for v, c in counts.items():
            together[v] = together.get(v, 0) + c
    whole = CategoricalProfile(parts[0].bits, parts[0].probes, parts[0].head).add_counts(together)
    assert merged_profile(parts).serialize() == whole.serialize()


def test_reference_file_round_trip_keeps_the_profile(reference: Reference) -> None:
    ref = reference.features["merchant"]
    assert ref.profile is not None and ref.profile.limit == UNCAPPED and len(ref.profile.head) == 20
    back = Reference.deserialize(reference.serialize()).features["merchant"].profile
    assert back.serialize() == ref.profile.serialize()
    data = ref.profile.serialize()
    wrong_bits = data[:6] + (ref.profile.bits + 64).to_bytes(8, "little") + data[14:]
    with pytest.raises(SerializationError, match="corrupt categorical profile"):
        CategoricalProfile.deserialize(wrong_bits)


def test_low_cardinality_reference_has_no_profile() -> None:
    events = [Event("m", w * WINDOW_MS + i, {"merchant": "abc"[i % 3]}) for w in range(6) for i in range(300)]
    ref = build_reference_set(events, CONFIG, POLICY).models["m"].features["merchant"]
    assert ref.profile is None and ref.sketch.is_exact


def test_new_ids_caught_in_their_first_window(reference: Reference) -> None:
    """5% of traffic moves to 2,000 ids the reference never saw: caught from the first window on."""
    rng = np.random.default_rng(21)
    outcomes = [judge(zipf_ids(rng, PER_WINDOW, new_share=0.05), 100 + w, reference) for w in range(10)]
    threshold = reference.features["merchant"].thresholds.new_share
    assert outcomes[0].alarm and outcomes[0].drifted and outcomes[0].gate_new_share > threshold
    assert sum(o.drifted for o in outcomes) >= 8, [round(o.gate_new_share, 4) for o in outcomes]


def test_share_shift_among_the_top_20_is_caught(reference: Reference) -> None:
    rng = np.random.default_rng(22)
    outcomes = [judge(zipf_ids(rng, PER_WINDOW, reverse_head=20), 200 + w, reference) for w in range(5)]
    chi2 = reference.features["merchant"].thresholds.chi2
    assert all(o.drifted and o.gate_chi2 > chi2 for o in outcomes), [o.gate_chi2 for o in outcomes]


def test_drift_free_stream_stays_within_the_false_alarm_budget(reference: Reference) -> None:
    """Every window sees tail ids the reference never saw; the calibrated gate absorbs it.

    60 windows at a 1% budget: P(4 or more drifted | rate 1%) = 0.3%.
    """
    rng = np.random.default_rng(23)
    outcomes = [judge(zipf_ids(rng, PER_WINDOW), 300 + w, reference) for w in range(60)]
    drifted = sum(o.drifted for o in outcomes)
    assert drifted <= 3, drifted
    assert min(o.gate_new_share for o in outcomes) > 0.1  # the long tail: unseen values in every window
    assert sum(o.gate_chi2 > reference.features["merchant"].thresholds.chi2 for o in outcomes) <= 3  # tail churn


def test_reference_from_stored_summaries_knows_only_the_kept_values() -> None:
    """Warmup/rolling references: membership is the union of kept values, judged below the smallest cap."""
    rng = np.random.default_rng(24)
    summaries = [summary(zipf_ids(rng, PER_WINDOW), w) for w in range(REF_WINDOWS)]
    ref = reference_from_summaries(summaries, {"merchant": "categorical"}, POLICY)
    profile = ref.features["merchant"].profile
    assert profile.limit == min(s.sketches["merchant"].threshold for s in summaries) < UNCAPPED
    outcomes = [judge(zipf_ids(rng, PER_WINDOW, new_share=0.05), 100 + w, ref) for w in range(10)]
    # less power than a reference built from raw events (measured: 8 of 10 here, 9 of 10 there)
    assert outcomes[0].drifted and sum(o.drifted for o in outcomes) >= 5, [o.drifted for o in outcomes]


def test_unseen_share_is_read_from_the_window_sketch_alone() -> None:
    profile = CategoricalProfile(*bloom_size(3), head=["a"]).add_counts({"a": 5, "b": 1, "c": 1})
    window = CategoricalSketch().update(["a", "a", "b", "new", "new2"])
    assert profile.unseen_share(window) == pytest.approx(0.4)
    r, w = profile.head_probs(window)
    assert r.tolist() == pytest.approx([5 / 7, 2 / 7]) and w.tolist() == pytest.approx([0.4, 0.6])


@pytest.mark.parametrize("ids", [5, 900, 1500, 100_000, 1_000_000])
def test_arrow_fast_path_gives_the_same_bytes_as_counting_every_value(ids: int) -> None:
    import pyarrow as pa

    values = zipf_ids(np.random.default_rng(ids), 20_000, ids=ids, exponent=0.5)
    values[3] = None
    column = pa.array(values)
    plain = CategoricalSketch().update(values).serialize()
    assert CategoricalSketch()._update_arrow(column).serialize() == plain
    assert CategoricalSketch().update(column).serialize() == plain
    assert CategoricalSketch().update(pa.chunked_array([column.slice(0, 9), column.slice(9)])).serialize() == plain
    halves = CategoricalSketch().update(column.slice(0, 7000)).merge(CategoricalSketch().update(column.slice(7000)))
    assert halves.serialize() == plain


@pytest.mark.parametrize("ids", [3000, 1_000_000])
def test_arrow_fast_path_on_large_batches_gives_the_same_bytes(ids: int) -> None:
    """Batches large enough for the sampled bound; a second batch into an already capped sketch."""
    import pyarrow as pa

    rng = np.random.default_rng(ids)
    first, second = (zipf_ids(rng, 120_000, ids=ids, exponent=0.5) for _ in range(2))
    plain = CategoricalSketch().update(first)
    fast = CategoricalSketch().update(pa.array(first))
    assert fast.serialize() == plain.serialize() and not plain.is_exact
    assert fast.update(pa.array(second)).serialize() == plain.update(second).serialize()


def _written_as(reference: Reference, kind: int) -> bytes:
    """``reference`` as a build before window stats (kind 10) or before profiles too (kind 5) wrote it."""
    from driftwarden.sketches.serialization import Writer

    w = Writer(kind).pack("I", len(reference.features))
    for ref in reference.features.values():
        w.text(ref.name).text(ref.kind).blob(ref.sketch.serialize()).blob(ref.sample.serialize())
        w.pack(f"{len(SCORE_NAMES)}d", *ref.thresholds.as_array()).text(ref.thresholds.source).array(ref.null_scores)
        if kind == 10:
            w.blob(ref.profile.serialize() if ref.profile is not None else b"")
    return w.getvalue()


def test_reference_written_before_profiles_still_reads() -> None:
    """A kind-5 reference (no profile field) reads with no profile, a kind-10 one (no window stats) with its
    profile and no window stats (so no dispersion); an unknown kind is named."""
    events = [Event("m", w * WINDOW_MS + i, {"merchant": "abc"[i % 3]}) for w in range(6) for i in range(300)]
    reference = build_reference_set(events, CONFIG, POLICY).models["m"]
    assert reference.features["merchant"].window_stats.shape == (6, 4)
    old = Reference.deserialize(_written_as(reference, 5)).features["merchant"]
    assert old.profile is None and old.window_stats.size == 0
    before_stats = Reference.deserialize(_written_as(reference, 10)).features["merchant"]
    assert before_stats.window_stats.size == 0 and before_stats.dispersion().chi2 == 0.0
    assert np.array_equal(before_stats.null_scores, reference.features["merchant"].null_scores, equal_nan=True)
    data = reference.serialize()
    with pytest.raises(SerializationError, match="unexpected sketch kind byte 99"):
        Reference.deserialize(data[:5] + bytes([99]) + data[6:])


def _unseen_pvalues(reference: Reference, new_share: float, seed: int, windows: int) -> np.ndarray:
    """The deep unseen test's raw p-value per window (every window, gate or not)."""
    from driftwarden.sketches.deep import unseen_estimate, unseen_pvalue
    from driftwarden.sketches.reference import baseline_unseen_share, unseen_null

    ref, rng = reference.features["merchant"], np.random.default_rng(seed)
    out = []
    for w in range(windows):
        sketch, sample = summary(zipf_ids(rng, PER_WINDOW, new_share=new_share), 500 + w).features["merchant"]
        out.append(unseen_pvalue(unseen_estimate(ref.profile, sketch, sample), unseen_null(ref),
                                 baseline_unseen_share(ref)))
    return np.array(out)


def test_unseen_test_is_calibrated_on_drift_free_windows_and_powerful_on_new_ids(reference: Reference) -> None:
    """Null: P(p <= 5%) and P(p <= 1%) within their binomial 99.9% bounds over 300 drift-free windows.

    Power at the budget's level (1 alert a week at 60 s windows: alpha 9.9e-5, half of it for the
    per-window tests, halved again by the Bonferroni pair unseen + head): 5% of traffic on new ids
    is caught in >= 70% of single 3,000-event windows
    (the sample-only test against the kept-values baseline it replaces: 0.32 here; this estimate
    against that baseline instead of the windows' own estimates: 0.45, red).
    """
    null = _unseen_pvalues(reference, 0.0, 31, 300)
    for level in (0.05, 0.01):
        assert (null <= level).sum() <= stats.binom.ppf(0.999, 300, level), (level, (null <= level).sum())
    assert (null <= 0.5).mean() > 0.3  # not degenerate: a test that never rejects would pass the line above
    drifted = _unseen_pvalues(reference, 0.05, 32, 60)
    assert (drifted <= 9.92e-5 / 4).mean() >= 0.7, np.sort(drifted)[:10]
