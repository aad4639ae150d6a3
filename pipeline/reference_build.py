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

Memory stays bounded whatever the snapshot's size, as in the streaming job, and each record is
parsed once: a first pass (:class:`SnapshotScan`) validates each batch into each configured model's
columns (:mod:`pipeline.reference_rows`), learns the models' windows and segment volumes from them
and keeps the columns in a temporary file; the second (:class:`ReferenceBuilder`) reads them back,
holds at most :data:`HELD_EVENTS` events, summarizes them into partial window summaries and merges
those as they come (a summary does not depend on how its events were split into partials,
``pipeline/summary.py``: the reference's bytes are those of one summary per whole window). Without a
config the scan infers the kinds from the events and keeps the valid events themselves in the
temporary file (:class:`pipeline.reference_rows.EventSpill`); the build makes their rows with the
inferred kinds.

A window is finished once no rows came to it in the last flush. Finished windows' summaries stay in
memory while they add up to at most :data:`HELD_SUMMARY_BYTES` serialized; past that every one is
written to a temporary file (:class:`pipeline.reference_rows.BlobFile`). Calibration takes as many
features at a time as keep that bound: all of them, from the whole summaries, when they fit; else
each window's summary is cut into one part per group of features, kept in that file until the
group's turn. What memory holds besides the flush's rows is about that bound of window summaries
(some 5x their serialized bytes), the leave-one-out merges of one feature at a time and, per
categorical feature and window, each distinct value's count. Input in time order keeps few windows
open at once; in shuffled order every window stays in memory until the end. A seasonal reference
keeps every window's summary whole (``ReferenceSet.windows``).
"""

from __future__ import annotations

import gc
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftwarden.core.errors import ConfigError, InvalidEventError
from driftwarden.core.event_files import iter_raw_batches
from driftwarden.core.gc_pause import gc_paused
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.summary import WindowRows, WindowSummary, merge_summaries
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.seasons import Season, check_reference_windows
from driftwarden.pipeline.reference_rows import BlobFile, EventSpill, ModelRows, RowSpill, model_rows
from driftwarden.pipeline.segments import SegmentKey, other_key, segment_members, segment_volumes, top_segments
from driftwarden.schemas.config import ModelConfig, MonitorConfig, WindowConfig, feature_kinds_lookup
from driftwarden.schemas.events import DEFAULT_RULES, Event, EventRules, InvalidValue, validate_event
from driftwarden.sketches import DriftPolicy, Reference
from driftwarden.sketches.sample import EventSample


_INFERRED = {str: "categorical", bool: "boolean", int: "numeric", float: "numeric"}
#: Events the second pass holds at most before summarizing them into partial window summaries.
HELD_EVENTS = 50_000
#: Bytes (serialized) of whole windows' summaries the second pass keeps in memory before it writes them to its
#: temporary file, and that calibration holds at once (about 5x as many bytes as objects): 16 MiB is about 390
#: windows of 13 features (43 KiB serialized, about 220 KiB in memory).
HELD_SUMMARY_BYTES = 16 * 2**20
#: Finished windows between two measures of a summary's serialized size (the first one is measured).
_MEASURE_EVERY = 16
#: Batches between two collections of cycles while the collector is paused (as replay: ``replay/run.py``).
GC_EVERY_BATCHES = 200
#: Events per batch handed to the builder by :func:`build_reference_set`.
_LIST_BATCH = 5000

#: A progress callback: the pass ("scan": records read; "build": valid events of configured models built), how
#: many so far, the total (None: unknown).
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

    @property
    def window_ms(self) -> int:
        """The configured window's length (the default's without a config)."""
        return (self.config.window if self.config else WindowConfig()).size_ms

    def add(self, events: Sequence[Event]) -> None:
        """Learn from a batch of valid events (in file order) without a config: their kinds too."""
        times: dict[str, list[int]] = defaultdict(list)
        for event in events:
            times[event.model].append(event.event_ms)
            seen = self.kinds[event.model]
            if seen.keys() >= event.features.keys():  # every feature's kind known already (the common case)
                continue
            for name, value in event.features.items():
                if name not in seen and type(value) in _INFERRED:
                    seen[name] = _INFERRED[type(value)]
        for model, event_ms in times.items():
            self.events[model] += len(event_ms)
            starts = window_start(np.array(event_ms, dtype=np.int64), self.window_ms)
            self.starts[model].update(np.unique(starts).tolist())

    def add_rows(self, rows: Mapping[str, ModelRows]) -> None:
        """Learn from a batch of configured models' rows."""
        for name, model in rows.items():
            self.events[name] += len(model)
            self.starts[name].update(np.unique(window_start(model.event_ms, self.window_ms)).tolist())
            segments = self.config.model(name).segments
            if segments is not None:
                self.volumes[name].update(segment_volumes(model.columns, segments.by))

    def kinds_by_model(self) -> dict[str, dict[str, str]]:
        """Each model's inferred feature kinds, models in the order they first came."""
        return {model: self.kinds[model] for model in self.events}


