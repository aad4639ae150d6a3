"""CategoricalSketch: exact counts, the switch to frequent items, merge and new-category share."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.errors import SketchError
from sketches import CategoricalSketch

words = st.lists(st.one_of(st.none(), st.sampled_from("abcdefghij")), max_size=200)


def test_counts_are_exact_below_max_exact() -> None:
    values = ["a", "b", None, "a", np.nan]
    sk = CategoricalSketch().update(values).update(np.array(["c", None], dtype=object)).update(pa.array(["a"]))
    assert sk.frequencies() == {"a": 3, "b": 1, "c": 1}
    assert (sk.n, sk.nulls, sk.count, sk.is_exact) == (5, 3, 8, True)


def test_switches_to_frequent_items_past_max_exact_and_keeps_heavy_hitters() -> None:
    rng = np.random.default_rng(0)
    values = [f"rare{i}" for i in range(3000)] + ["hot"] * 5000 + list(rng.choice(["x", "y"], 2000))
    sk = CategoricalSketch(max_exact=100, lg_max_map_size=8).update(values)
    assert not sk.is_exact and sk.n == 10_000
    freq = sk.frequencies()
    assert abs(freq["hot"] - 5000) <= 10_000 * 3.5 / 2 ** 8 * 0.75 + 1


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
    with pytest.raises(ValueError, match="lg_max_map_size"):
        CategoricalSketch(lg_max_map_size=2)


@settings(max_examples=40, deadline=None)
@given(words, words, words, st.sampled_from([3, 1000]))
def test_merge_commutative_associative_and_like_one_sketch(x: list, y: list, z: list, max_exact: int) -> None:
    def sk(values: list) -> CategoricalSketch:
        return CategoricalSketch(max_exact=max_exact, lg_max_map_size=6).update(values)

    whole = sk(x + y + z)
    for merged in (sk(x).merge(sk(y)).merge(sk(z)), sk(x).merge(sk(y).merge(sk(z))), sk(z).merge(sk(y)).merge(sk(x))):
        assert (merged.n, merged.nulls, merged.is_exact) == (whole.n, whole.nulls, whole.is_exact)
        assert merged.frequencies() == whole.frequencies()  # map never fills here: estimates are exact
    assert whole.frequencies() == dict(Counter(v for v in x + y + z if v is not None))
