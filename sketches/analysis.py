"""analyze_window: gate every feature of one window, deep-test the alarms, adjust, decide.

Rules for the awkward cases (each tested):

* A feature in the window but not in the reference: no scores (all None, ``missing_delta`` 0.0),
  ``alarm`` False, severity "none" - there is nothing to compare with until the reference is rebuilt.
* A feature of the reference absent from the window: reported with ``count`` 0 and no alarm.
* A window with fewer than ``policy.min_count`` values (nulls included) for a feature never alarms;
  with fewer than ``min_count`` finite (numeric) or non-null values only the missing-rate gate can fire
  (an all-null, all-NaN or all-inf window with enough rows is a missing-rate alarm).
* Deep tests (one rule, :func:`_deep`): where both sides count every value exactly (histograms;
  uncapped categorical sketches) the full-window tests of ``sketches/window_tests.py`` - numeric:
  KS, tail-refined binned chi-square, exceedance beyond the reference's range; categorical:
  chi-square, new categories - a high-cardinality categorical (a reference with a profile):
  ``sketches.deep.profile_test`` (a one-sided test of the whole window's unseen share, from its
  exact kept counts completed by its sample, against the reference windows' own; chi-square on
  the head) - else the tests on the two samples (KS; chi-square); plus a chi-square test of the missing rates when the
  missing-rate gate fired. The feature's p-value is the Bonferroni combination of that family,
  ``min(1, m * min p)``; the test with the smallest p is the one that decided
  (``DeepResult.decided_by``).
* Benjamini-Hochberg runs across every feature of the reference present in the window, those the
  gate let pass counting with p = 1, at ``policy.alpha`` (derived from the monitor's false-alarm
  budget: ``sketches.policy.budget_alpha``), so a drift-free window reports anything with
  probability <= alpha however many features it has.
* With segments (:func:`analyze_segments`) the Benjamini-Hochberg step becomes hierarchical FDR
  (``sketches/fdr.py``): per feature (and multivariate group) a family of its global test and its
  judged segments (Simes), BH across features, then BH within each selected feature; the same bound holds.
* Gate thresholds follow the window's count (``sketches.calibration.thresholds_for_count``).
* Judging one feature never stops the others: should any step of one feature's judging raise (no
  input is known to make one: ``tests/test_judging_never_raises.py`` searches for one), that
  feature is reported "not judged" (:attr:`FeatureVerdict.error`: ``not judged: <exception type>``,
  no alarm, severity "none", outside the FDR families) and the rest of the window is judged as usual.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from driftwarden.sketches.calibration import thresholds_for_count, thresholds_for_counts
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.deep import DeepResult, deep_test, missing_rate_pvalue, profile_test
from driftwarden.sketches.fdr import hierarchical_adjusted
from driftwarden.sketches.feature import FeatureSketch, is_numeric
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.moments import GroupMoments
from driftwarden.sketches.multivariate import GROUP_TESTS, GroupReference, group_pvalues, group_scores, group_severity
from driftwarden.sketches.gate import SCORE_NAMES, GateCell, GateScores, gate_alarms, gate_scores_many
from driftwarden.sketches.policy import DriftPolicy, verdict
from driftwarden.sketches.reference import FeatureReference, Reference, baseline_unseen_share, unseen_null
from driftwarden.sketches.reservoir import ReservoirSample
from driftwarden.sketches.sequential import CusumState, cusum_threshold, next_state, window_z
from driftwarden.sketches.window_tests import TestResult, WindowTests, category_tests, histogram_tests


@dataclass(frozen=True)
class FeatureVerdict:
    """Everything decided about one feature in one window."""

    name: str
    kind: str
    count: int
    missing: int
    gate: GateScores
    alarm: bool
    deep: DeepResult | None
    p_adjusted: float | None
    drifted: bool
    severity: str
    cusum: CusumState | None = None
    z: float | None = None
    by_cusum: bool = False
    #: ``not judged: <exception type>`` when judging this feature raised (:attr:`exception` holds it), else None
    error: str | None = None
    exception: BaseException | None = dataclasses.field(default=None, compare=False, repr=False)
    #: a multivariate group's evidence beside its tests (``GroupScores.evidence``), else None
    details: Mapping | None = dataclasses.field(default=None, compare=False)


def analyze_window(window: dict[str, tuple[FeatureSketch, ReservoirSample]], reference: Reference,
                   policy: DriftPolicy, state: Mapping[str, CusumState] | None = None) -> list[FeatureVerdict]:
    """Gate, deep-test and judge every feature of one window (reference features first).

    Example (a reference of 10 windows, then a window whose mean moved by one standard deviation):
        >>> import numpy as np
        >>> from sketches import NumericSketch, Reference, build_feature_reference
        >>> rng, policy = np.random.default_rng(0), DriftPolicy()
        >>> ref = Reference({"x": build_feature_reference("x", "numeric",
        ...                                               [rng.normal(size=1000) for _ in range(10)], policy)})
        >>> moved = rng.normal(1.0, 1.0, size=1000)
        >>> [fv] = analyze_window({"x": (NumericSketch().update(moved), ReservoirSample().update(moved))},
        ...                       ref, policy)
        >>> fv.alarm, fv.drifted, fv.severity
        (True, True, 'major')

    The deep-test p-values are Benjamini-Hochberg adjusted across the features: this is
    :func:`analyze_segments` without segments (each feature's family is its one test).
    """
    return analyze_segments(window, {}, reference, {}, policy, 0, state)[0]


def analyze_segments(window: dict[str, tuple[FeatureSketch, ReservoirSample]],
                     segment_windows: Mapping[tuple[str, ...], dict[str, tuple[FeatureSketch, ReservoirSample]]],
                     reference: Reference, segment_references: Mapping[tuple[str, ...], Reference],
                     policy: DriftPolicy, min_count: int, state: Mapping[str, CusumState] | None = None,
                     groups: Mapping[str, GroupMoments] | None = None,
                     segment_groups: Mapping[tuple[str, ...], Mapping[str, GroupMoments]] | None = None,
                     ) -> tuple[list[FeatureVerdict], dict[tuple[str, ...], list[FeatureVerdict]]]:
    """Judge one window's global view and its segments under one false-alarm budget.

    The global summary is staged as in :func:`analyze_window`; a segment (key: the tuple of its
    ``by`` values) with at least ``min_count`` events (:func:`segment_events`) and a reference of
    its own in ``segment_references`` is staged against that reference the same way (the same gate
    and deep tests); any other segment is never judged (no scores, no alarm, outside the FDR
    families) but reported with its counts. The deep-test p-values are then adjusted by
    hierarchical FDR (``sketches.fdr``): each feature's family is its global test plus its judged
    segments, Benjamini-Hochberg across features, then within each selected feature; a member
    drifted when its ``p_adjusted`` <= ``policy.alpha``. Without segments the verdicts are exactly
    those of :func:`analyze_window`. The slow-drift CUSUM runs on the global verdicts only
    (segments carry no CUSUM state).

    Returns the global verdicts (as :func:`analyze_window` orders them) and, per segment key of
    ``segment_windows``, that segment's verdicts.

    ``groups``: the window's multivariate group moments; each group of the reference is judged on
    them (:func:`judge_groups`), its verdict after the features' (kind ``group``). ``segment_groups``:
    each segment's group moments; a segment's groups are judged against its reference's groups when the
    segment is judged (``min_count`` events, as its features) and, as for the global view, has at least
    ``max(policy.min_count, d + 1)`` complete rows of the group; in a segment not judged (or whose
    reference has the group but too few rows) the group is reported with its counts only; a segment
    reference without groups (built before they were kept per segment) reports none. A group's family
    in the FDR step is its global test plus its judged segments, as a feature's.
    """
    names = list(reference.features) + [n for n in window if n not in reference.features]
    cells = {None: [(name, window.get(name), reference.features.get(name)) for name in names]}
    refs: dict[tuple[str, ...] | None, Reference | None] = {None: reference}
    windows = {None: window, **segment_windows}
    for key, seg in segment_windows.items():
        ref = segment_references.get(key)
        refs[key] = ref if ref is not None and segment_events(seg) >= min_count else None
        if refs[key] is None:
            cells[key] = [(name, pair, None) for name, pair in seg.items()]
        else:
            seg_names = list(ref.features) + [n for n in seg if n not in ref.features]
            cells[key] = [(name, seg.get(name), ref.features.get(name)) for name in seg_names]
    staged = _stage_all(cells, policy)
    group_rows = _group_rows(groups, segment_groups, reference, segment_references, refs, policy)
    for key, rows in group_rows.items():
        staged[key] = staged[key] + [(fv, deep) for fv, deep, _ in rows]
    families: dict[str, list[tuple[tuple[str, ...] | None, int]]] = {}
    for key, rows in staged.items():
        for i, (fv, _) in enumerate(rows):
            if refs[key] is not None and fv.name in refs[key].features and fv.name in windows[key] and fv.error is None:
                families.setdefault(fv.name, []).append((key, i))
            elif refs[key] is not None and fv.kind == GROUP and fv.error is None and fv.count:
                families.setdefault(fv.name, []).append((key, i))
    adjusted = hierarchical_adjusted([[_pvalue(staged[k][i][1]) for k, i in family] for family in families.values()],
                                     policy.alpha)
    p_adj = {(k, i): p for family, ps in zip(families.values(), adjusted) for (k, i), p in zip(family, ps)
             if staged[k][i][1] is not None}
    judged = {key: [_guarded(fv, _finish, fv, deep, p_adj.get((key, i)), policy) for i, (fv, deep) in enumerate(rows)]
              for key, rows in staged.items()}
    for key, rows in group_rows.items():
        first = len(judged[key]) - len(rows)
        judged[key][first:] = [_group_severity(fv, scores) for fv, (_, _, scores) in zip(judged[key][first:], rows)]
    return _with_cusum(judged.pop(None), window, reference, policy, state), judged


def _group_rows(groups: Mapping[str, GroupMoments] | None,
                segment_groups: Mapping[tuple[str, ...], Mapping[str, GroupMoments]] | None,
                reference: Reference, segment_references: Mapping[tuple[str, ...], Reference],
                judged_refs: Mapping[tuple[str, ...] | None, Reference | None], policy: DriftPolicy,
                ) -> dict[tuple[str, ...] | None, list[tuple[FeatureVerdict, DeepResult | None, object]]]:
    """:func:`judge_groups` of the global view (key None) and of each segment whose reference has groups
    (``judged_refs``: the segments judged; the others' groups get their counts only)."""
    rows = {None: judge_groups(groups or {}, reference.groups, policy)}
    for key, moments in (segment_groups or {}).items():
        ref = segment_references.get(key)
        if key in judged_refs and ref is not None and ref.groups:
            rows[key] = judge_groups(moments, ref.groups, policy, judged=judged_refs[key] is not None,
                                     min_windows=policy.segment_group_min_windows)
    return rows


#: The kind of a multivariate group's verdict.
GROUP = "group"


def judge_groups(groups: Mapping[str, GroupMoments], references: Mapping[str, GroupReference], policy: DriftPolicy,
                 judged: bool = True, min_windows: int = 0) -> list[tuple[FeatureVerdict, DeepResult | None, object]]:
    """Each reference group's verdict before the FDR step, its tests (None: not tested) and its scores.

    A group is tested when the window has at least ``max(policy.min_count, d + 1)`` complete rows of
    it (d: its features) and its reference was calibrated (``policy.min_windows`` windows); its p-value
    is the Bonferroni combination of :data:`sketches.multivariate.GROUP_TESTS`. ``judged`` False (a
    segment with too few events): counts only; so is a group whose reference was calibrated on fewer than
    ``min_windows`` windows (a segment's: ``policy.segment_group_min_windows``). Judging one group never
    stops the rest.
    """
    rows = []
    for name, ref in references.items():
        moments = groups.get(name)
        count, missing = (moments.n + moments.incomplete, moments.incomplete) if moments is not None else (0, 0)
        plain = FeatureVerdict(name, GROUP, count, missing, GateScores(), False, None, None, False, "none")
        if not judged or moments is None or moments.names != ref.features \
                or moments.n < max(policy.min_count, moments.d + 1) or ref.null_scores.shape[0] < min_windows:
            rows.append((plain, None, None))
            continue
        try:
            scores = group_scores(moments, ref.moments, ref.structure_only, parts=ref.parts())
            pvalues = group_pvalues(scores, ref)
        except Exception as exc:  # noqa: BLE001 - "not judged", the window goes on
            rows.append((dataclasses.replace(plain, error=f"not judged: {type(exc).__name__}", exception=exc), None, None))
            continue
        if pvalues is None:  # a reference too short to calibrate on: counts only, as for a feature
            rows.append((plain, None, scores))
            continue
        effects = {"mean_shift": ("mahalanobis", scores.mahalanobis),
                   "correlation": ("max_delta_r", max((abs(p["delta"]) for p in scores.pairs), default=0.0)),
                   "reconstruction": ("variance_lost", scores.variance_lost)}
        statistics = dict(zip(GROUP_TESTS, scores.scores))
        tests = tuple(TestResult(test, statistics[test], p, *effects[test]) for test, p in zip(ref.tests, pvalues))
        deep = DeepResult(None, None, None, None, None, None, pvalue=min(1.0, len(tests) * min(pvalues)), tests=tests)
        rows.append((dataclasses.replace(plain, alarm=True, details=scores.evidence()), deep, scores))
    return rows


def _group_severity(fv: FeatureVerdict, scores) -> FeatureVerdict:
    """A drifted group's severity from its effects (``sketches.multivariate.group_severity``)."""
    return dataclasses.replace(fv, severity=group_severity(scores)) if fv.drifted and scores is not None else fv


def segment_events(segment_window: Mapping[str, tuple[FeatureSketch, ReservoirSample]]) -> int:
    """Events of one segment's window: the largest count (values, nulls included) of any of its features."""
    return max((sketch.count for sketch, _ in segment_window.values()), default=0)


def _pvalue(deep: DeepResult | None) -> float:
    return deep.pvalue if deep is not None else 1.0


def _with_cusum(verdicts: list[FeatureVerdict], window: dict[str, tuple[FeatureSketch, ReservoirSample]],
                reference: Reference, policy: DriftPolicy,
                state: Mapping[str, CusumState] | None) -> list[FeatureVerdict]:
    """The verdicts with each reference feature's slow-drift CUSUM carried on (when the policy spends on it)."""
    if policy.sequential_alpha > 0 and reference.features:
        h = cusum_threshold(policy.sequential_alpha / (2 * len(reference.features)))
        verdicts = [fv if fv.error is not None else
                    _guarded(fv, _sequential, fv, window.get(fv.name), reference.features.get(fv.name),
                             (state or {}).get(fv.name), h, policy.bins)
                    for fv in verdicts]
    return verdicts


def _sequential(fv: FeatureVerdict, pair: tuple[FeatureSketch, ReservoirSample] | None,
                ref: FeatureReference | None, state: CusumState | None, h: float, bins: int = 10) -> FeatureVerdict:
    """Carry the feature's CUSUM one window on; a CUSUM alarm makes a not-yet-drifted feature drifted, "minor"."""
    if pair is None or ref is None or pair[0].count < 1:
        return dataclasses.replace(fv, cusum=state)
    z, two_sided = window_z(ref, *pair, bins=bins)
    after = next_state(state, z, two_sided, h)
    fv = dataclasses.replace(fv, cusum=after, z=z)
    if after is not None and after.alarm(h) and not fv.drifted:
        fv = dataclasses.replace(fv, drifted=True, severity="minor", by_cusum=True)
    return fv


#: (feature name, the window's (sketch, sample) or None, the reference or None) of one feature to stage.
_Cell = tuple[str, tuple[FeatureSketch, ReservoirSample] | None, FeatureReference | None]


def _stage_all(cells: dict[tuple[str, ...] | None, list[_Cell]],
               policy: DriftPolicy) -> dict[tuple[str, ...] | None, list[tuple[FeatureVerdict, DeepResult | None]]]:
    """:func:`_stage` of every (name, window pair, reference) of the global view (key None) and each
    segment, with the gate scores of all of them computed in one call (``gate_scores_many``) and their
    thresholds and alarms in one pass (:func:`_gate_all`)."""
    judged = [(name, pair, ref) for rows in cells.values() for name, pair, ref in rows
              if pair is not None and ref is not None]
    scores = _each_or_alone(lambda some: gate_scores_many(some, policy.bins),
                            [GateCell(ref.sketch, pair[0], ref.profile, name) for name, pair, ref in judged])
    gated = iter(_gate_all(judged, scores, policy))
    return {key: [_stage_guarded(name, pair, ref, policy, next(gated) if pair is not None and ref is not None else None)
                  for name, pair, ref in rows] for key, rows in cells.items()}


def _each_or_alone(step: Callable[[list], list], items: list) -> list:
    """``step(items)`` (one result per item); should that raise, ``step`` of each item alone, an item's
    exception in its place: one cell's failure must not cost the others their results."""
    try:
        return step(items)
    except Exception:  # noqa: BLE001
        pass
    results = []
    for item in items:
        try:
            results.extend(step([item]))
        except Exception as exc:  # noqa: BLE001
            results.append(exc)
    return results


#: What the gate decided of one judged cell: its scores as judged and its alarm (or why it could not).
_Gated = tuple[GateScores, bool] | Exception


def _gate_all(judged: list[_Cell], scores: list[GateScores | Exception], policy: DriftPolicy) -> list[_Gated]:
    """Each judged cell's gate scores as judged (the missing-rate score alone below ``policy.min_count`` values)
    and its alarm (``policy.min_count`` values or more and a score over its threshold rescaled to the window's
    count): the thresholds and alarms of all the cells computed at once (``calibration.thresholds_for_counts``,
    ``gate.gate_alarms``)."""
    gated: list[_Gated] = [_judged_scores(pair[0], score, policy) for (_, pair, _), score in zip(judged, scores)]
    tested = [i for i, g in enumerate(gated) if not isinstance(g, Exception)]
    alarms = _each_or_alone(lambda some: _alarms(some, policy.bins, policy.min_count),
                            [(judged[i][1][0].count, judged[i][2], gated[i][0]) for i in tested])
    for i, alarm in zip(tested, alarms):
        gated[i] = alarm if isinstance(alarm, Exception) else (gated[i][0], alarm)
    return gated


def _judged_scores(sketch: FeatureSketch, scores: GateScores | Exception, policy: DriftPolicy) -> _Gated:
    """A cell's gate scores as judged, no alarm yet: the missing-rate score alone below ``policy.min_count`` values."""
    if isinstance(scores, Exception):
        return scores
    try:
        return (GateScores(missing_delta=scores.missing_delta) if sketch.n < policy.min_count else scores), False
    except Exception as exc:  # noqa: BLE001 - judged "not judged", the window goes on
        return exc


#: A :class:`GateScores`' values in ``SCORE_NAMES`` order (None where a score does not apply).
_SCORE_VALUES = operator.attrgetter(*SCORE_NAMES)


def _alarms(cells: list[tuple[int, FeatureReference, GateScores]], bins: int, min_count: int) -> list[bool]:
    """The gate alarm of each (window count, reference, scores): ``min_count`` values or more and a score over
    its threshold rescaled to the window's count, all cells in one pass."""
    if not cells:
        return []
    rows = [ref.threshold_rows(bins) for _, ref, _ in cells]
    thresholds = thresholds_for_counts(np.array([t for t, _ in rows]), np.array([d for _, d in rows]),
                                       np.array([len(ref.null_scores) for _, ref, _ in cells]),
                                       np.array([ref.sketch.count for _, ref, _ in cells]),
                                       np.array([count for count, _, _ in cells]),
                                       np.array([ref.thresholds.source == "calibrated" for _, ref, _ in cells]))
    values = np.array([_SCORE_VALUES(scores) for _, _, scores in cells], dtype=np.float64)
    counted = np.array([count for count, _, _ in cells]) >= min_count
    return (gate_alarms(values, thresholds) & counted).tolist()


def _stage_guarded(name: str, pair: tuple[FeatureSketch, ReservoirSample] | None, ref: FeatureReference | None,
                   policy: DriftPolicy, gated: _Gated | None) -> tuple[FeatureVerdict, DeepResult | None]:
    """:func:`_stage`, or the feature's "not judged" verdict when its gate or its staging raised."""
    try:
        if isinstance(gated, Exception):
            raise gated
        return _stage(name, pair, ref, policy, gated)
    except Exception as exc:  # noqa: BLE001 - judged "not judged", the window goes on
        return not_judged(name, ref.kind if ref else _kind_of(pair[0]), pair, exc), None


def not_judged(name: str, kind: str, pair: tuple[FeatureSketch, ReservoirSample] | None,
               exc: BaseException) -> FeatureVerdict:
    """The verdict of a feature whose judging raised ``exc``: its counts, no scores, no alarm, the error named.

    >>> not_judged("c", "categorical", None, ValueError("boom")).error
    'not judged: ValueError'
    """
    count, missing = _counts(pair)
    return FeatureVerdict(name, kind, count, missing, GateScores(), False, None, None, False, "none",
                          error=f"not judged: {type(exc).__name__}", exception=exc)


def _counts(pair: tuple[FeatureSketch, ReservoirSample] | None) -> tuple[int, int]:
    """A window's (count, missing) of one feature, (0, 0) when absent or unreadable."""
    try:
        return (int(pair[0].count), int(pair[0].missing)) if pair else (0, 0)
    except Exception:  # noqa: BLE001 - a sketch broken enough to raise here still gets its verdict
        return 0, 0


def _guarded(fv: FeatureVerdict, step: Callable[..., FeatureVerdict], *args) -> FeatureVerdict:
    """``step(*args)``, or ``fv`` turned "not judged" when it raises."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001
        return dataclasses.replace(fv, alarm=False, deep=None, p_adjusted=None, drifted=False, severity="none",
                                   error=f"not judged: {type(exc).__name__}", exception=exc)


def _stage(name: str, pair: tuple[FeatureSketch, ReservoirSample] | None, ref: FeatureReference | None,
           policy: DriftPolicy, gated: tuple[GateScores, bool] | None) -> tuple[FeatureVerdict, DeepResult | None]:
    """A feature's verdict before the FDR step, and its deep test if the gate fired (``gated``: its gate
    scores as judged and its alarm (:func:`_gate_all`), None when the window or the reference lacks the feature)."""
    kind = ref.kind if ref else _kind_of(pair[0])
    if pair is None or ref is None or gated is None:
        count, missing = _counts(pair)
        return FeatureVerdict(name, kind, count, missing, GateScores(), False, None, None, False, "none"), None
    sketch, sample = pair
    scores, alarm = gated
    deep = _deep(ref, sketch, sample, scores, policy) if alarm else None
    fv = FeatureVerdict(name, kind, sketch.count, sketch.missing, scores, alarm, None, None, False, "none")
    return fv, deep


def _deep(ref: FeatureReference, sketch: FeatureSketch, sample: ReservoirSample, scores: GateScores,
          policy: DriftPolicy) -> DeepResult:
    result = DeepResult(None, None, None, None, None, None, pvalue=1.0)
    if sketch.n >= policy.min_count:
        result = _distribution_tests(ref, sketch, sample, scores, policy)
    tests = list(result.tests)
    missing_p = None
    spread = ref.dispersion(policy.bins)
    if abs(scores.missing_delta) > thresholds_for_count(ref.thresholds, len(ref.null_scores), ref.sketch.count,
                                                        sketch.count, spread).missing_delta:
        missing_p = missing_rate_pvalue(ref.sketch.missing, ref.sketch.count, sketch.missing, sketch.count,
                                        spread.inflation(spread.missing, 1.0 / ref.sketch.count + 1.0 / sketch.count))
        tests.append(TestResult("missing", scores.missing_delta, missing_p, "missing_delta", scores.missing_delta))
    combined = min(1.0, len(tests) * min(t.pvalue for t in tests)) if tests else 1.0
    return dataclasses.replace(result, pvalue=combined, missing_pvalue=missing_p, tests=tuple(tests))


def _distribution_tests(ref: FeatureReference, sketch: FeatureSketch, sample: ReservoirSample, scores: GateScores,
                        policy: DriftPolicy) -> DeepResult:
    """Full-window tests where both sides have exact counts, else the tests on the two samples."""
    full, spread = None, ref.dispersion(policy.bins)
    if isinstance(ref.sketch, HistogramSketch) and isinstance(sketch, HistogramSketch):
        full = histogram_tests(ref.sketch, sketch, policy.bins, spread.distribution)
    elif isinstance(ref.sketch, CategoricalSketch) and isinstance(sketch, CategoricalSketch) and ref.profile is None:
        full = category_tests(ref.sketch, sketch, baseline_unseen_share(ref), spread.chi2)
    if full is not None:
        return _from_full(full, ref.kind, scores)
    if ref.profile is not None and isinstance(sketch, CategoricalSketch):
        return profile_test(ref.profile, ref.sample, sketch, sample, unseen_null(ref), baseline_unseen_share(ref))
    if sample.is_empty or ref.sample.is_empty:
        return DeepResult(None, None, None, None, None, None, pvalue=1.0)
    result = deep_test(ref.sample, sample, ref.kind, policy.bins)
    if ref.kind == "numeric":
        test = TestResult("ks_sample", result.ks_stat, result.ks_pvalue, "ks", result.ks_stat)
    else:
        test = TestResult("chi2_sample", result.chi2_stat or 0.0, result.pvalue, "psi", result.psi or 0.0)
    return dataclasses.replace(result, tests=(test,))


def _from_full(full: WindowTests, kind: str, scores: GateScores) -> DeepResult:
    ks, chi2 = full.get("ks"), full.get("chi2")
    if kind == "numeric":
        return DeepResult(ks.statistic, ks.pvalue, scores.psi, scores.emd, chi2.statistic, chi2.pvalue,
                          pvalue=1.0, tests=full.tests, moved=full.moved)
    return DeepResult(None, None, full.psi, None, chi2.statistic, chi2.pvalue, pvalue=1.0, tests=full.tests,
                      moved=full.moved)


def _finish(fv: FeatureVerdict, deep: DeepResult | None, p_adjusted: float | None,
            policy: DriftPolicy) -> FeatureVerdict:
    if deep is None:
        return fv
    missing = fv.gate.missing_delta if deep.missing_pvalue is not None else None
    v = verdict(deep, p_adjusted, policy, missing)
    return dataclasses.replace(fv, deep=deep, p_adjusted=p_adjusted, drifted=v.drifted, severity=v.severity)


def verdict_evidence(fv: FeatureVerdict) -> dict | None:
    """Why a deep-tested feature was judged as it was, JSON-ready; None when no deep test ran.

    ``test``: the test that decided (smallest raw p-value of the feature's family), its
    ``statistic`` and raw ``p_value``; ``p_adjusted``: the feature's p-value after Bonferroni over
    the ``family`` and Benjamini-Hochberg across features (the one compared with ``alpha``);
    ``effect`` / ``effect_size``: that test's effect size (ks: D; tv: share of mass moved;
    beyond_share: share of the window beyond the reference's range; new_share; missing_delta; psi);
    ``moved``: the value ranges (with the reference quantiles they span) or categories whose share
    moved most against their noise.

    >>> verdict_evidence(FeatureVerdict("x", "numeric", 0, 0, GateScores(), False, None, None, False, "none"))
    """
    deep = fv.deep
    if fv.details is not None and deep is not None:
        return {**_tests_evidence(fv), **fv.details}
    if fv.by_cusum and fv.cusum is not None:
        return {"test": "cusum", "statistic": _finite(max(fv.cusum.up, fv.cusum.down)), "p_value": None,
                "p_adjusted": _finite(fv.p_adjusted), "family": ["cusum_up", "cusum_down"], "effect": "z",
                "effect_size": _finite(fv.z), "moved": []}
    return _tests_evidence(fv)


def _tests_evidence(fv: FeatureVerdict) -> dict | None:
    """The deep tests' part of :func:`verdict_evidence` (None: none ran)."""
    deep = fv.deep
    if deep is None or deep.decided_by is None:
        return None
    top = deep.decided_by
    return {"test": top.name, "statistic": _finite(top.statistic), "p_value": _finite(top.pvalue),
            "p_adjusted": _finite(fv.p_adjusted), "family": [t.name for t in deep.tests],
            "effect": top.effect, "effect_size": _finite(top.effect_size),
            "moved": [{k: _finite(v) if isinstance(v, float) else v for k, v in r.as_dict().items()}
                      for r in deep.moved]}


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _kind_of(sketch: FeatureSketch) -> str:
    return "numeric" if is_numeric(sketch) else "categorical"
