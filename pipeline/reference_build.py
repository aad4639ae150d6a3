"""Build a ReferenceSet from a training snapshot: events cut into windows, summarized, calibrated.

The snapshot is a file of events in the contract's shape (JSONL, gzip JSONL, Parquet or Avro); the
events' predictions make the reference of the ``prediction`` feature (``monitor_prediction``).
Each model's events are cut into the configured event-time windows and summarized with the same
:class:`pipeline.summary.WindowRows` as replay; the gate is calibrated on those windows (leave one
out). A snapshot spanning fewer windows than the policy needs for calibration is cut into
``min_windows * 2`` equal slices in file order instead (documented fallback, slices interleaved in
file order: a training set often has no time axis). A categorical feature with more distinct values
than a window summary keeps gets a membership filter of every value in the raw events
(``sketches/profile.py``).

A model with ``segments`` also gets one reference per segment: its ``top`` segments by event
volume in the snapshot (ties by the key's sort order) and the other segment (the rest), each
built and calibrated like the model's from that segment's part of the same windows
(:meth:`pipeline.summary.WindowRows.summarize` with the top keys: the one assignment rule of
``pipeline/segments.py``).

With ``reference.season`` the set also keeps every window's summary (``ReferenceSet.windows``:
a live window is judged against those of its phase, ``pipeline/seasons.py``), and a snapshot
that does not cover enough seasons at every phase is refused (ConfigError naming the events and
``reference.season``); there is no fallback to slices in file order.

Memory stays bounded whatever the snapshot's size, as in the streaming job: a first pass
(:class:`SnapshotScan`) learns each model's windows, inferred kinds and segment volumes; the
second (:class:`ReferenceBuilder`) holds at most :data:`HELD_EVENTS` events, summarizes them into
partial window summaries and merges those as they come (a summary does not depend on how its
events were split into partials, ``pipeline/summary.py``: the reference's bytes are those of one
summary per whole window). What grows is one summary per window and, per categorical feature and
window, each distinct value's count.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from driftwarden.core.errors import ConfigError, InvalidEventError
from driftwarden.core.event_files import iter_raw_batches
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.summary import WindowRows, WindowSummary, merge_summaries
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.seasons import Season, check_reference_windows
from driftwarden.pipeline.segments import SegmentKey, fold_to_top, other_key, segment_keys, top_segments
from driftwarden.schemas.config import ModelConfig, MonitorConfig, WindowConfig, feature_kinds_lookup
from driftwarden.schemas.events import DEFAULT_RULES, Event, EventRules, validate_event
from driftwarden.sketches import DriftPolicy, Reference


_INFERRED = {str: "categorical", bool: "boolean", int: "numeric", float: "numeric"}
#: Events the second pass holds at most before summarizing them into partial window summaries.
HELD_EVENTS = 50_000
#: Events per batch handed to the builder by :func:`build_reference_set`.
_LIST_BATCH = 5000

#: A progress callback: the pass ("scan" or "build"), records read in it so far, the total (None: unknown).
Progress = Callable[[str, int, int | None], None]


def infer_feature_kinds(events: Iterable[Event]) -> dict[str, dict[str, str]]:
    """Per model, each feature's kind from its values: strings categorical, booleans boolean, numbers numeric
    (lists and objects are not features)."""
    scan = SnapshotScan(None)
    scan.add(list(events))
    return scan.kinds_by_model()


@dataclass
class SnapshotScan:
    """What a first pass over a snapshot learns: per model its events, window starts, inferred feature kinds
    and (when ``config`` segments it) each segment's event volume; ``config`` None: kinds are inferred."""

    config: MonitorConfig | None
    events: Counter = field(default_factory=Counter)
    starts: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    kinds: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    volumes: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, events: Sequence[Event]) -> None:
        """Learn from a batch of valid events (in file order)."""
        window_ms = (self.config.window if self.config else WindowConfig()).size_ms
        by_model: dict[str, list[Event]] = defaultdict(list)
        for event in events:
            self.events[event.model] += 1
            self.starts[event.model].add(window_start(event.event_ms, window_ms))
            by_model[event.model].append(event)
            seen = self.kinds[event.model]
            for name, value in event.features.items():
                if name not in seen and type(value) in _INFERRED:
                    seen[name] = _INFERRED[type(value)]
        for name, model_events in by_model.items():
            model = self.config.model(name) if self.config else None
            if model is not None and model.segments is not None:
                self.volumes[name].update(_segment_keys(model_events, model))

    def kinds_by_model(self) -> dict[str, dict[str, str]]:
        """Each model's inferred feature kinds, models in the order they first came."""
        return {model: self.kinds[model] for model in self.events}


