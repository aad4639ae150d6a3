"""Multivariate tests of a group of features, from its window moments against the reference's.

Three statistics, each computed from :class:`sketches.moments.GroupMoments` alone (no raw rows):

* ``mean_shift``: Hotelling-like ``n_eff · Δμᵀ Σ_ref⁻¹ Δμ`` (Σ_ref's eigenvalues floored at 1e-6 of
  their mean): a move of the group's mean, also along a direction the reference hardly varies in.
* ``correlation``: ``n_eff · Σ_{i<j} (r_window - r_ref)²``, the squared Frobenius distance between
  the correlation matrices: a correlation that flips while every marginal stays put.
* ``reconstruction``: ``√n_eff · log(RE_window / RE_ref)``, where RE is the mean squared error of
  reconstructing the reference-standardized values from the reference's principal components that
  keep ``VARIANCE_KEPT`` of its variance (NannyML's PCA reconstruction error, here from the
  moments): values leaving the reference's subspace (up) or a spread that shrinks (down).

A group of features (configured, or the default one) is tested on its structure only, what no
single feature's test sees: the correlation test, and the reconstruction error of the window's own
correlation matrix (so a feature whose mean or spread moved alone is the single feature's drift,
not the group's too). A vector feature's projection is tested with all three, on the
reference-standardized values: its mean may move, or its spread shrink, along directions no
coordinate shows.

``n_eff = n_w·n_r / (n_w + n_r)``. Calibration, as the single features' gate: each reference
window is scored against the rest of the reference (the exact moments minus its own) at its own
size; the scaled statistics' null is then fitted from those windows (the two sums of squares: a
scaled chi-square matched on mean and variance, Satterthwaite; the log ratio: a t with W - 1
degrees of freedom on their mean and spread), so a live window of any size gets its p-values.
The group's p-value is the Bonferroni combination of the three; it joins the single features'
Benjamini-Hochberg step (``sketches/analysis.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from driftwarden.core.errors import SerializationError
from driftwarden.sketches.moments import GroupMoments
from driftwarden.sketches.serialization import Reader, Writer

#: Share of the reference's (standardized) variance its principal subspace keeps.
VARIANCE_KEPT = 0.9
#: The group's tests, in the order of a null score row.
GROUP_TESTS = ("mean_shift", "correlation", "reconstruction")
#: Frame kind of a serialized GroupReference.
KIND_GROUP_REFERENCE = 24
#: Most features shown in a group's correlation-difference matrix (those that moved most).
MATRIX_FEATURES = 16
_EPS = 1e-12

__all__ = ["GROUP_TESTS", "GroupReference", "GroupScores", "build_group_reference", "group_pvalues",
           "group_scores", "group_severity"]


@dataclass(frozen=True)
class GroupScores:
    """A window's scaled statistics against a reference (:data:`GROUP_TESTS` order) and what they rest on."""

    scores: tuple[float, float, float]
    n_eff: float
    mahalanobis: float
    reconstruction_error: tuple[float, float]  # reference, window
    variance_lost: float
    components: int
    pairs: tuple[dict, ...] = ()
    matrix: dict = field(default_factory=dict)

    def evidence(self) -> dict:
        """JSON-ready: the pairs whose correlation moved most, the share of variance lost, the matrix difference."""
        return {"pairs": list(self.pairs), "variance_lost": _finite(self.variance_lost),
                "reconstruction_error": {"reference": _finite(self.reconstruction_error[0]),
                                         "window": _finite(self.reconstruction_error[1])},
                "components": self.components, "mahalanobis": _finite(self.mahalanobis),
                "correlation_delta": self.matrix}