@dataclass
class _Window:
    """One reference window (or slice) of one model: its summary so far, the rows not yet in it (batches and
    their members' indices), the categorical values' counts (per folded segment key, None: the whole window)."""

    summarized: int = 0
    #: the summary so far: an object while rows came in the last flush and while finished windows fit in memory,
    #: else serialized to a file (its handle)
    summary: WindowSummary | tuple[int, int] | None = None
    #: no rows came to it in the last flush (its summary counts among the kept ones)
    finished: bool = False
    held: list[tuple[ModelRows, np.ndarray]] = field(default_factory=list)
    counts: dict[SegmentKey | None, dict[str, Counter]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))


class _ModelWindows:
    """A model's windows (or slices) as its rows come, each event's sample key its rank in its window."""

    def __init__(self, name: str, model: ModelConfig, scan: SnapshotScan, window_ms: int,
                 policy: DriftPolicy, kept: "_KeptSummaries", slices: bool = True) -> None:
        self.name, self.model, self.window_ms, self.kept, self.blobs = name, model, window_ms, kept, kept.blobs
        few = slices and len(scan.starts[name]) < policy.min_windows
        self.slices = policy.min_windows * 2 if few else None
        self.top = (top_segments(scan.volumes[name], model.segments.top)
                    if model.segments is not None else None)
        self.categorical = [n for n, kind in model.features.items() if kind == "categorical"]
        self.seen = 0
        self.windows: dict[int, _Window] = defaultdict(_Window)

    def add(self, rows: ModelRows) -> None:
        """Hold a batch's rows in their windows (or slices: each event's rank in the model's events modulo
        the slices), in file order within each."""
        ranks = np.arange(self.seen, self.seen + len(rows), dtype=np.int64)
        keys = ranks % self.slices if self.slices else window_start(rows.event_ms, self.window_ms)
        self.seen += len(rows)
        order = np.argsort(keys, kind="stable")
        starts, bounds = np.unique(keys[order], return_index=True)
        for key, members in zip(starts.tolist(), np.split(order, bounds[1:])):
            self.windows[key].held.append((rows, members))

    def flush(self) -> None:
        """Summarize every window's held rows and merge them into its summary so far; the summaries of the
        windows that had none are finished: kept in memory while they fit :data:`HELD_SUMMARY_BYTES`, else
        serialized to the file (:class:`_KeptSummaries`)."""
        for start, window in self.windows.items():
            if window.held:
                if window.finished:
                    self.kept.reopen(window)
                self._flush(start, window)
            elif not window.finished and window.summary is not None:
                window.finished = True
                self.kept.finish(window)
        if self.kept.spilling:
            for window in self.windows.values():
                if window.finished and isinstance(window.summary, WindowSummary):
                    window.summary = self.blobs.put(window.summary.serialize())

    def _flush(self, start: int, window: _Window) -> None:
        rows = WindowRows(self.model)
        rank = window.summarized
        for batch, members in window.held:
            taken = pa.array(members, type=pa.int64())
            rows.add_columns({name: column.take(taken) for name, column in batch.columns.items()},
                             [(r,) for r in range(rank, rank + len(members))],
                             [batch.unknown[i] for i in members.tolist()], _invalid_among(batch, members))
            rank += len(members)
        partial = rows.summarize(self.name, start, self.window_ms, self.top)
        window.summary = partial if window.summary is None else merge_summaries([self._summary(window), partial])
        self._count_values(window, rows.columns())
        window.summarized = rank
        window.held = []

    def _count_values(self, window: _Window, columns: Mapping[str, pa.Array]) -> None:
        """Add the partial's categorical values to the window's counts (and to their segment's)."""
        for name in self.categorical:
            _add_counts(window.counts[None][name], columns[name])
        if self.top is not None:
            for key, members in segment_members(columns, self.model.segments.by, self.top).items():
                taken = pa.array(members, type=pa.int64())
                for name in self.categorical:
                    _add_counts(window.counts[key][name], columns[name].take(taken))

    def summaries(self) -> list[tuple[int, WindowSummary]]:
        """Each whole window's start and summary, oldest first (the held rows summarized first)."""
        self.flush()
        return [(key, self._summary(self.windows[key])) for key in sorted(self.windows)]

    def references(self, policy: DriftPolicy) -> tuple[Reference, dict[SegmentKey, Reference] | None]:
        """The model's reference, and its segments' (None when it has none), from its whole windows.

        Calibrated a group of features at a time (:class:`_FeatureParts`): all of them from the whole summaries
        when they fit :data:`HELD_SUMMARY_BYTES`, else one group's parts at a time, the rest waiting in the
        builder's file."""
        self.flush()
        keys = (None,) if self.top is None else (None, *self.top, other_key(self.model.segments.by))
        groups = _feature_groups(tuple(self.model.sketch_kinds), self.kept.bytes_of(self.windows.values()))
        parts = {key: _FeatureParts(groups, self.blobs) for key in keys}
        for start in sorted(self.windows):
            window = self.windows.pop(start)
            summary = self._summary(window)
            for key in keys:
                part = summary if key is None else summary.segments.get(key)
                if part is not None:
                    parts[key].add(part, window.counts[key])
        model = self._reference(parts.pop(None), policy)
        if self.top is None:
            return model, None
        return model, {key: self._reference(part, policy) for key, part in parts.items() if part.windows}

    def _summary(self, window: _Window) -> WindowSummary:
        """A window's summary so far (read back from the file when it was serialized there)."""
        summary = window.summary
        return WindowSummary.deserialize(self.blobs.get(summary)) if isinstance(summary, tuple) else summary

    def _reference(self, parts: "_FeatureParts", policy: DriftPolicy) -> Reference:
        """One reference out of each window's summary, a group of features at a time, and its categorical value
        counts."""
        features, groups = {}, {}
        for index, names in enumerate(parts.groups):
            kinds = {name: self.model.sketch_kinds[name] for name in names if name is not None}
            counts = {name: [c.get(name, {}) for c in parts.counts] for name in kinds if name in self.categorical}
            reference = reference_from_summaries(parts.summaries(index), kinds, policy, counts or None,
                                                 prediction=self.model.monitor_prediction)
            features.update(reference.features)
            groups.update(reference.groups)
        return Reference(features, groups)  # the feature groups follow the config's order: so do the features