@dataclass
class _Window:
    """One reference window (or slice) of one model: its summary so far, the events not yet in it, the
    categorical values' counts (per folded segment key, None: the whole window)."""

    summarized: int = 0
    summary: WindowSummary | None = None
    held: list[Event] = field(default_factory=list)
    counts: dict[SegmentKey | None, dict[str, Counter]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))


class _ModelWindows:
    """A model's windows (or slices) as its events come, each event's sample key its rank in its window."""

    def __init__(self, name: str, model: ModelConfig, scan: SnapshotScan, window_ms: int,
                 policy: DriftPolicy, slices: bool = True) -> None:
        self.name, self.model, self.window_ms = name, model, window_ms
        few = slices and len(scan.starts[name]) < policy.min_windows
        self.slices = policy.min_windows * 2 if few else None
        self.top = (top_segments(scan.volumes[name], model.segments.top)
                    if model.segments is not None else None)
        self.categorical = [n for n, kind in model.features.items() if kind == "categorical"]
        self.seen = 0
        self.windows: dict[int, _Window] = defaultdict(_Window)

    def add(self, event: Event) -> None:
        """Hold one event in its window (or slice: its rank in the model's events modulo the slices)."""
        key = self.seen % self.slices if self.slices else window_start(event.event_ms, self.window_ms)
        self.seen += 1
        self.windows[key].held.append(event)

    def flush(self) -> None:
        """Summarize every window's held events and merge them into its summary so far."""
        for start, window in self.windows.items():
            if window.held:
                self._flush(start, window)

    def _flush(self, start: int, window: _Window) -> None:
        rows = WindowRows(self.model)
        for rank, event in enumerate(window.held, start=window.summarized):
            rows.add(event.features, (rank,), prediction=event.prediction)
        partial = rows.summarize(self.name, start, self.window_ms, self.top)
        window.summary = partial if window.summary is None else merge_summaries([window.summary, partial])
        self._count_values(window)
        window.summarized += len(window.held)
        window.held = []

    def _count_values(self, window: _Window) -> None:
        """Add the held events' categorical values to the window's counts (and to their segment's)."""
        folded = (fold_to_top(_segment_keys(window.held, self.model), self.top) if self.top is not None
                  else [None] * len(window.held))
        for event, key in zip(window.held, folded):
            for name in self.categorical:
                value = event.features.get(name)
                if isinstance(value, str):
                    window.counts[None][name][value] += 1
                    if key is not None:
                        window.counts[key][name][value] += 1

    def summaries(self) -> list[tuple[int, WindowSummary]]:
        """Each whole window's start and summary, oldest first (the held events summarized first)."""
        self.flush()
        return [(key, self.windows[key].summary) for key in sorted(self.windows)]

    def references(self, policy: DriftPolicy) -> tuple[Reference, dict[SegmentKey, Reference] | None]:
        """The model's reference, and its segments' (None when it has none), from its whole windows."""
        self.flush()
        windows = [self.windows[key] for key in sorted(self.windows)]
        model = self._reference([(w.summary, w.counts[None]) for w in windows], policy)
        if self.top is None:
            return model, None
        segments = {}
        for key in (*self.top, other_key(self.model.segments.by)):
            parts = [(w.summary.segments[key], w.counts[key]) for w in windows if key in w.summary.segments]
            if parts:
                segments[key] = self._reference(parts, policy)
        return model, segments

    def _reference(self, parts: list[tuple[WindowSummary, dict[str, Counter]]], policy: DriftPolicy) -> Reference:
        """One reference out of window summaries and each window's categorical value counts."""
        counts = {name: [dict(c[name]) if name in c else {} for _, c in parts] for name in self.categorical}
        return reference_from_summaries([s for s, _ in parts], self.model.sketch_kinds, policy, counts,
                                        prediction=self.model.monitor_prediction)


