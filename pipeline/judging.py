"""Judging one window: gate every feature against its reference, deep-test the alarms, adjust, decide.

:func:`judge_window` is the one way the live job, replay and the notebook front door judge a
window: its reference (``pipeline/references.py``), then :func:`analyze_summary` on its
:class:`pipeline.summary.WindowSummary`, which is also what a notebook calls by hand; the statistics are
``sketches.analyze_segments``'; this module chooses what is judged (the prediction, segments and
their references), applies the monitor's budget (:func:`drift_policy`) and turns the verdicts into
the :class:`core.records.WindowReport` the store and alerting take.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.pipeline.references import References
from driftwarden.pipeline.segments import segment_mapping
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.pipeline.window_store import WindowStore
from driftwarden.schemas.config import ModelConfig, ThresholdConfig
from driftwarden.schemas.events import PREDICTION, utc_from_ms
from driftwarden.sketches import DriftPolicy, FeatureVerdict, Reference, analyze_segments
from driftwarden.sketches.analysis import not_judged, verdict_evidence
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.feature import FeatureSketch, is_numeric
from driftwarden.sketches.policy import budget_alpha
from driftwarden.sketches.reference import FeatureReference, baseline_unseen_share
from driftwarden.sketches.sequential import CusumState

log = logging.getLogger(__name__)

__all__ = ["analyze_summary", "cardinality_evidence", "cusum_state", "drift_policy", "feature_outcome",
           "judge_window", "judged_features", "segment_references"]


def drift_policy(thresholds: ThresholdConfig, window_ms: int | None = None) -> DriftPolicy:
    """The sketches' DriftPolicy from the config's thresholds section and the window length.

    ``alpha``: the configured one, else derived from ``false_alerts_per_week`` at one window per
    ``window_ms`` (:func:`sketches.policy.budget_alpha`), split in two equal halves: one for the
    per-window tests (Benjamini-Hochberg level), one for the slow-drift CUSUM
    (``sketches/sequential.py``); without a window length (building a reference, which never
    judges) DriftPolicy's default, CUSUM off.
    """
    alpha, sequential = thresholds.alpha, 0.0
    if alpha is None and window_ms:
        alpha = sequential = budget_alpha(thresholds.false_alerts_per_week, window_ms) / 2
    elif alpha is None:
        alpha = DriftPolicy.alpha
    return DriftPolicy(alpha=alpha, sequential_alpha=sequential, psi_minor=thresholds.psi_minor, psi_major=thresholds.psi_major,
                       false_alarm_rate=thresholds.false_alarm_rate, bins=thresholds.bins,
                       min_count=thresholds.min_count)


def judge_window(summary: WindowSummary, references: References, windows: WindowStore,
                 state: Mapping[str, CusumState] | None = None) -> tuple[WindowReport, Reference]:
    """Judge one window against the reference the monitor chooses for it; the report, and that reference.

    The one sequence of the live job, replay and the front door: the window's reference
    (:meth:`References.reference_for`; empty: counted, not judged), the window kept for later
    warm-up or rolling references (:meth:`References.remember`), its segments' references, then
    :func:`analyze_summary` from each feature's CUSUM ``state`` after the model's previous window.
    """
    reference = references.reference_for(summary.model, summary.window_start_ms, windows)
    references.remember(summary, windows)
    start = summary.window_start_ms
    segments = segment_references(summary, lambda model, key: references.segment_reference(model, key, start),
                                  references.config.model(summary.model))
    return analyze_summary(summary, reference, references.policy, state, *segments), reference


def analyze_summary(summary: WindowSummary, reference: Reference, policy: DriftPolicy,
                    state: Mapping[str, CusumState] | None = None,
                    segment_references: Mapping[tuple[str, ...], Reference] | None = None,
                    segment_min_count: int = 200) -> WindowReport:
    """Gate, deep-test and judge one window against the reference, given each feature's CUSUM after the previous window.

    A segmented summary (``summary.segments``) is judged with its segments under one false-alarm
    budget (:func:`sketches.analyze_segments`: hierarchical FDR over features x segments): each
    segment with at least ``segment_min_count`` events against its own reference in
    ``segment_references``. The report lists the global outcomes, then each segment's (their
    ``segment``: ``{by feature: value}``).

    Never raises on a summary it could decode: a feature whose judging raised is reported "not judged"
    (:attr:`FeatureOutcome.error`) and logged once with the model and window, and the rest is judged.
    """
    reference, features = judged_features(summary, reference)
    windows = {key: judged_features(seg, reference)[1] for key, seg in summary.segments.items()}
    segment_groups = {key: seg.groups for key, seg in summary.segments.items()}
    _say_if_segment_groups_skipped(summary, reference, segment_references or {})
    try:
        verdicts, by_segment = analyze_segments(features, windows, reference, segment_references or {}, policy,
                                                segment_min_count, state, summary.groups, segment_groups)
    except Exception as exc:  # noqa: BLE001 - a step across features failed: every feature not judged, none lost
        verdicts, by_segment = _none_judged(features, reference, exc), {
            key: _none_judged(seg, (segment_references or {}).get(key) or Reference(), exc)
            for key, seg in windows.items()}
    _log_errors(summary, verdicts, by_segment)
    outcomes = [value_facts(feature_outcome(v, cardinality_evidence(reference.features.get(v.name),
                                                                    summary.sketches.get(v.name))), summary)
                for v in verdicts]
    for key, segment_verdicts in by_segment.items():
        ref = (segment_references or {}).get(key) or Reference()
        segment = summary.segments[key]
        mapping = segment_mapping(summary.segment_by, key)
        outcomes += [value_facts(feature_outcome(v, cardinality_evidence(ref.features.get(v.name),
                                                                         segment.sketches.get(v.name)), mapping), segment)
                     for v in segment_verdicts]
    return WindowReport(model=summary.model, window_start=utc_from_ms(summary.window_start_ms),
                        window_end=utc_from_ms(summary.window_end_ms), features=outcomes)


#: Models whose segment references were found without groups (said once each; see :func:`analyze_summary`).
_SEGMENT_GROUPS_SKIPPED: set[str] = set()


def _say_if_segment_groups_skipped(summary: WindowSummary, reference: Reference,
                                   segment_references: Mapping[tuple[str, ...], Reference]) -> None:
    """Log once per model when its reference judges groups but a segment reference has none (a reference
    built before groups were calibrated per segment): those segments' groups are not judged; rebuild it."""
    if not reference.groups or summary.model in _SEGMENT_GROUPS_SKIPPED:
        return
    without = [key for key, ref in segment_references.items()
               if not ref.groups and key in summary.segments and summary.segments[key].groups]
    if without:
        _SEGMENT_GROUPS_SKIPPED.add(summary.model)
        log.warning("model %r: %d segment reference(s) have no multivariate groups (a reference built before groups "
                    "were calibrated per segment): their groups are judged on the global view only; rebuild the "
                    "reference (driftwarden reference build) to judge them per segment", summary.model[:200],
                    len(without))


