"""CategoricalSketch: exact counts, the deterministic cap by value hash, merge and new-category share."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.core.errors import SketchError
from driftwarden.sketches import CategoricalSketch

words = st.lists(st.one_of(st.none(), st.sampled_from("abcdefghij")), max_size=200)


def test_counts_are_exact_below_max_exact() -> None:
    values = ["a", "b", None, "a", np.nan]
    sk = CategoricalSketch().update(values).update(np.array(["c", None], dtype=object)).update(pa.array(["a"]))
    assert sk.frequencies() == {"a": 3, "b": 1, "c": 1}
    assert (sk.n, sk.nulls, sk.count, sk.is_exact) == (5, 3, 8, True)


def test_past_max_exact_keeps_the_values_of_smallest_hash_with_exact_counts() -> None:
    from driftwarden.sketches.hashing import value_hash

    rng = np.random.default_rng(0)
    values = [f"rare{i}" for i in range(3000)] + ["hot"] * 5000 + list(rng.choice(["x", "y"], 2000))
    sk = CategoricalSketch(max_exact=100).update(values)
    assert not sk.is_exact and sk.n == 10_000
    truth = Counter(values)
    kept = sorted(truth, key=value_hash)[:100]
    assert sk.frequencies() == {v: truth[v] for v in kept}  # exact counts, chosen by the values alone
    assert sk.threshold == value_hash(sorted(truth, key=value_hash)[100])


def test_new_category_share() -> None:
    ref = CategoricalSketch().update(["a", "b"] * 10)
    win = CategoricalSketch().update(["a"] * 6 + ["z"] * 3 + ["y"])
    assert win.new_category_share(ref) == pytest.approx(0.4)
    assert np.isnan(CategoricalSketch().new_category_share(ref))


@pytest.mark.parametrize("values", [["a", 1.0], ["a", 3], [b"bytes"]])
def test_non_strings_raise_naming_the_feature(values) -> None:
    with pytest.raises(SketchError, match="'country'.*mixed types"):
        CategoricalSketch(name="country").update(values)


def test_arrow_columns_are_counted_without_python_loops() -> None:
    sk = CategoricalSketch().update(pa.chunked_array([["a", None], ["a", "b"], []])).update(pa.array([None, None]))
    assert sk.frequencies() == {"a": 2, "b": 1} and sk.nulls == 3
    with pytest.raises(SketchError, match="'country'.*int64"):
        CategoricalSketch(name="country").update(pa.array([1, 2]))


def test_merge_refuses_other_settings_or_kinds() -> None:
    with pytest.raises(SketchError):
        CategoricalSketch(max_exact=10).merge(CategoricalSketch(max_exact=20))
    with pytest.raises(ValueError, match="max_exact"):
        CategoricalSketch(max_exact=0)


@settings(max_examples=60, deadline=None)
@given(words, words, words, st.sampled_from([3, 1000]))
def test_merge_commutative_associative_and_byte_identical_to_one_sketch(x: list, y: list, z: list,
                                                                        max_exact: int) -> None:
    def sk(values: list) -> CategoricalSketch:
        return CategoricalSketch(max_exact=max_exact).update(values)

    whole = sk(x + y + z)
    for merged in (sk(x).merge(sk(y)).merge(sk(z)), sk(x).merge(sk(y).merge(sk(z))), sk(z).merge(sk(y)).merge(sk(x))):
        assert merged.serialize() == whole.serialize()
    if max_exact == 1000:
        assert whole.frequencies() == dict(Counter(v for v in x + y + z if v is not None))


def test_new_category_share_once_capped_is_judged_on_values_both_sides_keep() -> None:
    ref_values = [f"id{i}" for i in range(5000)]
    window = [f"id{i}" for i in range(0, 5000, 5)] * 19 + [f"new{i}" for i in range(1000)]  # 5% new
    ref, win = CategoricalSketch(max_exact=500).update(ref_values), CategoricalSketch(max_exact=500).update(window)
    assert not ref.is_exact and not win.is_exact
    assert win.new_category_share(ref) == pytest.approx(0.05, abs=0.02)