class ReferenceBuilder:
    """The second pass: events summarized by window as they come, at most :data:`HELD_EVENTS` held."""

    def __init__(self, config: MonitorConfig, policy: DriftPolicy, scan: SnapshotScan,
                 where: str = "the reference events") -> None:
        self.policy, self.where, self.season = policy, where, Season.of(config)
        self.window_ms = config.window.size_ms
        self.models = {name: _ModelWindows(name, model, scan, self.window_ms, policy, self.season is None)
                       for name in scan.events if (model := config.model(name)) is not None}
        self.held = 0

    def add(self, events: Sequence[Event]) -> None:
        """Take a batch of valid events (in file order, the same events as the scan saw)."""
        for event in events:
            windows = self.models.get(event.model)
            if windows is not None:
                windows.add(event)
                self.held += 1
        if self.held >= HELD_EVENTS:
            for windows in self.models.values():
                windows.flush()
            self.held = 0

    def finish(self) -> ReferenceSet:
        """The references of every configured model seen (and of its segments when it has any)."""
        references = ReferenceSet()
        for name, windows in self.models.items():
            if self.season is not None:
                summaries = windows.summaries()
                check_reference_windows([start for start, _ in summaries], self.window_ms, self.season, name,
                                        self.where)
                references.windows[name] = [summary for _, summary in summaries]
                references.window_ms[name] = self.window_ms
            references.models[name], segments = windows.references(self.policy)
            if segments is not None:
                references.segment_by[name] = windows.model.segments.by
                references.segments[name] = segments
        return references


def build_reference_set(events: list[Event], config: MonitorConfig, policy: DriftPolicy,
                        where: str = "the reference events") -> ReferenceSet:
    """References of every configured model found in ``events`` (and of its segments when it has any; with a
    season, their windows too); ``where`` names the events in errors."""
    batches = [events[i:i + _LIST_BATCH] for i in range(0, len(events), _LIST_BATCH)]
    scan = SnapshotScan(config)
    for batch in batches:
        scan.add(batch)
    builder = ReferenceBuilder(config, policy, scan, where)
    for batch in batches:
        builder.add(batch)
    return builder.finish()


@dataclass
class SnapshotBuild:
    """A reference built from a snapshot file: the config used (inferred when none was given), the
    references, and the records read and rejected."""

    config: MonitorConfig
    references: ReferenceSet
    read: int
    rejected: int


def build_reference_file(path: str | Path, config: MonitorConfig | None,
                         inferred_config: Callable[[dict[str, dict[str, str]]], MonitorConfig],
                         policy_of: Callable[[MonitorConfig], DriftPolicy],
                         progress: Progress | None = None, where: str | None = None) -> SnapshotBuild:
    """Read ``path`` twice (scan, then build) in batches, never whole: the references of its events.

    ``config`` None: the feature kinds are inferred from the events and ``inferred_config`` makes the
    config of them; ``policy_of``: the drift policy of a config; ``where`` names the file in errors (default: its path).
    """
    report = progress or (lambda _pass, _read, _total: None)
    rules = EventRules.of(config.source) if config else DEFAULT_RULES
    kinds_of = feature_kinds_lookup(config) if config else (lambda _model: None)
    scan, counts = SnapshotScan(config), {"read": 0, "rejected": 0}
    for events in _valid_batches(path, rules, kinds_of, counts):
        scan.add(events)
        report("scan", counts["read"], None)
    if not scan.events:
        raise ConfigError(f"{path}: no valid events ({counts['rejected']} rejected)")
    config = config or inferred_config(scan.kinds_by_model())
    builder = ReferenceBuilder(config, policy_of(config), scan, where or str(path))
    total, built = counts["read"], {"read": 0, "rejected": 0}
    for events in _valid_batches(path, rules, kinds_of, built):
        builder.add(events)
        report("build", built["read"], total)
    return SnapshotBuild(config, builder.finish(), counts["read"], counts["rejected"])


def _valid_batches(path: str | Path, rules: EventRules, kinds_of, counts: dict[str, int]) -> Iterator[list[Event]]:
    """Each batch of the file's valid events; ``counts`` gains the records read and rejected."""
    for batch in iter_raw_batches(path):
        events = []
        for _coordinates, raw in batch:
            try:
                events.append(validate_event(raw, kinds_of, rules))
            except InvalidEventError:
                counts["rejected"] += 1
        counts["read"] += len(batch)
        yield events


def _segment_keys(events: list[Event], model: ModelConfig) -> list[SegmentKey]:
    """Each event's segment key (not folded), in event order."""
    rows = WindowRows(model)
    for line, event in enumerate(events):
        rows.add(event.features, (line,))
    return segment_keys(rows.columns(), model.segments.by)