@dataclass(frozen=True)
class _Subspace:
    """What the tests need of the reference restricted to some of its features (``idx``): their correlation
    matrix, the floored eigen-decomposition of their covariance (mean shift) and the principal subspace of
    their correlation matrix (reconstruction)."""

    corr: np.ndarray
    cov_values: np.ndarray
    cov_vectors: np.ndarray
    corr_values: np.ndarray  # descending
    basis: np.ndarray  # the first q eigenvectors of corr

    @classmethod
    def of(cls, cov: np.ndarray, sd: np.ndarray, idx: np.ndarray) -> _Subspace:
        """The subspace of the features ``idx`` of a reference with covariance ``cov`` and deviations ``sd``."""
        sub = cov[np.ix_(idx, idx)]
        corr = sub / np.outer(sd[idx], sd[idx])
        cov_values, cov_vectors = np.linalg.eigh(sub) if idx.size else (np.empty(0), np.empty((0, 0)))
        cov_values = np.maximum(cov_values, max(1e-6 * float(np.mean(np.abs(cov_values))), 1e-300)) \
            if idx.size else cov_values
        if idx.size < 2:
            return cls(corr, cov_values, cov_vectors, np.empty(0), np.empty((idx.size, 0)))
        values, vectors = np.linalg.eigh(corr)
        values, vectors = values[::-1], vectors[:, ::-1]
        kept = np.cumsum(np.clip(values, 0, None)) / max(float(np.sum(np.clip(values, 0, None))), _EPS)
        q = int(min(np.searchsorted(kept, VARIANCE_KEPT - 1e-12) + 1, idx.size))
        return cls(corr, cov_values, cov_vectors, values, vectors[:, :q])


class ReferenceParts:
    """A reference group's mean, covariance and deviations, and its :class:`_Subspace` per set of live
    features: computed once per reference (not per window; they depend on the reference alone).
    Build it from moments that no longer change (a :class:`GroupReference`'s)."""

    def __init__(self, moments: GroupMoments) -> None:
        self.moments = moments
        self.mean, self.cov = moments.mean(), moments.covariance()
        self.sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        self._subspaces: dict[bytes, _Subspace] = {}

    def subspace(self, idx: np.ndarray) -> _Subspace:
        """The reference restricted to the features ``idx`` (cached: a window usually has them all live)."""
        key = idx.tobytes()
        if key not in self._subspaces:
            if len(self._subspaces) >= 64:  # windows with ever other live features: keep the memory bounded
                self._subspaces.clear()
            self._subspaces[key] = _Subspace.of(self.cov, self.sd, idx)
        return self._subspaces[key]


def group_scores(window: GroupMoments, reference: GroupMoments, structure_only: bool = False,
                 top_pairs: int = 5, parts: ReferenceParts | None = None) -> GroupScores:
    """Score a window's moments against the reference's (same features): see the module docstring
    (``structure_only``: a group of features; the mean shift is then 0 and the reconstruction is of the
    window's correlation matrix). ``parts``: the reference's :class:`ReferenceParts`, when kept (the same
    scores, without recomputing them)."""
    if parts is None or parts.moments is not reference:
        parts = ReferenceParts(reference)
    mu_r, sd_r = parts.mean, parts.sd
    mu_w, cov_w = window.mean(), window.covariance()
    sd_w = np.sqrt(np.clip(np.diag(cov_w), 0, None))
    live = np.isfinite(sd_r) & (sd_r > 0) & np.isfinite(mu_w) & np.isfinite(np.diag(cov_w))
    n_eff = window.n * reference.n / max(window.n + reference.n, 1)
    idx = np.flatnonzero(live)
    sub = parts.subspace(idx)
    mean_shift, mahalanobis = _mean_shift(mu_w[idx] - mu_r[idx], sub, n_eff)
    correlation, pairs, matrix = _correlation(window.names, idx, sub.corr, cov_w, sd_w, n_eff, top_pairs)
    if structure_only:
        mean_shift = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            sd_own = np.where(sd_w[idx] > 0, sd_w[idx], 1.0)
        recon, re_pair, lost, q = _reconstruction(sub, cov_w[np.ix_(idx, idx)], np.zeros(idx.size), sd_own, n_eff)
    else:
        recon, re_pair, lost, q = _reconstruction(sub, cov_w[np.ix_(idx, idx)], (mu_w - mu_r)[idx], sd_r[idx], n_eff)
    return GroupScores((mean_shift, correlation, recon), n_eff, mahalanobis, re_pair, lost, q, pairs, matrix)


def _mean_shift(delta: np.ndarray, sub: _Subspace, n_eff: float) -> tuple[float, float]:
    """(n_eff · Δμᵀ Σ⁻¹ Δμ, the Mahalanobis distance) with Σ's eigenvalues floored."""
    if delta.size == 0:
        return 0.0, 0.0
    projected = sub.cov_vectors.T @ delta
    d2 = float(np.sum(projected ** 2 / sub.cov_values))
    return n_eff * d2, math.sqrt(d2)


