"""Histograms stacked side by side (sketches/histogram_stack.py) and the gate that scores many cells at once
(``gate.gate_scores_many``) give what each sketch and each cell give alone, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from driftwarden.core.errors import SketchError
from driftwarden.sketches import CategoricalSketch, NumericSketch
from driftwarden.sketches.gate import STACK_SIZE, GateCell, _cell_scores, gate_scores_many
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.histogram_stack import stack
from tests.test_sketches_numeric import TRICKY

RNG = np.random.default_rng(7)
RANKS = np.concatenate([[0.0, 1.0, 0.5], (np.arange(512) + 0.5) / 512, RNG.uniform(size=50)])


def tricky_histograms() -> list[HistogramSketch]:
    """Each kind of tricky data at several bucket limits and precisions, a constant, a single value, and
    neighbours where one's largest value is the next one's smallest (a knot repeated across histograms)."""
    out = [HistogramSketch(precision=p, max_buckets=b).update(make(RNG))
           for make in TRICKY.values() for b in (16, 100, 1024) for p in (52, 7)]
    return out + [HistogramSketch().update([3.25] * 40), HistogramSketch().update([-1e-300]),
                  HistogramSketch(max_buckets=16).update([0.0, -0.0, 5.0]), HistogramSketch().update([5.0, 6.0]),
                  HistogramSketch().update([1.0, 2.0]), HistogramSketch().update([2.0, 3.0])]


def test_the_stack_gives_each_histograms_curve_support_quantiles_and_rank_error() -> None:
    sketches = tricky_histograms()
    stacked = stack(sketches)
    assert len(stacked) == len(sketches)
    for i, sketch in enumerate(sketches):
        knots, ranks, support, at_support = sketch._cdf_curve()
        assert np.array_equal(stacked.curve(i)[0], knots) and np.array_equal(stacked.curve(i)[1], ranks), i
        assert np.array_equal(stacked.support(i), support), i
        assert np.array_equal(stacked.support_ranks[stacked.support_rows[i]:stacked.support_rows[i + 1]], at_support)
    assert np.array_equal(stacked.quantiles(RANKS), np.stack([sk.quantiles(RANKS) for sk in sketches]))
    assert stacked.rank_errors().tolist() == [sk.rank_error for sk in sketches]


def test_a_histogram_without_values_cannot_be_stacked() -> None:
    with pytest.raises(SketchError, match="without finite values"):
        stack([HistogramSketch().update([1.0]), HistogramSketch().update([np.nan, None])])
    with pytest.raises(SketchError, match="at least one"):
        stack([])


def mixed_cells(count: int) -> list[GateCell]:
    """Histogram pairs of every tricky kind against each other, with categorical, KLL and empty cells among them."""
    histograms = tricky_histograms()
    cells = []
    for i in range(count):
        if i % 11 == 5:
            cells.append(GateCell(CategoricalSketch().update(list("aabbc")), CategoricalSketch().update(list("abccd"))))
        elif i % 11 == 7:
            cells.append(GateCell(NumericSketch().update(RNG.normal(size=500)),
                                  NumericSketch().update(RNG.normal(size=300))))
        elif i % 11 == 9:
            cells.append(GateCell(histograms[i % len(histograms)], HistogramSketch().update([np.nan, None])))
        else:
            reference = histograms[i % len(histograms)]
            window = HistogramSketch(reference.precision, reference.max_buckets).update(
                RNG.normal(reference.quantiles([0.5])[0], 1.0 + i % 3, size=200 + 37 * i))
            cells.append(GateCell(reference, window if i % 2 else histograms[(3 * i + 1) % len(histograms)]))
    return cells


@pytest.mark.parametrize("count", [1, 12, STACK_SIZE + 30])
def test_many_cells_score_as_each_alone(count: int) -> None:
    cells = mixed_cells(count)
    alone = [_cell_scores(cell, 10) for cell in cells]
    together = gate_scores_many(cells, 10)
    assert together == alone
    assert sum(s.ks is not None for s in together) > count // 2  # histogram pairs were stacked and scored


def test_fewer_than_two_psi_bins_is_refused() -> None:
    with pytest.raises(ValueError, match="bins must be >= 2, got 1"):
        gate_scores_many(mixed_cells(3), bins=1)


def test_a_cell_of_two_kinds_is_named_in_the_error() -> None:
    cells = mixed_cells(4) + [GateCell(HistogramSketch().update([1.0]), CategoricalSketch().update(["a"]), name="age")]
    with pytest.raises(SketchError, match="feature 'age': cannot compare a CategoricalSketch window"):
        gate_scores_many(cells)


def test_curves_end_to_end_give_each_curve_at_its_points() -> None:
    """``curves_at`` (the gate's interpolations of a stack, in one pass) is ``curve_at`` of each (points, curve),
    end to end, bit for bit: also where a bucket is too narrow for np.interp's slope (subnormal values), at NaN
    and at no points."""
    from driftwarden.sketches.histogram import curve_at, curves_at

    sketches = tricky_histograms()
    queries = [(sketches[(i + 3) % len(sketches)].support(), *sketch.curve()) for i, sketch in enumerate(sketches)]
    queries += [(np.array([np.nan, 0.5, 2e-310]), np.array([0.0, 3e-310, 1.0]), np.array([0.0, 0.5, 1.0])),
                (np.empty(0), *sketches[0].curve())]
    expected = np.concatenate([curve_at(*query) for query in queries])
    assert np.array_equal(curves_at(queries), expected, equal_nan=True)
    narrow = expected[-1]  # 2e-310 inside a bucket 3e-310 wide: np.interp alone gives inf or NaN there
    assert 0.0 < narrow < 0.5 and not np.isfinite(np.interp(2e-310, [0.0, 3e-310, 1.0], [0.0, 0.5, 1.0]))
    assert curves_at([]).size == 0


@pytest.mark.parametrize("count", [1, 12, STACK_SIZE + 30])
def test_references_stacked_once_score_as_remembered_ones(count: int) -> None:
    """``once`` (calibration: each reference serves one cell, so its curve, PSI bins and EMD quantiles are
    computed for all references stacked, not remembered on each) gives the same scores, bit for bit."""
    cells = mixed_cells(count)
    assert gate_scores_many(cells, 10, once=True) == [_cell_scores(cell, 10) for cell in cells]
    iqr_zero = [GateCell(HistogramSketch().update([9.0] * 40 + [1.0, 5.0]), HistogramSketch().update([3.0, 4.0]))]
    assert gate_scores_many(iqr_zero, 10, once=True) == [_cell_scores(iqr_zero[0], 10)]  # the std is its spread


def _state(sketch: HistogramSketch) -> tuple:
    return (sketch.serialize(), sketch.precision, sketch.max_buckets, sketch.shift, sketch._keys.dtype,
            sketch._counts.dtype)


def _merged_one_by_one(sketches: list[HistogramSketch]) -> HistogramSketch:
    merged = sketches[0].copy()
    for sketch in sketches[1:]:
        merged.merge(sketch)
    return merged


@pytest.mark.parametrize("max_buckets", [16, 100, 1024])
def test_each_histograms_others_from_the_total_are_their_merge(max_buckets: int) -> None:
    """``merges_of_others`` (calibration's leave-one-out from the total) is, for each histogram, the merge of all
    the others, and ``merged_at_once`` the merge of them all, byte for byte: windows at different resolutions (one alone at the coarsest, two at the coarsest),
    with nulls, NaN and infinities, one holding the smallest and the largest value."""
    from driftwarden.sketches.histogram import merged_at_once, merges_of_others

    rng = np.random.default_rng(5)
    windows = [HistogramSketch(max_buckets=max_buckets).update(make(rng)) for make in TRICKY.values()]
    windows += [HistogramSketch(max_buckets=max_buckets).update(rng.normal(size=300)).update([None, np.nan]),
                HistogramSketch(max_buckets=max_buckets).update([7.0, 7.0, -np.inf])]
    shifts = [w.shift for w in windows]
    assert shifts.count(max(shifts)) == 1 or max_buckets == 1024  # one alone at the coarsest, for 16 and 100
    for chosen in (windows, windows[1:], [w for w in windows if w.shift < max(shifts)] + windows[:1] * 2, windows[:2]):
        others = merges_of_others(chosen)
        assert [_state(o) for o in others] == [_state(_merged_one_by_one(chosen[:i] + chosen[i + 1:]))
                                              for i in range(len(chosen))]
        assert _state(merged_at_once(chosen)) == _state(_merged_one_by_one(chosen))
    assert merges_of_others(windows[:1]) is None and _state(merged_at_once(windows[:1])) == _state(windows[0])
    assert merged_at_once([windows[0], HistogramSketch().update([None])]) is None
    assert merges_of_others([windows[0], HistogramSketch().update([None])]) is None  # a window without values
    assert merges_of_others([windows[0], HistogramSketch(max_buckets=max_buckets + 1).update([1.0])]) is None