def value_facts(outcome: FeatureOutcome, summary: WindowSummary) -> FeatureOutcome:
    """The outcome with what the window says of its values beside the verdict: its kind as configured
    (boolean), its invalid values (count and examples) and, for a boolean feature, its true values."""
    tally = summary.invalid.get(outcome.name)
    boolean = outcome.name in summary.booleans
    if tally is None and not boolean:
        return outcome
    sketch = summary.sketches.get(outcome.name)
    true_count = sketch.estimate("true") if boolean and isinstance(sketch, CategoricalSketch) else None
    return replace(outcome, kind="boolean" if boolean else outcome.kind, true_count=true_count,
                   invalid=tally.count if tally else 0,
                   invalid_examples=tuple(tally.as_dicts()) if tally else ())


def _none_judged(features: Mapping[str, tuple], reference: Reference, exc: BaseException) -> list[FeatureVerdict]:
    """Every feature of a window (the reference's first) "not judged" because of ``exc``."""
    names = list(reference.features) + [n for n in features if n not in reference.features]
    return [not_judged(name, reference.features[name].kind if name in reference.features else
                       ("numeric" if is_numeric(features[name][0]) else "categorical"), features.get(name), exc)
            for name in names]


def _log_errors(summary: WindowSummary, verdicts: Sequence[FeatureVerdict],
                by_segment: Mapping[tuple[str, ...], Sequence[FeatureVerdict]]) -> None:
    """Log each feature that could not be judged, once, with its model, segment, window and traceback."""
    cells = [(None, v) for v in verdicts] + [(key, v) for key, vs in by_segment.items() for v in vs]
    for key, v in cells:
        if v.error is not None:
            where = f" segment {dict(zip(summary.segment_by, key))!r}" if key is not None else ""
            log.error("feature %r of model %r%s, window %s: %s", v.name[:200], summary.model[:200], where,
                      utc_from_ms(summary.window_start_ms).isoformat(), v.error, exc_info=v.exception)


