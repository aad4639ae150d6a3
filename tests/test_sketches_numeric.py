"""NumericSketch: exact counts and moments, and quantiles/CDF within the stated rank error."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.core.errors import SketchError
from driftwarden.sketches import NumericSketch

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def exact_cdf(values: np.ndarray, xs: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(values), xs, side="right") / values.size


def test_counts_every_kind_of_value_separately() -> None:
    sk = NumericSketch().update(np.array([1.0, np.nan, np.inf, -np.inf, 2.0]))
    sk.update([None, 3.0, None]).update(pa.array([4.0, None, float("nan")])).update_nulls(5)
    assert (sk.n, sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf) == (4, 8, 2, 1, 1)
    assert sk.count == 16 and sk.missing == 12
    assert (sk.min, sk.max, sk.sum, sk.sum_sq) == (1.0, 4.0, 10.0, 30.0)


def test_accepts_integer_arrays_and_chunked_arrow() -> None:
    sk = NumericSketch().update(np.arange(10)).update(pa.chunked_array([[1, None], [2]]))
    assert (sk.n, sk.nulls) == (12, 1)


def test_moments_match_numpy_even_far_from_zero() -> None:
    x = np.random.default_rng(1).normal(1e9, 1.0, size=100_000)
    sk = NumericSketch()
    for part in np.array_split(x, 7):
        sk.update(part)
    assert sk.mean == pytest.approx(np.mean(x), rel=1e-12)
    assert sk.std == pytest.approx(np.std(x), rel=1e-6)


@pytest.mark.parametrize("kind", ["kll", "tdigest"])
def test_quantiles_and_cdf_within_rank_error(kind: str) -> None:
    x = np.random.default_rng(2).lognormal(size=300_000)
    sk = NumericSketch(kind=kind).update(x)
    qs = np.linspace(0.0, 1.0, 201)
    ranks = exact_cdf(x, sk.quantiles(qs))
    assert sk.rank_error > 0
    assert np.max(np.abs(ranks - qs)) <= sk.rank_error + 1.0 / x.size
    xs = np.quantile(x, qs)
    assert np.max(np.abs(sk.cdf(xs) - exact_cdf(x, xs))) <= sk.rank_error


def test_small_sketch_is_exact_and_says_so() -> None:
    x = np.random.default_rng(3).normal(size=150)
    sk = NumericSketch().update(x)
    assert sk.rank_error == 0.0
    np.testing.assert_array_equal(sk.cdf(x), exact_cdf(x, x))


def test_empty_all_null_all_nan_give_nan_queries() -> None:
    for values in ([], [None, None], [np.nan, np.nan]):
        sk = NumericSketch().update(values)
        assert sk.n == 0 and np.isnan(sk.mean) and np.isnan(sk.std) and np.isnan(sk.min)
        assert np.isnan(sk.quantiles([0.5])).all() and np.isnan(sk.cdf([0.0])).all()
    assert NumericSketch().is_empty and not NumericSketch().update([None]).is_empty


def test_huge_values_are_kept_and_infinities_counted() -> None:
    sk = NumericSketch().update(np.array([1e300, -1e300, 1e300, np.inf]))
    assert (sk.max, sk.min, sk.pos_inf) == (1e300, -1e300, 1)
    assert sk.quantiles([1.0])[0] == 1e300
    assert sk.cdf([np.inf, -np.inf, 0.0]).tolist() == [1.0, 0.0, 1 / 3]
    assert sk.std == np.inf  # squares overflow float64: documented


def test_sum_overflow_of_finite_values_is_not_mistaken_for_infinity() -> None:
    sk = NumericSketch().update(np.array([1e308, 1e308, 1e308]))
    assert (sk.n, sk.pos_inf, sk.nans, sk.sum, sk.mean) == (3, 0, 0, np.inf, 1e308)


def test_cdf_handles_unsorted_repeated_points() -> None:
    sk = NumericSketch().update([1.0, 2.0, 3.0, 4.0])
    assert sk.cdf([3.0, 1.0, 3.0, np.nan])[:3].tolist() == [0.75, 0.25, 0.75]
    assert np.isnan(sk.cdf([np.nan])[0])


@pytest.mark.parametrize("values", [["a", 1.0], np.array([1.0, "x", None], dtype=object),
                                    pa.array(["a", "b"])])
def test_strings_in_a_numeric_feature_raise_naming_the_feature(values) -> None:
    with pytest.raises(SketchError, match="'price'"):
        NumericSketch(name="price").update(values)


def test_bad_options_name_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="kll"):
        NumericSketch(kind="hll")
    with pytest.raises(SketchError):
        NumericSketch(k=200).merge(NumericSketch(k=100))
    with pytest.raises(SketchError):
        NumericSketch().merge(NumericSketch(kind="tdigest"))


def _sketch(values: list[float]) -> NumericSketch:
    return NumericSketch(k=64).update(np.array(values, dtype=np.float64))


def _same(a: NumericSketch, b: NumericSketch, bound: float) -> None:
    assert (a.n, a.count, a.min, a.max) == (b.n, b.count, b.min, b.max)
    assert a.sum == pytest.approx(b.sum, rel=1e-9, abs=1e-6)
    qs = np.linspace(0, 1, 11)
    if a.n:
        pts = np.concatenate([a.quantiles(qs), b.quantiles(qs)])
        assert np.max(np.abs(a.cdf(pts) - b.cdf(pts))) <= bound


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, max_size=400), st.lists(finite, max_size=400), st.lists(finite, max_size=400))
def test_merge_commutative_associative_and_like_one_sketch(x: list, y: list, z: list) -> None:
    whole = _sketch(x + y + z)
    left = _sketch(x).merge(_sketch(y)).merge(_sketch(z))
    right = _sketch(x).merge(_sketch(y).merge(_sketch(z)))
    swapped = _sketch(z).merge(_sketch(y)).merge(_sketch(x))
    bound = 2 * max(whole.rank_error, 0.05)
    for merged in (left, right, swapped):
        _same(merged, whole, bound)


@pytest.mark.parametrize("kind", ["kll", "tdigest"])
def test_support_is_kept_only_until_the_sketch_changes(kind: str) -> None:
    """support() is cached (a reference is gated against every window) but follows update and merge."""
    sketch = NumericSketch(k=50, kind=kind).update([1.0, 2.0])
    first = sketch.support()
    assert sketch.support() is first and not first.flags.writeable
    assert sketch.support().max() == 2.0
    sketch.update([7.0])
    assert sketch.support().max() == 7.0
    sketch.merge(NumericSketch(k=50, kind=kind).update([-3.0]))
    assert sketch.support().min() == -3.0


def test_histogram_curve_and_quantiles_follow_update_merge_and_coarsening() -> None:
    """The histogram keeps its CDF curve and std (a reference answers the same gate queries for every
    window) and drops them on any change: update, merge, coarsening; its quantiles follow too."""
    from driftwarden.sketches.histogram import HistogramSketch

    rng = np.random.default_rng(5)
    x = rng.normal(size=3000)
    sketch = HistogramSketch(max_buckets=4096).update(x)  # every value its own bucket, 1/3000 of the values
    xs = np.sort(x)
    assert sketch.rank_error == 1 / 3000
    assert np.max(np.abs(sketch.cdf(xs) - exact_cdf(x, xs))) <= sketch.rank_error + 1e-12
    grid = (np.arange(512) + 0.5) / 512
    first = sketch.quantiles(grid)
    first[:] = 0.0  # the caller's array: changing it changes no later answer
    assert np.array_equal(sketch.quantiles(grid), HistogramSketch(max_buckets=4096).update(x).quantiles(grid))
    std = sketch.std
    at_support = sketch.cdf(sketch.support())  # remembered: the gate asks a reference this for every window
    assert np.array_equal(at_support, np.interp(sketch.support(), *sketch._cdf_curve()[:2]))
    sketch.update(x + 10.0)
    assert sketch.cdf(sketch.support())[sketch.support() < 5.0].max() == 0.5  # not the remembered answer
    both = np.concatenate([x, x + 10.0])
    assert sketch.quantiles([0.99])[0] > 10.0 and sketch.std == pytest.approx(np.std(both), rel=1e-4) != std
    assert sketch.cdf([5.0])[0] == 0.5
    assert sketch.quantiles([0.0])[0] == x.min() and sketch.cdf([-50.0])[0] == 0.0
    sketch.merge(HistogramSketch(max_buckets=4096).update([-100.0]))  # no coarsening: the plain change
    assert sketch.quantiles([0.0])[0] == -100.0 and sketch.cdf([-50.0])[0] == pytest.approx(1 / 6001)
    small = HistogramSketch(max_buckets=32).update(x[:10])
    before = small.quantiles(grid)
    small.update(rng.normal(size=3000) * 1e6)  # coarsens: 32 buckets cannot keep every value
    assert small.shift > 0 and not np.array_equal(small.quantiles(grid), before)


def one_step_at_a_time(values: np.ndarray, max_buckets: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The histogram's definition (sketches/FORMAT.md): the base keys of the finite values, shifted one
    bit at a time while more than ``max_buckets`` distinct keys remain; the shift, keys and counts."""
    from driftwarden.sketches.histogram import DEFAULT_PRECISION, bucket_keys

    keys, shift = bucket_keys(values[np.isfinite(values)], DEFAULT_PRECISION), 0
    while np.unique(keys >> shift).size > max_buckets:
        shift += 1
    unique, counts = np.unique(keys >> shift, return_counts=True)
    return shift, unique, counts