class _FeatureParts:
    """Each window's summary and categorical value counts, for calibration a group of features at a time
    (``groups``, :func:`_feature_groups`). One group: the whole summaries, in memory (they fit
    :data:`HELD_SUMMARY_BYTES`). Several: each summary cut into one part per group (those features' sketches and
    sample columns only; None in a group: the multivariate groups' moments too), kept in the builder's file
    until the group's turn. A reference calibrated from these parts, group by group, is the one of the whole
    summaries (:func:`pipeline.references.reference_from_summaries` reads each feature's own)."""

    def __init__(self, groups: list[tuple[str | None, ...]], blobs: BlobFile) -> None:
        self.groups, self.blobs, self.windows = groups, blobs, 0
        self.parts: list[list[WindowSummary | tuple[int, int]]] = [[] for _ in groups]
        self.counts: list[dict[str, dict[str, int]]] = []

    def add(self, summary: WindowSummary, counts: Mapping[str, Counter]) -> None:
        """One more window's summary (in window order): kept whole (one group) or cut into its groups' parts."""
        self.windows += 1
        if len(self.groups) == 1:
            self.parts[0].append(summary)
        else:
            for part, names in zip(self.parts, self.groups):
                part.append(self.blobs.put(_some_features(summary, names).serialize()))
        self.counts.append({name: dict(counter) for name, counter in counts.items()})

    def summaries(self, index: int) -> list[WindowSummary]:
        """The windows' parts of group ``index``, in window order; given once."""
        parts, self.parts[index] = self.parts[index], []
        return [part if isinstance(part, WindowSummary) else WindowSummary.deserialize(self.blobs.get(part))
                for part in parts]


