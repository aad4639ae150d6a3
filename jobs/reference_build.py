"""Build a ReferenceSet from a training snapshot: events cut into windows, summarized, calibrated.

The snapshot is a file of events in the contract's shape (JSONL, gzip JSONL or Parquet); the
events' predictions make the reference of the ``prediction`` feature (``monitor_prediction``).
Each model's events are cut into the configured event-time windows and summarized with the
same :func:`jobs.pipeline.summarize_window` as the streaming job; the gate is calibrated on
those windows (leave one out). A snapshot spanning fewer windows than the policy needs for
calibration is cut into ``min_windows * 2`` equal slices in file order instead (documented
fallback, slices interleaved in file order: a training set often has no time axis). A categorical
feature with more distinct values than a window summary keeps gets a membership filter of every
value in the raw events (``sketches/profile.py``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from jobs.pipeline import summarize_window, window_start
from jobs.references import ReferenceSet, reference_from_summaries
from schemas.config import ModelConfig, MonitorConfig
from schemas.events import Event
from sketches import DriftPolicy
from sketches.reference import value_counts


def infer_feature_kinds(events: Iterable[Event]) -> dict[str, dict[str, str]]:
    """Per model, each feature's kind from its values: strings categorical, numbers numeric."""
    kinds: dict[str, dict[str, str]] = defaultdict(dict)
    for event in events:
        seen = kinds[event.model]
        for name, value in event.features.items():
            if value is not None and name not in seen:
                seen[name] = "categorical" if isinstance(value, str) else "numeric"
    return dict(kinds)


def build_reference_set(events: list[Event], config: MonitorConfig, policy: DriftPolicy) -> ReferenceSet:
    """References of every configured model found in ``events``."""
    by_model: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_model[event.model].append(event)
    models = {}
    for name, model_events in by_model.items():
        model_config = config.model(name)
        if model_config is not None:
            groups = _window_groups(model_events, config.window.size_ms, policy)
            summaries = [summarize_window(name, start, config.window.size_ms, [e.features for e in group],
                                          model_config, [e.prediction for e in group]) for start, group in groups]
            models[name] = reference_from_summaries(summaries, model_config.monitored, policy,
                                                    _value_counts(groups, model_config),
                                                    prediction=model_config.monitor_prediction)
    return ReferenceSet(models)


def _window_groups(events: list[Event], window_ms: int, policy: DriftPolicy) -> list[tuple[int, list[Event]]]:
    groups: Mapping[int, list[Event]] = defaultdict(list)
    for event in events:
        groups[window_start(event.event_ms, window_ms)].append(event)
    if len(groups) < policy.min_windows:
        slices = policy.min_windows * 2
        groups = {i: events[i::slices] for i in range(slices) if events[i::slices]}
    return sorted(groups.items())


def _value_counts(groups: list[tuple[int, list[Event]]], model: ModelConfig) -> dict[str, list[dict[str, int]]]:
    """Per categorical feature, each window's count of every value: the raw events see them all."""
    names = [n for n, kind in model.features.items() if kind == "categorical"]
    return {name: [value_counts([e.features.get(name) for e in group if isinstance(e.features.get(name), str)])
                   for _, group in groups] for name in names}
