"""Reference: what a model's traffic looked like, per feature, with calibrated gate thresholds.

Built from a training snapshot or the first windows of traffic, cut into windows. Stored with
the same versioned framing as the sketches (``serialization``), never pickled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from driftwarden.core.errors import SerializationError
from driftwarden.sketches.calibration import (calibrate_thresholds, leave_group_out, leave_one_out_scores,
                                              leave_two_out, merged_profile_or_none, score_dof)
from driftwarden.sketches.deep import unseen_estimate
from driftwarden.sketches.dispersion import (NO_DISPERSION, WINDOW_STAT_NAMES, Dispersion, estimate_dispersion,
                                             window_stats)
from driftwarden.sketches.feature import FEATURE_KINDS, FeatureSketch, copy_sketch, deserialize_sketch, new_sketch
from driftwarden.sketches.gate import SCORE_NAMES, GateThresholds
from driftwarden.sketches._values import count_strings
from driftwarden.sketches.policy import DriftPolicy
from driftwarden.sketches.reservoir import ReservoirSample
from driftwarden.sketches.profile import CategoricalProfile, merged_profile, window_profiles
from driftwarden.sketches.histogram import merged_at_once
from driftwarden.sketches.multivariate import GroupReference
from driftwarden.sketches.serialization import (KIND_REFERENCE, KIND_REFERENCE_GROUPS, KIND_REFERENCE_PROFILED,
                                                KIND_REFERENCE_WINDOWED, Reader, Writer)

#: Extra ``null_scores`` columns of a high-cardinality categorical reference, after ``SCORE_NAMES``:
#: each window's :class:`sketches.deep.UnseenEstimate` against the other windows, and its share against
#: every window but itself and the next (how fast the share falls as the reference grows).
UNSEEN_NULL_NAMES = ("unseen_share", "unseen_n_eff", "unseen_share_fewer")


@dataclass
class FeatureReference:
    """One feature's reference: sketch and sample of the whole period, thresholds, null scores.

    ``window_stats``: per reference window, in the null scores' order, ``sketches.dispersion.WINDOW_STAT_NAMES``
    (empty for a reference built before them: no dispersion, see :meth:`dispersion`).
    """

    name: str
    kind: str
    sketch: FeatureSketch
    sample: ReservoirSample
    thresholds: GateThresholds
    null_scores: np.ndarray = field(default_factory=lambda: np.empty((0, len(SCORE_NAMES))))
    profile: CategoricalProfile | None = None
    window_stats: np.ndarray = field(default_factory=lambda: np.empty((0, len(WINDOW_STAT_NAMES))))
    _dispersion: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _threshold_rows: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def dispersion(self, bins: int = 10) -> Dispersion:
        """The reference windows' over-dispersion (``sketches/dispersion.py``), computed once per ``bins``."""
        if bins not in self._dispersion:
            if not self.window_stats.size or self.thresholds.source != "calibrated":
                self._dispersion[bins] = NO_DISPERSION
            else:
                sd = float(self.sketch.std) if self.kind == "numeric" else 0.0
                self._dispersion[bins] = estimate_dispersion(self.null_scores[:, :len(SCORE_NAMES)], self.window_stats,
                                                             self.kind, score_dof(self.sketch, bins, self.profile), sd)
        return self._dispersion[bins]

    def threshold_rows(self, bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Its thresholds and its :meth:`dispersion` in ``SCORE_NAMES`` order (``as_array``), what
        ``calibration.thresholds_for_counts`` takes: made once per ``bins`` (a reference judges window after window)."""
        if bins not in self._threshold_rows:
            self._threshold_rows[bins] = (self.thresholds.as_array(), self.dispersion(bins).as_array())
        return self._threshold_rows[bins]


class Reference:
    """The reference of every feature of a model.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> windows = [rng.normal(size=500) for _ in range(10)]
        >>> ref = Reference({"x": build_feature_reference("x", "numeric", windows, DriftPolicy())})
        >>> ref.features["x"].thresholds.source, ref.features["x"].sketch.n
        ('calibrated', 5000)
        >>> Reference.deserialize(ref.serialize()).features["x"].thresholds == ref.features["x"].thresholds
        True
    """

    def __init__(self, features: dict[str, FeatureReference] | None = None,
                 groups: dict[str, GroupReference] | None = None) -> None:
        self.features: dict[str, FeatureReference] = dict(features or {})
        #: each multivariate group's reference (``sketches/multivariate.py``)
        self.groups: dict[str, GroupReference] = dict(groups or {})

    def serialize(self) -> bytes:
        """Encode every feature reference as versioned bytes (kind 11: kind 10 and each feature's window stats;
        kind 12: kind 11, then every multivariate group's reference)."""
        w = Writer(KIND_REFERENCE_GROUPS if self.groups else KIND_REFERENCE_WINDOWED).pack("I", len(self.features))
        for ref in self.features.values():
            w.text(ref.name).text(ref.kind).blob(ref.sketch.serialize()).blob(ref.sample.serialize())
            w.pack(f"{len(SCORE_NAMES)}d", *ref.thresholds.as_array()).text(ref.thresholds.source)
            w.array(ref.null_scores)
            w.blob(ref.profile.serialize() if ref.profile is not None else b"")
            w.array(ref.window_stats)
        if self.groups:
            w.pack("I", len(self.groups))
            for group in self.groups.values():
                w.blob(group.serialize())
        return w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> Reference:
        """Decode bytes written by :meth:`serialize` (or by builds before window stats: kind 10, none; before
        profiles: kind 5, neither; kind 12 adds the groups)."""
        r = Reader(data, (KIND_REFERENCE, KIND_REFERENCE_PROFILED, KIND_REFERENCE_WINDOWED, KIND_REFERENCE_GROUPS))
        (count,) = r.unpack("I")
        features = {}
        for _ in range(count):
            name, kind = r.text(), r.text()
            if kind not in FEATURE_KINDS:
                raise SerializationError(f"reference feature {name!r} has unknown kind {kind!r}")
            sketch, sample = deserialize_sketch(r.blob()), ReservoirSample.deserialize(r.blob())
            values = dict(zip(SCORE_NAMES, r.unpack(f"{len(SCORE_NAMES)}d")))
            thresholds = GateThresholds(**values, source=r.text())
            null_scores = r.array()
            profile = r.blob() if r.kind != KIND_REFERENCE else b""
            stats = r.array() if r.kind in (KIND_REFERENCE_WINDOWED, KIND_REFERENCE_GROUPS) else np.empty((0, len(WINDOW_STAT_NAMES)))
            if stats.size and (stats.ndim != 2 or stats.shape != (len(null_scores), len(WINDOW_STAT_NAMES))):
                raise SerializationError(f"reference feature {name!r}: window stats of shape {stats.shape} for "
                                         f"{len(null_scores)} windows")
            features[name] = FeatureReference(name, kind, sketch, sample, thresholds, null_scores,
                                              CategoricalProfile.deserialize(profile) if profile else None,
                                              stats.reshape(-1, len(WINDOW_STAT_NAMES)))
        groups = {}
        if r.kind == KIND_REFERENCE_GROUPS:
            (count,) = r.unpack("I")
            for _ in range(count):
                group = GroupReference.deserialize(r.blob())
                groups[group.name] = group
        r.done()
        return cls(features, groups)

    def save(self, path: str | PathLike) -> None:
        """Write the serialized reference to ``path``."""
        Path(path).write_bytes(self.serialize())

    @classmethod
    def load(cls, path: str | PathLike) -> Reference:
        """Read a reference written by :meth:`save`."""
        return cls.deserialize(Path(path).read_bytes())


def build_feature_reference(name: str, kind: str, windows: list[Any], policy: DriftPolicy,
                            sample_capacity: int = 2000, seed: int = 0) -> FeatureReference:
    """Sketch, sample and calibrate one feature from its reference period cut into ``windows``.

    With fewer than ``policy.min_windows`` windows, thresholds are the fixed ones (source "fixed").
    """
    if kind not in FEATURE_KINDS:
        raise ValueError(f"unknown feature kind {kind!r}; valid kinds are {FEATURE_KINDS}")
    sketches = [new_sketch(kind, name, max_exact=policy.max_exact).update(w) for w in windows]
    sample = ReservoirSample(sample_capacity, seed, name)
    for values in windows:
        sample.update(values)
    counts = [value_counts(w) for w in windows] if kind == "categorical" else None
    samples = [ReservoirSample(sample_capacity, seed + 1 + i, name).update(w) for i, w in enumerate(windows)] \
        if kind == "categorical" else None
    return reference_from_window_sketches(name, kind, sketches, sample, policy, counts, samples)


def value_counts(values: Any) -> dict[str, int]:
    """Count of each non-null value of a categorical column (what a profile is built from)."""
    return dict(count_strings(values)[0])


def reference_from_window_sketches(name: str, kind: str, sketches: list[FeatureSketch], sample: ReservoirSample,
                                   policy: DriftPolicy, window_counts: list[dict[str, int]] | None = None,
                                   window_samples: Sequence[ReservoirSample] | None = None,
                                   groups: list[int] | None = None) -> FeatureReference:
    """Merge per-window sketches into a reference and calibrate the gate on those windows.

    A categorical reference whose merged sketch is capped (more distinct values than
    ``policy.max_exact``) gets a :class:`CategoricalProfile`: from ``window_counts`` (every value of
    each window, counted from the raw events) when given, else from each window sketch's kept
    values (complete only below the smallest window threshold: see ``sketches/profile.py``).
    With ``window_samples`` (each window's deep-test sample) such a reference's ``null_scores``
    gain the ``UNSEEN_NULL_NAMES`` columns: each window's unseen estimate against the others
    (:func:`sketches.deep.unseen_estimate`), the null of the deep unseen test.
    ``groups`` (one per window, in the windows' order: the season a seasonal reference's window
    belongs to): each window is scored against the windows of the other groups, not merely the
    other windows (leave one group out), so whatever varies between groups is in the null; by
    default every window is its own group (leave one out). ``window_stats`` keeps each window's
    counts, mean and group, from which :meth:`FeatureReference.dispersion` measures the windows'
    over-dispersion. With fewer than ``policy.min_windows`` windows, thresholds are the fixed ones
    (source "fixed").
    """
    merged = merged_at_once(sketches)  # histograms in one pass; else one by one
    if merged is None:
        merged = copy_sketch(sketches[0])
        for sketch in sketches[1:]:
            merged.merge(sketch)
    profiles = _profiles(kind, merged, sketches, policy, window_counts)
    profile = merged_profile(profiles) if profiles else None
    if len(sketches) < policy.min_windows:
        return FeatureReference(name, kind, merged, sample, GateThresholds.fixed(), profile=profile)
    null_scores = leave_one_out_scores(sketches, policy.bins, profiles, groups)
    if profiles and window_samples is not None and len(window_samples) == len(sketches):
        null_scores = np.hstack([null_scores, _unseen_null_columns(profiles, sketches, window_samples, groups)])
    thresholds = calibrate_thresholds(null_scores, kind, policy.false_alarm_rate,
                                      score_dof(merged, policy.bins, profile))
    return FeatureReference(name, kind, merged, sample, thresholds, null_scores, profile,
                            window_stats(sketches, groups))


def _profiles(kind: str, merged: FeatureSketch, sketches: list[FeatureSketch], policy: DriftPolicy,
              window_counts: list[dict[str, int]] | None) -> list[CategoricalProfile] | None:
    if kind != "categorical" or merged.is_exact:
        return None
    if window_counts is not None:
        return window_profiles(window_counts, policy.head_size, policy.membership_fpr)
    limit = min(sketch.threshold for sketch in sketches)
    return window_profiles([s.frequencies() for s in sketches], policy.head_size, policy.membership_fpr, limit)


def _unseen_null_columns(profiles: list[CategoricalProfile], sketches: list[FeatureSketch],
                         samples: Sequence[ReservoirSample], groups: list[int] | None = None) -> np.ndarray:
    """Per window: its unseen estimate (share, n_eff) against the other windows (of other groups), and its
    share against all windows but itself and the next one (NaN for the last window, and with groups)."""
    others = leave_group_out(profiles, merged_profile_or_none, groups)
    fewer = leave_two_out(profiles, merged_profile_or_none) + [None] if groups is None else [None] * len(profiles)
    rows = []
    for one, two, sketch, sample in zip(others, fewer, sketches, samples):
        estimate = unseen_estimate(one, sketch, sample)
        rows.append((estimate.share, estimate.n_eff,
                     unseen_estimate(two, sketch, sample).share if two is not None else np.nan))
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(UNSEEN_NULL_NAMES))


def unseen_null(ref: FeatureReference) -> np.ndarray | None:
    """Per reference window: ``UNSEEN_NULL_NAMES`` (share and n_eff against the other windows, share against
    all but two); None if not stored."""
    if ref.null_scores.ndim != 2 or ref.null_scores.shape[1] < len(SCORE_NAMES) + len(UNSEEN_NULL_NAMES):
        return None
    return ref.null_scores[:, len(SCORE_NAMES):len(SCORE_NAMES) + len(UNSEEN_NULL_NAMES)]


def baseline_unseen_share(ref: FeatureReference) -> float:
    """The reference's own unseen share: mean of its windows' leave-one-out ``new_share`` (0.0 if none)."""
    column = ref.null_scores[:, SCORE_NAMES.index("new_share")] if ref.null_scores.size else np.empty(0)
    column = column[np.isfinite(column)]
    return float(np.mean(column)) if column.size else 0.0