TRICKY = {
    "normal, 5 decimals": lambda rng: rng.normal(size=20_000).round(5),
    "both signs and zeros": lambda rng: np.concatenate([rng.normal(size=5_000), [0.0, -0.0] * 50]),
    "huge and tiny": lambda rng: rng.choice([-1.0, 1.0], 8_000) * 10.0 ** rng.uniform(-300, 300, 8_000),
    "subnormals": lambda rng: rng.uniform(-1, 1, 3_000) * 5e-324 * 1e3,
    "integers": lambda rng: rng.integers(-50, 50, 10_000).astype(float),
    "one value far out": lambda rng: np.concatenate([rng.normal(size=4_000), [1e300, -1e300, np.inf, np.nan]]),
}


@pytest.mark.parametrize("max_buckets", [16, 100, 1024])
@pytest.mark.parametrize("data", sorted(TRICKY))
def test_histogram_coarsens_to_the_shift_of_stepping_one_bit_at_a_time(data: str, max_buckets: int) -> None:
    """The shift found in one pass (``steps_to_fit``) is the definition's, through update and merge in any split."""
    from driftwarden.sketches.histogram import HistogramSketch

    rng = np.random.default_rng(11)
    values = TRICKY[data](rng)
    shift, keys, counts = one_step_at_a_time(values, max_buckets)
    whole = HistogramSketch(max_buckets=max_buckets).update(values)
    parts = [HistogramSketch(max_buckets=max_buckets).update(part) for part in np.array_split(rng.permutation(values), 7)]
    merged = parts[3]
    for part in parts[:3] + parts[4:]:
        merged.merge(part)
    for sketch in (whole, merged):
        assert (sketch.shift, sketch._keys.tolist(), sketch._counts.tolist()) == (shift, keys.tolist(), counts.tolist())


def test_highest_bit_is_exact_for_every_width() -> None:
    """Every 2^k - 1 and 2^k (where a float rounds up) and random 64-bit words, against Python's bit_length."""
    from driftwarden.sketches.histogram import highest_bit

    words = [2**k - 1 for k in range(1, 65)] + [2**k for k in range(64)]
    words += np.random.default_rng(3).integers(1, 2**63, 1_000, dtype=np.uint64).tolist()
    assert highest_bit(np.array(words, dtype=np.uint64)).tolist() == [w.bit_length() - 1 for w in words]