def segment_references(summary: WindowSummary, lookup: Callable[[str, tuple[str, ...]], Reference | None],
                       config: ModelConfig | None) -> tuple[dict[tuple[str, ...], Reference], int]:
    """The two segment arguments of :func:`analyze_summary` for ``summary``: each of its segments'
    reference (``lookup(model, key)``; segments without one are left out) and the model's
    ``segments.min_count`` (the live job and replay both call this)."""
    if not summary.segments or config is None or config.segments is None:
        return {}, 0
    references = {key: lookup(summary.model, key) for key in summary.segments}
    return {key: ref for key, ref in references.items() if ref is not None}, config.segments.min_count


def judged_features(summary: WindowSummary, reference: Reference) -> tuple[Reference, dict]:
    """The reference and the window's features that one window is judged on and reports: all, less
    the prediction where it has nothing to say: not monitored (the summary has none, so a reference's
    prediction is ignored), or carried by neither the window's events nor the reference."""
    sketch = summary.sketches.get(PREDICTION)
    if sketch is None and PREDICTION in reference.features:
        return Reference({n: f for n, f in reference.features.items() if n != PREDICTION}, reference.groups), \
            summary.features
    if sketch is None or PREDICTION in reference.features or sketch.missing < sketch.count:
        return reference, summary.features
    return reference, {name: pair for name, pair in summary.features.items() if name != PREDICTION}


def cardinality_evidence(ref: FeatureReference | None, sketch: FeatureSketch | None, top: int = 5) -> dict:
    """For a high-cardinality categorical feature: the reference's own unseen-value share, the head values that moved."""
    if ref is None or ref.profile is None or not isinstance(sketch, CategoricalSketch):
        return {}
    return {"unseen_baseline": baseline_unseen_share(ref), "moved_values": tuple(ref.profile.moved(sketch, top))}


def feature_outcome(v: FeatureVerdict, evidence: dict | None = None,
                    segment: Mapping[str, str] | None = None) -> FeatureOutcome:
    """Flatten a sketches FeatureVerdict (and :func:`cardinality_evidence`) into alerting's FeatureOutcome record
    (of a segment: ``{by feature: value}``)."""
    deep = v.deep
    return FeatureOutcome(**(evidence or {}), segment=segment,
        name=v.name, kind=v.kind, count=v.count, missing=v.missing,
        gate_ks=v.gate.ks, gate_psi=v.gate.psi, gate_emd=v.gate.emd, alarm=v.alarm,
        ks_stat=deep.ks_stat if deep else None, ks_pvalue=deep.ks_pvalue if deep else None,
        psi=deep.psi if deep else None, emd=deep.emd if deep else None,
        p_adjusted=v.p_adjusted, drifted=v.drifted, severity=v.severity,
        gate_ks_bound=v.gate.ks_bound, gate_chi2=v.gate.chi2, gate_js=v.gate.js, gate_new_share=v.gate.new_share,
        gate_missing_delta=v.gate.missing_delta,
        chi2_stat=deep.chi2_stat if deep else None, chi2_pvalue=deep.chi2_pvalue if deep else None,
        evidence=verdict_evidence(v),
        cusum_up=v.cusum.up if v.cusum is not None else None,
        cusum_down=v.cusum.down if v.cusum is not None else None,
        error=v.error,
    )


def cusum_state(report: WindowReport) -> dict[str, CusumState]:
    """Each feature's CUSUM after a judged window: the state the next window of the model starts from."""
    return {f.name: CusumState(f.cusum_up, f.cusum_down or 0.0) for f in report.features if f.cusum_up is not None}