def _correlation(names: tuple[str, ...], idx: np.ndarray, corr_r: np.ndarray, cov_w: np.ndarray, sd_w: np.ndarray,
                 n_eff: float, top: int) -> tuple[float, tuple[dict, ...], dict]:
    """n_eff · Σ_{i<j} Δr², the pairs that moved most, and the difference matrix of the features that moved most."""
    if idx.size < 2:
        return 0.0, (), {}
    sw = sd_w[idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        corr_w = cov_w[np.ix_(idx, idx)] / np.outer(sw, sw)
    corr_w = np.where(np.isfinite(corr_w), corr_w, 0.0)
    np.fill_diagonal(corr_w, 1.0)
    delta = corr_w - corr_r
    i, j = np.triu_indices(idx.size, 1)
    statistic = n_eff * float(np.sum(delta[i, j] ** 2))
    order = np.argsort(-np.abs(delta[i, j]), kind="stable")[:top]
    pairs = tuple({"features": [names[idx[i[k]]], names[idx[j[k]]]], "reference": round(float(corr_r[i[k], j[k]]), 4),
                   "window": round(float(corr_w[i[k], j[k]]), 4), "delta": round(float(delta[i[k], j[k]]), 4)}
                  for k in order)
    shown = np.sort(np.argsort(-np.sqrt(np.sum(delta ** 2, axis=1)), kind="stable")[:MATRIX_FEATURES])
    matrix = {"features": [names[idx[k]] for k in shown],
              "delta": np.round(delta[np.ix_(shown, shown)], 3).tolist()}
    return statistic, pairs, matrix


def _reconstruction(sub: _Subspace, cov_w: np.ndarray, delta: np.ndarray, sd_r: np.ndarray,
                    n_eff: float) -> tuple[float, tuple[float, float], float, int]:
    """(√n_eff · log(RE_w / RE_r), (RE_r, RE_w), share of variance lost, components kept)."""
    corr_r = sub.corr
    k = corr_r.shape[0]
    if k < 2:
        return 0.0, (0.0, 0.0), 0.0, k
    values, basis = sub.corr_values, sub.basis
    q = basis.shape[1]
    second = cov_w / np.outer(sd_r, sd_r) + np.outer(delta / sd_r, delta / sd_r)  # window's E[z zᵀ], z standardized
    resid_w = float(np.trace(second) - np.trace(basis.T @ second @ basis))
    resid_r = float(np.sum(np.clip(values[q:], 0, None)))
    re_r, re_w = resid_r / k, max(resid_w, 0.0) / k
    lost = max(resid_w, 0.0) / max(float(np.trace(second)), _EPS) - resid_r / max(float(np.trace(corr_r)), _EPS)
    statistic = math.sqrt(n_eff) * math.log((re_w + 1e-9) / (re_r + 1e-9))
    return statistic, (re_r, re_w), lost, q


@dataclass
class GroupReference:
    """A group's reference: its merged moments and each reference window's scores against the rest (W x 3);
    ``structure_only``: a group of features (no mean-shift test), else a vector feature's projection."""

    name: str
    moments: GroupMoments
    null_scores: np.ndarray = field(default_factory=lambda: np.empty((0, len(GROUP_TESTS))))
    structure_only: bool = True
    _parts: ReferenceParts | None = field(default=None, init=False, repr=False, compare=False)

    def parts(self) -> ReferenceParts:
        """The reference's mean, covariance and subspaces, computed on first use and kept (for every window
        judged against it; rebuilt should :attr:`moments` be replaced)."""
        if self._parts is None or self._parts.moments is not self.moments:
            self._parts = ReferenceParts(self.moments)
        return self._parts

    @property
    def tests(self) -> tuple[str, ...]:
        """The tests this group is judged on."""
        return GROUP_TESTS[1:] if self.structure_only else GROUP_TESTS

    @property
    def features(self) -> tuple[str, ...]:
        """The group's features, in order."""
        return self.moments.names

    def serialize(self) -> bytes:
        """Versioned bytes (kind 24): name, moments (kind 23), null scores, u8 structure only."""
        return (Writer(KIND_GROUP_REFERENCE).text(self.name).blob(self.moments.serialize())
                .array(self.null_scores).pack("B", self.structure_only).getvalue())

    @classmethod
    def deserialize(cls, data: bytes) -> GroupReference:
        """Decode bytes written by :meth:`serialize`."""
        r = Reader(data, (KIND_GROUP_REFERENCE,))
        name, moments, null = r.text(), GroupMoments.deserialize(r.blob()), r.array()
        (structure_only,) = r.unpack("B")
        r.done()
        if null.ndim != 2 or null.shape[1] != len(GROUP_TESTS):
            raise SerializationError(f"group reference {name!r}: null scores of shape {null.shape}")
        return cls(name, moments, null, bool(structure_only))


def build_group_reference(name: str, windows: list[GroupMoments], min_windows: int,
                          structure_only: bool = True) -> GroupReference:
    """Merge a group's reference windows and score each against the rest (none with fewer than ``min_windows``)."""
    merged = windows[0].copy()
    for w in windows[1:]:
        merged.merge(w)
    usable = [w for w in windows if w.n > len(w.names)]
    if len(usable) < min_windows:
        return GroupReference(name, merged, structure_only=structure_only)
    rows = [group_scores(w, _minus(merged, w), structure_only).scores for w in usable]
    return GroupReference(name, merged, np.array(rows, dtype=np.float64).reshape(len(rows), len(GROUP_TESTS)),
                          structure_only)


def _minus(total: GroupMoments, part: GroupMoments) -> GroupMoments:
    """The moments of ``total`` without ``part`` (exact)."""
    return GroupMoments(total.names, total.n - part.n, total.incomplete - part.incomplete,
                        [a - b for a, b in zip(total.sums, part.sums)],
                        [a - b for a, b in zip(total.products, part.products)])


def group_pvalues(scores: GroupScores, reference: GroupReference) -> tuple[float, ...] | None:
    """The p-value of each of the reference's :attr:`GroupReference.tests` against its windows' null
    (None: too few windows to calibrate)."""
    null = reference.null_scores
    if null.shape[0] < 2:
        return None
    mean_shift, correlation, recon = scores.scores
    pvalues = (_scaled_chi2_sf(mean_shift, null[:, 0]), _scaled_chi2_sf(correlation, null[:, 1]),
               _t_two_sided(recon, null[:, 2]))
    return pvalues[1:] if reference.structure_only else pvalues


def _scaled_chi2_sf(value: float, null: np.ndarray) -> float:
    """P(X >= value) for X ~ c·χ²_ν matched on the null's mean and variance (Satterthwaite)."""
    null = null[np.isfinite(null)]
    mean, var = float(np.mean(null)), float(np.var(null, ddof=1)) if null.size > 1 else 0.0
    if not mean > 0:
        return 1.0 if value <= 0 else 0.0
    if not var > 0:
        var = 2 * mean  # a chi-square of `mean` degrees of freedom
    scale, dof = var / (2 * mean), 2 * mean ** 2 / var
    return float(stats.chi2.sf(value / scale, dof))


def _t_two_sided(value: float, null: np.ndarray) -> float:
    """Two-sided p of ``value`` against the null's mean and spread, t with W - 1 degrees of freedom."""
    null = null[np.isfinite(null)]
    spread = float(np.std(null, ddof=1)) if null.size > 1 else 0.0
    if not spread > 0:
        return 1.0
    z = (value - float(np.mean(null))) / spread
    return float(2 * stats.t.sf(abs(z), null.size - 1))


def group_severity(scores: GroupScores) -> str:
    """Severity of a drifted group from its effects: the largest correlation move, the variance lost,
    the reconstruction error's ratio, the Mahalanobis distance of the mean."""
    moved = max((abs(p["delta"]) for p in scores.pairs), default=0.0)
    re_r, re_w = scores.reconstruction_error
    ratio = abs(math.log((re_w + 1e-9) / (re_r + 1e-9)))
    effects = [(moved, 0.2, 0.5), (abs(scores.variance_lost), 0.05, 0.2), (ratio, math.log(1.25), math.log(2))]
    if scores.scores[0]:
        effects.append((scores.mahalanobis, 0.2, 0.5))
    level = max(2 if v >= major else 1 if v >= minor else 0 for v, minor, major in effects)
    return ("minor", "moderate", "major")[level]


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