def _feature_groups(names: tuple[str, ...], summary_bytes: int) -> list[tuple[str | None, ...]]:
    """The features (and None: the multivariate groups) cut into as few groups, in order, as keep one group's
    parts of every window within :data:`HELD_SUMMARY_BYTES` (``summary_bytes``: the windows' whole summaries,
    serialized); one feature a group at most.

    >>> _feature_groups(("a", "b", "c"), 1), _feature_groups(("a", "b", "c"), 2 * HELD_SUMMARY_BYTES + 1)
    ([('a', 'b', 'c', None)], [('a',), ('b',), ('c', None)])
    """
    every = (*names, None)
    count = min(len(every) - 1, -(-summary_bytes // max(HELD_SUMMARY_BYTES, 1))) or 1
    if count <= 1:
        return [every]
    bounds = [round(i * len(names) / count) for i in range(count + 1)]
    return [(*names[a:b], *((None,) if b == len(names) else ())) for a, b in zip(bounds, bounds[1:])]


def _some_features(summary: WindowSummary, names: tuple[str | None, ...]) -> WindowSummary:
    """``summary`` with features ``names``' sketches and sample columns only (None among them: its groups too)."""
    kinds = {n: kind for n, kind in summary.sample.kinds.items() if n in names}
    sample = EventSample(summary.sample.capacity, kinds)
    if kinds:
        sample.keys, sample.columns = summary.sample.keys, {n: summary.sample.columns[n] for n in kinds}
    return WindowSummary(summary.model, summary.window_start_ms, summary.window_end_ms, events=summary.events,
                         sketches={n: sketch for n, sketch in summary.sketches.items() if n in names}, sample=sample,
                         booleans=summary.booleans & set(names),
                         groups=summary.groups if None in names else {})


class _KeptSummaries:
    """Where finished windows' summaries are kept: in memory while their serialized size (measured on the first
    finished window and every :data:`_MEASURE_EVERY`-th after, the largest taken for each) adds up to at most
    :data:`HELD_SUMMARY_BYTES`; past it every finished window of every model goes to the builder's file
    (:attr:`spilling`) and stays there."""

    def __init__(self, blobs: BlobFile) -> None:
        self.blobs, self.spilling = blobs, False
        self.finished, self.estimate, self.held = 0, 0, 0

    def finish(self, window: _Window) -> None:
        """Count a window whose summary is finished (no rows came to it in the last flush)."""
        if not self.spilling and self.finished % _MEASURE_EVERY == 0 and isinstance(window.summary, WindowSummary):
            self.estimate = max(self.estimate, len(window.summary.serialize()))
        self.finished += 1
        self.held += 1
        self.spilling = self.spilling or self.held * self.estimate > HELD_SUMMARY_BYTES

    def reopen(self, window: _Window) -> None:
        """A finished window got rows again (input out of time order): it no longer counts."""
        window.finished = False
        self.held -= 1

    def bytes_of(self, windows: Iterable[_Window]) -> int:
        """The windows' summaries' serialized size: in the file, their length; in memory, the estimate."""
        return sum(w.summary[1] if isinstance(w.summary, tuple) else self.estimate for w in windows)


def _invalid_among(batch: ModelRows, members: np.ndarray) -> list[tuple[int, str, InvalidValue]]:
    """The batch's wrong-typed values of the rows ``members``, indexed by their position among them."""
    if not batch.invalid:
        return []
    position = {row: j for j, row in enumerate(members.tolist())}
    return [(position[row], name, value) for row, name, value in batch.invalid if row in position]


def _add_counts(counts: Counter, column: pa.Array) -> None:
    """Add a categorical column's values' counts (nulls, which invalid values are, left out), in the order
    they first come."""
    tallied = pc.value_counts(column.drop_null())
    counts.update(dict(zip(tallied.field("values").to_pylist(), tallied.field("counts").to_pylist())))


class ReferenceBuilder:
    """The second pass: rows summarized by window as they come, at most :data:`HELD_EVENTS` events held."""

    def __init__(self, config: MonitorConfig, policy: DriftPolicy, scan: SnapshotScan,
                 where: str = "the reference events") -> None:
        self.policy, self.where, self.season = policy, where, Season.of(config)
        self.window_ms = config.window.size_ms
        self.blobs = BlobFile()
        kept = _KeptSummaries(self.blobs)
        self.models = {name: _ModelWindows(name, model, scan, self.window_ms, policy, kept, self.season is None)
                       for name in scan.events if (model := config.model(name)) is not None}
        self.held = 0

    def add(self, rows: Mapping[str, ModelRows]) -> None:
        """Take a batch of configured models' rows (in file order, the same events as the scan saw)."""
        for name, model in rows.items():
            windows = self.models.get(name)
            if windows is not None:
                windows.add(model)
                self.held += len(model)
        if self.held >= HELD_EVENTS:
            for windows in self.models.values():
                windows.flush()
            self.held = 0

    def finish(self) -> ReferenceSet:
        """The references of every configured model seen (and of its segments when it has any); the builder's
        temporary file is removed."""
        with self.blobs:
            return self._references()

    def _references(self) -> ReferenceSet:
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
    batches = [model_rows(events[i:i + _LIST_BATCH], config) for i in range(0, len(events), _LIST_BATCH)]
    scan = SnapshotScan(config)
    for batch in batches:
        scan.add_rows(batch)
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
    """The references of ``path``'s events, read in batches, never whole, and parsed once: the scan keeps
    each batch's rows in a temporary file (:class:`RowSpill`) that the build reads back.

    ``config`` None: the scan validates the events without kinds to infer them, keeps the valid events in a
    temporary file (:class:`EventSpill`), ``inferred_config`` makes the config of the kinds, and the build
    reads the events back and makes their rows with it (the same rows as validating them with it: the
    default rules reject no event for a kind); ``policy_of``: the drift policy of a config; ``where`` names
    the file in errors (default: its path).
    """
    report = progress or (lambda _pass, _read, _total: None)
    rules = EventRules.of(config.source) if config else DEFAULT_RULES
    scan, counts = SnapshotScan(config), {"read": 0, "rejected": 0}
    with gc_paused(), RowSpill() as spill, EventSpill() as valid:
        for events in _valid_batches(path, rules, feature_kinds_lookup(config) if config else _no_kinds, counts,
                                     config):
            if config is None:
                scan.add(events)
                valid.write(events)
            else:
                scan.add_rows(events)
                spill.write(events)
            report("scan", counts["read"], None)
        if counts["read"] == counts["rejected"]:
            raise ConfigError(f"{path}: no valid events ({counts['rejected']} rejected)")
        parsed_once = config is not None
        config = config or inferred_config(scan.kinds_by_model())
        builder = ReferenceBuilder(config, policy_of(config), scan, where or str(path))
        total, done = sum(scan.events[name] for name in builder.models), 0
        batches = spill.read() if parsed_once else (model_rows(events, config) for events in valid.read())
        for number, rows in enumerate(batches, start=1):
            builder.add(rows)
            done += sum(len(r) for r in rows.values())
            report("build", done, total)
            if number % GC_EVERY_BATCHES == 0:
                gc.collect()  # as replay does: the collector is paused, cycles are freed now and then
    return SnapshotBuild(config, builder.finish(), counts["read"], counts["rejected"])


def _no_kinds(_model: str) -> None:
    return None


def _valid_batches(path: str | Path, rules: EventRules, kinds_of, counts: dict[str, int],
                   config: MonitorConfig | None = None) -> Iterator:
    """Each batch of the file's valid events (with ``config``: as each configured model's rows, validated with
    its kinds); ``counts`` gains the records read and rejected."""
    for batch in iter_raw_batches(path):
        events = []
        for _coordinates, raw in batch:
            try:
                events.append(validate_event(raw, kinds_of, rules))
            except InvalidEventError:
                counts["rejected"] += 1
        counts["read"] += len(batch)
        yield events if config is None else model_rows(events, config, checked=True)
