"""Build a ReferenceSet from a training snapshot: events cut into windows, summarized, calibrated.

The snapshot is a file of events in the contract's shape (JSONL, gzip JSONL or Parquet); the
events' predictions make the reference of the ``prediction`` feature (``monitor_prediction``).
Each model's events are cut into the configured event-time windows and summarized with the
same :func:`pipeline.summary.summarize_window` as the streaming job; the gate is calibrated on
those windows (leave one out). A snapshot spanning fewer windows than the policy needs for
calibration is cut into ``min_windows * 2`` equal slices in file order instead (documented
fallback, slices interleaved in file order: a training set often has no time axis). A categorical
feature with more distinct values than a window summary keeps gets a membership filter of every
value in the raw events (``sketches/profile.py``).

A model with ``segments`` also gets one reference per segment: its ``top`` segments by event
volume in the snapshot (ties by the key's sort order) and the other segment (the rest), each
built and calibrated like the model's from that segment's part of the same windows
(:meth:`pipeline.summary.WindowRows.summarize` with the top keys: the one assignment rule of
``pipeline/segments.py``).

With ``reference.season`` the set also keeps every window's summary (``ReferenceSet.windows``:
a live window is judged against those of its phase, ``pipeline/seasons.py``), and a snapshot
that does not cover enough seasons at every phase is refused (ConfigError naming the events and
``reference.season``); there is no fallback to slices in file order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable, Mapping

from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.summary import WindowRows, WindowSummary, summarize_window
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.seasons import Season, check_reference_windows
from driftwarden.pipeline.segments import SegmentKey, fold_to_top, other_key, segment_keys, top_segments
from driftwarden.schemas.config import ModelConfig, MonitorConfig
from driftwarden.schemas.events import Event
from driftwarden.sketches import DriftPolicy, Reference
from driftwarden.sketches.reference import value_counts


_INFERRED = {str: "categorical", bool: "boolean", int: "numeric", float: "numeric"}


def infer_feature_kinds(events: Iterable[Event]) -> dict[str, dict[str, str]]:
    """Per model, each feature's kind from its values: strings categorical, booleans boolean, numbers numeric
    (lists and objects are not features)."""
    kinds: dict[str, dict[str, str]] = defaultdict(dict)
    for event in events:
        seen = kinds[event.model]
        for name, value in event.features.items():
            if name not in seen and type(value) in _INFERRED:
                seen[name] = _INFERRED[type(value)]
    return dict(kinds)


def build_reference_set(events: list[Event], config: MonitorConfig, policy: DriftPolicy,
                        where: str = "the reference events") -> ReferenceSet:
    """References of every configured model found in ``events`` (and of its segments when it has any; with a
    season, their windows too); ``where`` names the events in errors."""
    by_model: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_model[event.model].append(event)
    references = ReferenceSet()
    season = Season.of(config)
    for name, model_events in by_model.items():
        model_config = config.model(name)
        if model_config is None:
            continue
        groups = _window_groups(model_events, config.window.size_ms, policy, season is None)
        keys = _segment_keys(model_events, model_config)
        top = top_segments(Counter(keys), model_config.segments.top) if keys is not None else None
        summaries = [summarize_window(name, start, config.window.size_ms, [e.features for e in group],
                                      model_config, [e.prediction for e in group], top) for start, group in groups]
        if season is not None:
            check_reference_windows([start for start, _ in groups], config.window.size_ms, season, name, where)
            references.windows[name], references.window_ms[name] = summaries, config.window.size_ms
        references.models[name] = _reference(summaries, groups, model_config, policy)
        if top is not None:
            references.segment_by[name] = model_config.segments.by
            folded = dict(zip(map(id, model_events), fold_to_top(keys, top)))
            references.segments[name] = _segment_references(summaries, groups, folded, top, model_config, policy)
    return references


def _reference(summaries: list[WindowSummary], groups: list[tuple[int, list[Event]]], model: ModelConfig,
               policy: DriftPolicy) -> Reference:
    """One reference out of window summaries and the events they were built from."""
    return reference_from_summaries(summaries, model.sketch_kinds, policy, _value_counts(groups, model),
                                    prediction=model.monitor_prediction)


def _segment_keys(events: list[Event], model: ModelConfig) -> list[SegmentKey] | None:
    """Each event's segment key (not folded), in event order; None for a model without segments."""
    if model.segments is None:
        return None
    rows = WindowRows(model)
    for line, event in enumerate(events):
        rows.add(event.features, (line,))
    return segment_keys(rows.columns(), model.segments.by)


def _segment_references(summaries: list[WindowSummary], groups: list[tuple[int, list[Event]]],
                        folded: dict[int, SegmentKey], top: tuple[SegmentKey, ...], model: ModelConfig,
                        policy: DriftPolicy) -> dict[SegmentKey, Reference]:
    """The reference of each top segment (volume order), then of the other segment when it has events;
    ``folded``: each event's folded segment key by ``id(event)``."""
    references = {}
    for key in (*top, other_key(model.segments.by)):
        windows = [(s.segments[key], (start, [e for e in group if folded[id(e)] == key]))
                   for s, (start, group) in zip(summaries, groups) if key in s.segments]
        if windows:
            references[key] = _reference([w for w, _ in windows], [g for _, g in windows], model, policy)
    return references


def _window_groups(events: list[Event], window_ms: int, policy: DriftPolicy,
                   slices: bool = True) -> list[tuple[int, list[Event]]]:
    """The events by event-time window, oldest first; with ``slices``, fewer windows than the policy
    calibrates on become ``min_windows * 2`` slices in file order (no seasonal reference takes that)."""
    groups: Mapping[int, list[Event]] = defaultdict(list)
    for event in events:
        groups[window_start(event.event_ms, window_ms)].append(event)
    if slices and len(groups) < policy.min_windows:
        slices = policy.min_windows * 2
        groups = {i: events[i::slices] for i in range(slices) if events[i::slices]}
    return sorted(groups.items())


def _value_counts(groups: list[tuple[int, list[Event]]], model: ModelConfig) -> dict[str, list[dict[str, int]]]:
    """Per categorical feature, each window's count of every value: the raw events see them all."""
    names = [n for n, kind in model.features.items() if kind == "categorical"]
    return {name: [value_counts([e.features.get(name) for e in group if isinstance(e.features.get(name), str)])
                   for _, group in groups] for name in names}
