"""The gate: cheap drift scores from two sketches alone (no raw data), and the alarm rule.

Numeric features (``NumericSketch``):

* ``ks``  - Kolmogorov-Smirnov distance sup|F_ref - F_win| between the two sketches' CDFs,
  evaluated at every point where either CDF steps. ``ks_bound`` is the sum of the two sketches'
  single-sided rank errors: the exact two-sample statistic lies in ``ks +- ks_bound`` (99%).
* ``psi`` - PSI on ``bins`` bins cut at the reference's quantiles (bins (-inf, e1], ..., (e_last, inf);
  ties collapse bins, so a constant feature has two), smoothed with ``distances.PSI_EPSILON``.
  Each bin probability is off by at most the sketch's PMF error (0.0165 per sketch at k=200); the
  tests hold the estimate within :func:`psi_tolerance` of the exact PSI: ``PSI_TOLERANCE`` + 10% up
  to PSI 0.5 (where every decision threshold lies), 20% above it, where bins holding almost none of
  the window's mass amplify the PMF error (measured: 4-12% off at PSI 1.6 on a skewed window).
* ``emd`` - Wasserstein-1 distance estimated as the mean |Q_ref(u) - Q_win(u)| over ``EMD_GRID``
  mid-point ranks, divided by the reference spread (IQR, else std, else 1.0 for a constant feature).
  Tested within ``EMD_TOLERANCE`` (absolute, in spread units) + 10% of the exact value.

Categorical features (``CategoricalSketch``), over the union of categories (plus one bucket for
mass a frequent-items sketch no longer attributes): ``chi2`` (Pearson chi-square per window value,
i.e. phi^2, so one threshold fits any window size), ``js`` (Jensen-Shannon divergence, bits) and
``new_share`` (share of window values in categories the reference never saw). A reference that
saw more distinct values than a window sketch keeps carries a ``CategoricalProfile``
(``sketches/profile.py``): chi2 and JS then compare only its head (top values + "other") and
``new_share`` is read against its Bloom membership of every value it saw.

Both: ``missing_delta`` = window missing rate - reference missing rate (missing = null, NaN or
+-inf for numeric features, null for categorical ones; 0.0 when either side saw nothing at all),
so a feature that turns all-NaN or all-inf alarms through this score. Distances are None when either side has no value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from driftwarden.core.errors import SketchError
from driftwarden.sketches import distances
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.feature import FeatureSketch, is_numeric
from driftwarden.sketches.histogram import HistogramSketch, curves_at
from driftwarden.sketches.histogram_stack import StackedHistograms, stack
from driftwarden.sketches.numeric import NumericSketch
from driftwarden.sketches.profile import CategoricalProfile

#: Ranks at which the two quantile functions are compared for the EMD estimate.
EMD_GRID = 512
#: Documented absolute tolerance of the sketch PSI and EMD estimates at k=200 (see module docstring).
PSI_TOLERANCE = 0.02
EMD_TOLERANCE = 0.03


def psi_tolerance(exact_psi: float) -> float:
    """Documented error of the sketch PSI estimate around an exact PSI (see the module docstring)."""
    return PSI_TOLERANCE + 0.1 * exact_psi if exact_psi <= 0.5 else 0.2 * exact_psi

#: Score names in a fixed order (columns of a calibration's ``null_scores`` matrix).
SCORE_NAMES = ("ks", "psi", "emd", "chi2", "js", "new_share", "missing_delta")
NUMERIC_SCORES = ("ks", "psi", "emd", "missing_delta")
CATEGORICAL_SCORES = ("chi2", "js", "new_share", "missing_delta")


@dataclass(frozen=True)
class GateScores:
    """Gate scores of one window against the reference; None where a score does not apply."""

    ks: float | None = None
    ks_bound: float | None = None
    psi: float | None = None
    emd: float | None = None
    chi2: float | None = None
    js: float | None = None
    new_share: float | None = None
    missing_delta: float = 0.0

    def as_array(self) -> np.ndarray:
        """Scores in ``SCORE_NAMES`` order, NaN for None."""
        return np.array([np.nan if getattr(self, n) is None else getattr(self, n) for n in SCORE_NAMES])


@dataclass(frozen=True)
class GateThresholds:
    """Per-score alarm thresholds; ``source`` says "calibrated" or "fixed"."""

    ks: float = 0.1
    psi: float = 0.1
    emd: float = 0.1
    chi2: float = 0.05
    js: float = 0.02
    new_share: float = 0.01
    missing_delta: float = 0.05
    source: str = "fixed"

    @classmethod
    def fixed(cls) -> GateThresholds:
        """The documented fixed thresholds: KS 0.1, PSI 0.1 (the usual "minor" mark), EMD 0.1 spread,
        chi2 0.05 per value, JS 0.02 bits, new-category share 1%, missing-rate change 5 points."""
        return cls()

    def as_array(self) -> np.ndarray:
        """Thresholds in ``SCORE_NAMES`` order."""
        return np.array([getattr(self, n) for n in SCORE_NAMES], dtype=np.float64)


@dataclass(frozen=True)
class GateCell:
    """One (reference, window) pair to score (:func:`gate_scores_many`); ``name`` only names it in errors."""

    reference: FeatureSketch
    window: FeatureSketch
    profile: CategoricalProfile | None = None
    name: str | None = None


def gate_scores(reference: FeatureSketch, window: FeatureSketch, bins: int = 10,
                profile: CategoricalProfile | None = None) -> GateScores:
    """Score ``window`` against ``reference`` from the two sketches alone (and the reference's profile).

    With a categorical ``profile`` (a high-cardinality reference), chi2 and JS compare the head
    (``profile.head_probs``) and ``new_share`` is the profile's unseen share.
    """
    return gate_scores_many([GateCell(reference, window, profile)], bins)[0]


def gate_scores_many(cells: Sequence[GateCell], bins: int = 10, once: bool = False) -> list[GateScores]:
    """:func:`gate_scores` of every cell, in order (a window's features, or its features x segments).

    The cells of two histograms with values are scored together (:func:`histogram_scores`): the same
    scores as one at a time, in a fraction of the time when there are many. ``once``: each cell's reference
    is scored in this cell only (calibration's leave-one-out): what the gate derives from it is computed for
    all of them together rather than kept on each for the next window.
    """
    scores: list[GateScores | None] = [None] * len(cells)
    stacked = []
    for i, cell in enumerate(cells):
        try:
            if _both_histograms(cell.reference, cell.window):
                stacked.append(i)
            else:
                scores[i] = _cell_scores(cell, bins)
        except SketchError as exc:
            if cell.name is None:
                raise
            raise SketchError(f"feature {cell.name!r}: {exc}") from exc
    together = histogram_scores([(cells[i].reference, cells[i].window) for i in stacked], bins, once) if stacked else []
    for i, (ks, bound, psi, emd) in zip(stacked, together):
        scores[i] = GateScores(ks=ks, ks_bound=bound, psi=psi, emd=emd,
                               missing_delta=_missing_delta(cells[i].reference, cells[i].window))
    return scores


def _both_histograms(reference: FeatureSketch, window: FeatureSketch) -> bool:
    return isinstance(reference, HistogramSketch) and isinstance(window, HistogramSketch) \
        and reference.n > 0 and window.n > 0


def _cell_scores(cell: GateCell, bins: int) -> GateScores:
    """One cell's scores, by the definitions (:func:`ks_estimate`, :func:`psi_estimate`, ...)."""
    reference, window, profile = cell.reference, cell.window, cell.profile
    missing = _missing_delta(reference, window)
    if is_numeric(reference) and is_numeric(window):
        if reference.n == 0 or window.n == 0:
            return GateScores(missing_delta=missing)
        ks, bound = ks_estimate(reference, window)
        return GateScores(ks=ks, ks_bound=bound, psi=psi_estimate(reference, window, bins),
                          emd=emd_estimate(reference, window), missing_delta=missing)
    if isinstance(reference, CategoricalSketch) and isinstance(window, CategoricalSketch):
        if reference.n == 0 or window.n == 0:
            return GateScores(missing_delta=missing)
        if profile is not None:
            (r, w), new_share = profile.head_probs(window), profile.unseen_share(window)
        else:
            (r, w), new_share = category_probs(reference, window), window.new_category_share(reference)
        return GateScores(chi2=distances.chi2_per_value(r, w), js=distances.js_divergence(r, w),
                          new_share=new_share, missing_delta=missing)
    raise SketchError(f"cannot compare a {type(window).__name__} window with a "
                      f"{type(reference).__name__} reference (feature kind changed?)")


def gate_alarm(scores: GateScores, thresholds: GateThresholds) -> bool:
    """True when any score exceeds its threshold (``missing_delta`` in absolute value; None and NaN never do).

    One row of :func:`gate_alarms`."""
    return bool(gate_alarms(scores.as_array()[np.newaxis], thresholds.as_array()[np.newaxis])[0])


def gate_alarms(scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """:func:`gate_alarm` of many cells at once: ``scores`` (rows of ``GateScores.as_array``, NaN for None) and
    ``thresholds`` (rows of ``GateThresholds.as_array``), one row per cell; a boolean per cell."""
    values = scores.copy()
    values[:, _MISSING] = np.abs(values[:, _MISSING])
    with np.errstate(invalid="ignore"):
        return np.any(values > thresholds, axis=1)


_MISSING = SCORE_NAMES.index("missing_delta")


def ks_estimate(reference: NumericSketch, window: NumericSketch) -> tuple[float, float]:
    """KS distance between the sketches' CDFs, and its error band (sum of both rank errors).

    The largest CDF gap over the union of both supports (the points where either CDF's slope can
    change), taken over each support in turn: no merge of the two, and the reference's CDF at its
    own support is remembered (a reference is judged against every window).
    """
    gaps = [np.max(np.abs(reference.cdf(points) - window.cdf(points)), initial=0.0)
            for points in (reference.support(), window.support())]
    return float(max(gaps)), reference.rank_error + window.rank_error


def bin_edges(reference: NumericSketch, bins: int) -> np.ndarray:
    """Inner bin edges at the reference's quantiles 1/bins, ..., (bins-1)/bins (duplicates dropped)."""
    return np.unique(reference.quantiles(np.arange(1, bins) / bins))


def psi_estimate(reference: NumericSketch, window: NumericSketch, bins: int = 10) -> float:
    """PSI of the window on the reference-quantile bins, from the two sketches."""
    edges, ref_probs = reference.remember(("psi_bins", bins), lambda: _reference_bins(reference, bins))
    return distances.psi_smoothed(ref_probs, distances.smooth(distances.probs_from_cdf(window.cdf(edges))))


def _reference_bins(reference: NumericSketch, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The PSI bins' inner edges and the reference's smoothed probabilities on them."""
    edges = bin_edges(reference, bins)
    return edges, distances.smooth(distances.probs_from_cdf(reference.cdf(edges)))


#: Mid-point ranks of the EMD estimate.
_EMD_RANKS = (np.arange(EMD_GRID) + 0.5) / EMD_GRID
_FLOAT_MAX = np.finfo(np.float64).max


def emd_estimate(reference: NumericSketch, window: NumericSketch) -> float:
    """Wasserstein-1 distance between the sketches' quantile functions, in reference-spread units."""
    scale, ref_scaled = reference.remember("emd", lambda: _reference_quantiles(reference))
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.mean(np.abs(_finite(ref_scaled) - _finite(window.quantiles(_EMD_RANKS) / scale))))


def _finite(scaled: np.ndarray) -> np.ndarray:
    """Scaled quantiles with an overflow (a value near 1e308 over a spread below 1) held at the largest
    float: two such on one side differ by 0, not NaN; on opposite sides by infinity (the EMD's own answer)."""
    return np.clip(scaled, -_FLOAT_MAX, _FLOAT_MAX)


def _reference_quantiles(reference: NumericSketch) -> tuple[float, np.ndarray]:
    """The EMD's scale (the reference spread) and the reference's quantile function over it."""
    q25, q75 = reference.quantiles([0.25, 0.75])
    scale = distances.spread(q25, q75, reference.std)
    with np.errstate(over="ignore", invalid="ignore"):
        return scale, reference.quantiles(_EMD_RANKS) / scale


def histogram_scores(pairs: Sequence[tuple[HistogramSketch, HistogramSketch]],
                     bins: int = 10, once: bool = False) -> list[tuple[float, float, float, float]]:
    """(ks, ks_bound, psi, emd) of each (reference, window) pair of histograms with values: what
    :func:`ks_estimate`, :func:`psi_estimate` and :func:`emd_estimate` give, bit for bit, with every
    window's curve and quantiles computed at once (``sketches.histogram_stack``) and only the
    interpolations on one window's own curve made one pair at a time. Pairs are stacked
    ``STACK_SIZE`` at a time. ``once``: the references are stacked too (each serves this pair only, so what
    the gate derives from a reference is computed for all at once, not remembered on each)."""
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins}")
    return [scores for start in range(0, len(pairs), STACK_SIZE)
            for scores in _stacked_scores(pairs[start:start + STACK_SIZE], bins, once)]


#: Pairs scored in one stack: on a segmented window of 572 cells (tests/bench), 40-80 at a time took
#: 71-73 ms, all at once 94 (the stacked arrays outgrow the CPU caches), one at a time 123.
STACK_SIZE = 64


def _stacked_scores(pairs: Sequence[tuple[HistogramSketch, HistogramSketch]],
                    bins: int, once: bool = False) -> list[tuple[float, float, float, float]]:
    references = (_stacked_references if once else _remembered_references)([r for r, _ in pairs], bins)
    windows = stack([w for _, w in pairs])
    ks = _stacked_ks(references, windows)
    bound = references.rank_errors + windows.rank_errors()
    psi = _stacked_psi(references, windows)
    emd = _stacked_emd(references, windows)
    return list(zip(ks.tolist(), bound.tolist(), psi, emd.tolist()))


@dataclass(frozen=True)
class _References:
    """What the gate reads of the references of stacked pairs: each one's support (distinct knots), its CDF
    there (end to end, from ``support_starts``), its CDF curve (knots, ranks), its PSI bins (inner edges and
    smoothed probabilities), its EMD scale and scaled quantiles (one row each), its rank error."""

    supports: list[np.ndarray]
    at_supports: np.ndarray
    support_starts: np.ndarray
    curves: list[tuple[np.ndarray, np.ndarray]]
    bins: list[tuple[np.ndarray, np.ndarray]]
    emd_scales: np.ndarray
    emd_quantiles: np.ndarray
    rank_errors: np.ndarray


def _remembered_references(references: list[HistogramSketch], bins: int) -> _References:
    """Each reference's own methods, what they derive remembered on it (a reference judges window after window)."""
    parts = [r.remember(("gate", bins), lambda r=r: _reference_parts(r, bins)) for r in references]
    return _References([p.support for p in parts], np.concatenate([p.at_support for p in parts]),
                       np.cumsum([0] + [p.support.size for p in parts[:-1]]), [p.curve for p in parts],
                       [p.psi_bins for p in parts], np.array([p.emd_scale for p in parts]),
                       np.stack([p.emd_quantiles for p in parts]), np.array([p.rank_error for p in parts]))


@dataclass(frozen=True)
class _ReferenceParts:
    """What the gate reads of one reference (each part by the reference's own method)."""

    support: np.ndarray
    at_support: np.ndarray
    curve: tuple[np.ndarray, np.ndarray]
    psi_bins: tuple[np.ndarray, np.ndarray]
    emd_scale: float
    emd_quantiles: np.ndarray
    rank_error: float


def _reference_parts(reference: HistogramSketch, bins: int) -> _ReferenceParts:
    """One reference's :class:`_ReferenceParts`: its support, its CDF there, its CDF curve, its PSI bins, its EMD
    scale and scaled quantiles, its rank error."""
    support = reference.support()
    emd_scale, emd_quantiles = reference.remember("emd", lambda: _reference_quantiles(reference))
    return _ReferenceParts(support, reference.cdf(support), reference.curve(),
                           reference.remember(("psi_bins", bins), lambda: _reference_bins(reference, bins)),
                           emd_scale, emd_quantiles, reference.rank_error)


def _stacked_references(references: list[HistogramSketch], bins: int) -> _References:
    """The same as :func:`_remembered_references`, bit for bit, from the references stacked
    (``sketches.histogram_stack``): for references that each serve one pair."""
    both = stack(references)
    curves = [both.curve(i) for i in range(len(references))]
    edges = [np.unique(row) for row in both.quantiles(np.arange(1, bins) / bins)]
    sizes = np.array([e.size for e in edges])
    probs, starts = distances.probs_from_cdf_rows(curves_at([(e, *curve) for e, curve in zip(edges, curves)]), sizes)
    probs = distances.smooth(probs, np.repeat(sizes + 1, sizes + 1))
    quartiles = both.quantiles([0.25, 0.75])
    scales = np.array([_spread(q25, q75, r) for (q25, q75), r in zip(quartiles, references)])
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = both.quantiles(_EMD_RANKS) / scales[:, np.newaxis]
    return _References([both.support(i) for i in range(len(references))], both.support_ranks, both.support_rows[:-1],
                       curves, [(e, probs[a:a + e.size + 1]) for e, a in zip(edges, starts.tolist())],
                       scales, scaled, both.rank_errors())


def _spread(q25: np.float64, q75: np.float64, reference: HistogramSketch) -> float:
    """:func:`distances.spread` of a reference, its std computed only when the IQR is not its spread."""
    with np.errstate(over="ignore", invalid="ignore"):
        iqr = q75 - q25
    return float(iqr) if np.isfinite(iqr) and iqr > 0 else distances.spread(q25, q75, reference.std)


def _stacked_ks(references: _References, windows: StackedHistograms) -> np.ndarray:
    """:func:`ks_estimate` of each reference against its stacked window: the largest CDF gap at either's support."""
    win_at_ref = curves_at([(points, *windows.curve(i)) for i, points in enumerate(references.supports)])
    ref_at_win = curves_at([(windows.support(i), *curve) for i, curve in enumerate(references.curves)])
    on_ref = np.maximum.reduceat(np.abs(references.at_supports - win_at_ref), references.support_starts)
    on_win = np.maximum.reduceat(np.abs(ref_at_win - windows.support_ranks), windows.support_rows[:-1])
    return np.maximum(on_ref, on_win)


def _stacked_psi(references: _References, windows: StackedHistograms) -> list[float]:
    """:func:`psi_estimate` of each reference against its stacked window: the bins of all of them end to end."""
    bins_of = references.bins
    at_edges = curves_at([(edges, *windows.curve(i)) for i, (edges, _) in enumerate(bins_of)])
    sizes = np.array([probs.size for _, probs in bins_of])
    win_probs, starts = distances.probs_from_cdf_rows(at_edges, sizes - 1)
    terms = distances.psi_terms(np.concatenate([probs for _, probs in bins_of]),
                                distances.smooth(win_probs, np.repeat(sizes, sizes)))
    return [float(np.sum(terms[start:start + size])) for start, size in zip(starts.tolist(), sizes.tolist())]


def _stacked_emd(references: _References, windows: StackedHistograms) -> np.ndarray:
    """:func:`emd_estimate` of each reference against its stacked window."""
    scale, ref_scaled = references.emd_scales, references.emd_quantiles
    with np.errstate(over="ignore", invalid="ignore"):
        return np.mean(np.abs(_finite(ref_scaled) - _finite(windows.quantiles(_EMD_RANKS) / scale[:, np.newaxis])),
                       axis=1)


def category_probs(reference: CategoricalSketch, window: CategoricalSketch) -> tuple[np.ndarray, np.ndarray]:
    """Aligned category probabilities of both sketches, with a last bucket for unattributed mass."""
    ref, win = reference.frequencies(), window.frequencies()
    cats = sorted(set(ref) | set(win))
    r = np.array([ref.get(c, 0) for c in cats] + [0], dtype=np.float64)
    w = np.array([win.get(c, 0) for c in cats] + [0], dtype=np.float64)
    r[-1], w[-1] = max(reference.n - r.sum(), 0.0), max(window.n - w.sum(), 0.0)
    return r / r.sum(), w / w.sum()


def _missing_delta(reference: FeatureSketch, window: FeatureSketch) -> float:
    if reference.count == 0 or window.count == 0:
        return 0.0
    return window.missing / window.count - reference.missing / reference.count


def score_names(kind: str) -> tuple[str, ...]:
    """The scores that apply to a feature kind ("numeric" or "categorical")."""
    return NUMERIC_SCORES if kind == "numeric" else CATEGORICAL_SCORES


