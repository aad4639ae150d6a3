"""Window summaries: what one (model, window) keeps, built the same way live, in replay and for references.

:class:`WindowSummary` holds counts, a deterministic mergeable sketch per configured feature and
one bottom-k event sample (``sketches/FORMAT.md``). The live job builds it in Java, event by
event, on as many subtasks as the stream has (``jobs/java``, ``WindowSummaryAgg``); replay and
``reference build`` build it here with :class:`WindowRows`. Both produce the same bytes for the
same set of records: nothing in it depends on the order of the events or on how they were split
into partials, so verdicts are bit-identical live, in replay and after a restart. Summaries merge
into longer horizons (:func:`merge_summaries`). Judging a summary is ``pipeline/judging.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from driftwarden.core.errors import SerializationError
from driftwarden.pipeline.columns import ARROW_TYPES, configured_values, feature_columns
from driftwarden.pipeline.invalid import InvalidExample, InvalidValues, where_text
from driftwarden.pipeline.segments import segment_members
from driftwarden.schemas.config import ModelConfig
from driftwarden.schemas.events import BOOLEAN, CATEGORICAL, NUMERIC, InvalidValue, check_feature_kinds
from driftwarden.sketches import ReservoirSample, new_sketch
from driftwarden.sketches.feature import FeatureSketch, copy_sketch, deserialize_sketches, is_numeric
from driftwarden.sketches.moments import GroupMoments
from driftwarden.sketches.hashing import event_keys, split_coordinates, window_seed
from driftwarden.sketches.histogram import HistogramSketch, segment_shift
from driftwarden.sketches.sample import EventSample, sampled_kinds
from driftwarden.sketches.serialization import Reader, Writer

#: Frame kind of a serialized WindowSummary (``sketches/FORMAT.md``).
KIND_WINDOW = 17
#: Frame kind of a WindowSummary with per-segment summaries: the kind 17 frame, then the segments.
KIND_WINDOW_SEGMENTED = 18
#: A feature's kind in the window summary's trailer (sketches/FORMAT.md).
_KIND_CODE = {NUMERIC: 1, CATEGORICAL: 2, BOOLEAN: 3}
_KIND_NAME = {code: kind for kind, code in _KIND_CODE.items()}

__all__ = ["KIND_WINDOW", "KIND_WINDOW_SEGMENTED", "WindowSummary", "WindowRows", "coarsen_segments", "merge_summaries",
           "new_feature_sketch", "summarize_window", "window_seed"]


@dataclass
class WindowSummary:
    """What one (model, window) keeps: counts, a sketch per configured feature, an event sample.

    Treat it as immutable once built (``features`` is computed once); :func:`merge_summaries`
    builds a new one. ``segments``: for a model with segments (``pipeline/segments.py``), each
    segment's own summary (same model and window, built from that segment's events only), keyed
    by the segment's values in ``segment_by`` order; only segments that had events are present.
    """

    model: str
    window_start_ms: int
    window_end_ms: int
    events: int = 0
    unknown_features: int = 0
    sketches: dict[str, FeatureSketch] = field(default_factory=dict)
    sample: EventSample = field(default_factory=lambda: EventSample(0, {}))
    segment_by: tuple[str, ...] = ()
    segments: dict[tuple[str, ...], "WindowSummary"] = field(default_factory=dict)
    #: the boolean features (summarized as categorical ones, values "true" / "false")
    booleans: frozenset[str] = frozenset()
    #: per feature, its wrong-typed values (absent: none); kept out of its sketch
    invalid: dict[str, InvalidValues] = field(default_factory=dict)
    #: per multivariate group of the model (``ModelConfig.groups``), its moments (``sketches/moments.py``)
    groups: dict[str, GroupMoments] = field(default_factory=dict)

    def kind_of(self, name: str) -> str:
        """A feature's configured kind: numeric, categorical or boolean."""
        if name in self.booleans:
            return BOOLEAN
        sketch = self.sketches.get(name)
        return NUMERIC if sketch is None or is_numeric(sketch) else CATEGORICAL

    def invalid_count(self, name: str) -> int:
        """How many of a feature's values in the window had the wrong type."""
        tally = self.invalid.get(name)
        return tally.count if tally is not None else 0

    @cached_property
    def features(self) -> dict[str, tuple[FeatureSketch, ReservoirSample]]:
        """Each feature's sketch and deep-test sample (what :func:`sketches.analyze_window` takes; the
        sample is built when first read: most are never read; a numeric feature's is empty, as the
        summary samples categorical features only: ``sketches.sample.sampled_kinds``)."""
        return {name: (sketch, self.sample.lazy_feature(name)) for name, sketch in self.sketches.items()}

    def feature_sample(self, name: str) -> ReservoirSample:
        """One feature's deep-test sample, built now (empty for a numeric feature, as in :attr:`features`)."""
        return self.sample.lazy_feature(name).built

    def serialize(self) -> bytes:
        """Versioned bytes (``sketches/FORMAT.md``: kind 17, kind 18 with segments); never pickled."""
        if not self.segments:
            return self._serialize_window()
        w = Writer(KIND_WINDOW_SEGMENTED).blob(self._serialize_window())
        w.texts(self.segment_by).pack("I", len(self.segments))
        for key in sorted(self.segments):
            w.texts(key).blob(self.segments[key]._serialize_window())
        return w.getvalue()

    def _serialize_window(self) -> bytes:
        """The kind 17 frame of this summary alone (its segments left out)."""
        w = Writer(KIND_WINDOW).text(self.model)
        w.pack("qqqqI", self.window_start_ms, self.window_end_ms, self.events, self.unknown_features,
               len(self.sketches))
        for name, sketch in self.sketches.items():
            w.text(name).blob(sketch.serialize())
        w.blob(self.sample.serialize())
        if self.booleans or self.groups or any(t.count for t in self.invalid.values()):
            self._write_trailer(w)
        if self.groups:
            w.pack("I", len(self.groups))
            for name, moments in self.groups.items():
                w.text(name).blob(moments.serialize())
        return w.getvalue()

    def _write_trailer(self, w: Writer) -> None:
        """Per feature: its kind, its invalid values' count and examples (sketches/FORMAT.md, kind 17)."""
        for name in self.sketches:
            tally = self.invalid.get(name) or InvalidValues()
            w.pack("BQI", _KIND_CODE[self.kind_of(name)], tally.count, len(tally.examples))
            for example in tally.examples:
                w.pack("q", example.key).text(example.reason).text(example.value).text(example.where)

    @classmethod
    def deserialize(cls, data: bytes) -> "WindowSummary":
        """Decode bytes written by :meth:`serialize` (kind 17 or 18) or by the Java aggregate."""
        r = Reader(data, (KIND_WINDOW, KIND_WINDOW_SEGMENTED))
        if r.kind == KIND_WINDOW:
            return cls._read_window(r)
        summary = cls.deserialize_window(r.blob())
        summary.segment_by = tuple(r.texts())
        (count,) = r.unpack("I")
        if not summary.segment_by:
            raise SerializationError("corrupt segmented window summary: no segment feature")
        for _ in range(count):
            key = tuple(r.texts())
            if len(key) != len(summary.segment_by) or key in summary.segments:
                raise SerializationError(f"corrupt segmented window summary: segment key {key!r}")
            summary.segments[key] = cls.deserialize_window(r.blob())
        r.done()
        return summary

    @classmethod
    def deserialize_window(cls, data: bytes) -> "WindowSummary":
        """Decode one kind 17 frame."""
        return cls._read_window(Reader(data, (KIND_WINDOW,)))

    @classmethod
    def _read_window(cls, r: Reader) -> "WindowSummary":
        model = r.text()
        start, end, events, unknown, count = r.unpack("qqqqI")
        named = [(r.text(), r.blob()) for _ in range(count)]
        sketches = dict(zip([name for name, _ in named], deserialize_sketches([blob for _, blob in named])))
        sample = EventSample.deserialize(r.blob()).categorical_only()
        summary = cls(model, start, end, events, unknown, sketches, sample)
        if not r.at_end():
            summary._read_trailer(r)
        if not r.at_end():
            (count,) = r.unpack("I")
            for _ in range(count):
                name = r.text()
                summary.groups[name] = GroupMoments.deserialize(r.blob())
        r.done()
        return summary

    def _read_trailer(self, r: Reader) -> None:
        """Read what :meth:`_write_trailer` wrote."""
        booleans = set()
        for name in self.sketches:
            code, count, examples = r.unpack("BQI")
            if code not in _KIND_NAME or examples > count:
                raise SerializationError(f"corrupt window summary: feature {name!r} kind {code}, {examples} examples "
                                         f"of {count} invalid values")
            if _KIND_NAME[code] == BOOLEAN:
                booleans.add(name)
            if count:
                self.invalid[name] = InvalidValues(count, [InvalidExample(r.unpack("q")[0], r.text(), r.text(), r.text())
                                                           for _ in range(examples)])
        self.booleans = frozenset(booleans)


def merge_summaries(summaries: Sequence[WindowSummary]) -> WindowSummary:
    """One summary of several windows of one model (a longer horizon), without re-reading events.

    Exact for counts and sketches; the sample is the bottom-k of the union of the samples.

    >>> from schemas.config import ModelConfig
    >>> config = ModelConfig(name="m", features={"x": "numeric"})
    >>> days = [summarize_window("m", start, 1000, [{"x": float(start)}], config) for start in (0, 1000, 2000)]
    >>> week = merge_summaries(days)
    >>> (week.window_start_ms, week.window_end_ms, week.events, week.sketches["x"].n)
    (0, 3000, 3, 3)
    """
    if not summaries:
        raise ValueError("merge_summaries needs at least one summary")
    models = {s.model for s in summaries}
    if len(models) != 1:
        raise ValueError(f"merge_summaries: summaries of several models {sorted(models)}")
    first = summaries[0]
    merged = WindowSummary(first.model, min(s.window_start_ms for s in summaries),
                           max(s.window_end_ms for s in summaries),
                           sketches={n: copy_sketch(sk) for n, sk in first.sketches.items()},
                           sample=EventSample(first.sample.capacity, first.sample.kinds).merge(first.sample))
    merged.events, merged.unknown_features = first.events, first.unknown_features
    merged.booleans = frozenset().union(*(s.booleans for s in summaries))
    merged.invalid = {name: tally.copy() for name, tally in first.invalid.items()}
    merged.groups = {name: moments.copy() for name, moments in first.groups.items()}
    for other in summaries[1:]:
        for name, moments in other.groups.items():
            merged.groups[name] = merged.groups[name].merge(moments) if name in merged.groups else moments.copy()
        merged.events += other.events
        merged.unknown_features += other.unknown_features
        for name, tally in other.invalid.items():
            merged.invalid[name] = merged.invalid[name].merge(tally) if name in merged.invalid else tally.copy()
        for name, sketch in other.sketches.items():
            if name in merged.sketches:
                merged.sketches[name].merge(sketch)
            else:
                merged.sketches[name] = copy_sketch(sketch)
        merged.sample.merge(other.sample)
    _merge_segments(merged, summaries)
    return merged


def _merge_segments(merged: WindowSummary, summaries: Sequence[WindowSummary]) -> None:
    """Give ``merged`` each segment's merge over ``summaries`` (spanning the merged horizon), at the merged
    window's resolution (:func:`coarsen_segments`: the merge of a window's partials is then its summary)."""
    by = {s.segment_by for s in summaries if s.segments}
    if len(by) > 1:
        raise ValueError(f"merge_summaries: summaries segmented by different features {sorted(by)}")
    if not by:
        return
    merged.segment_by = by.pop()
    for key in sorted({key for s in summaries for key in s.segments}):
        segment = merge_summaries([s.segments[key] for s in summaries if key in s.segments])
        segment.window_start_ms, segment.window_end_ms = merged.window_start_ms, merged.window_end_ms
        merged.segments[key] = segment
    coarsen_segments(merged)


class WindowRows:
    """One (model, window)'s configured feature values, gathered as events come, summarized once.

    Values come either event by event (:meth:`add`: straight from validation's parse) or as Arrow
    columns of a validated batch (:meth:`add_columns`, replay's batch path), each with the
    record's coordinates (Kafka topic, partition, offset; or file and line). A value is parsed
    once, by validation, and never again. When the window closes each feature becomes one Arrow
    column and goes to its sketch in one vectorised call; the coordinates give each event its
    sample key. The order of the events does not matter.

    >>> from schemas.config import ModelConfig
    >>> rows = WindowRows(ModelConfig(name="m", features={"x": "numeric", "c": "categorical"}))
    >>> rows.add({"x": 2.5, "c": "b"}, ("t", 0, 7))
    >>> rows.add({"x": 1, "c": "a", "extra": 3}, ("t", 0, 6))
    >>> summary = rows.summarize("m", 0, 60_000)
    >>> (summary.events, summary.unknown_features, summary.sketches["x"].n, sorted(summary.features["c"][1].values))
    (2, 1, 2, ['a', 'b'])
    """

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.kinds = config.kinds
        self._sketch_kinds = config.sketch_kinds
        self.numbers: list = []
        self.labels: list = []
        self.coordinates: list[tuple] = []
        self.unknown_features = 0
        self._unknown: list[int] = []  # each event's unknown features, in event order (for its segment)
        self._invalid: list[tuple[int, str, InvalidValue]] = []  # (event index, name, its invalid value)
        self._chunks: list[dict[str, pa.Array]] = []
        self._in_chunks = 0  # events already in self._chunks

    def __len__(self) -> int:
        return len(self.coordinates)

    def add(self, features: Mapping[str, object], coordinates: tuple,
            by_kind: tuple[tuple, tuple] | None = None, prediction: float | None = None,
            invalid: Mapping[str, InvalidValue] | None = None) -> None:
        """Append one validated event's configured features and prediction (absent ones as nulls).

        ``by_kind`` is the event's :attr:`schemas.events.Event.by_kind` when validation already
        split it with this model's kinds (saves doing it twice); ``invalid``: its
        :attr:`schemas.events.Event.invalid` values (kept out of the sketches, counted).
        """
        if by_kind is None and invalid is None:  # not checked against these kinds yet (a reference's raw events)
            by_kind, invalid = check_feature_kinds(features, self.kinds)
        if invalid:
            self._invalid.extend((len(self.coordinates), name, value) for name, value in invalid.items())
        split, unknown = configured_values(features, self.kinds, by_kind, prediction, invalid)
        self.unknown_features += unknown
        self._unknown.append(unknown)
        self.numbers.extend(split[0])
        self.labels.extend(split[1])
        self.coordinates.append(coordinates)

    def add_columns(self, columns: Mapping[str, pa.Array], coordinates: Sequence[tuple],
                    unknown_features: int | Sequence[int] = 0,
                    invalid: Sequence[tuple[int, str, InvalidValue]] = ()) -> None:
        """Append validated events given as one Arrow column per monitored name (features, prediction).

        ``unknown_features``: each event's count of values of unconfigured features, or their
        total (then a segment's summary counts none of them). ``invalid``: (index among these
        events, name, invalid value) of each wrong-typed value (null in its column).
        """
        self._seal()
        first = len(self.coordinates)
        self._invalid.extend((first + i, name, value) for i, name, value in invalid)
        self._chunks.append({name: columns[name] for name in self.kinds.columns})
        self.coordinates.extend(coordinates)
        self._in_chunks = len(self.coordinates)
        per_event = [0] * len(coordinates) if isinstance(unknown_features, int) else list(unknown_features)
        self._unknown.extend(per_event)
        self.unknown_features += unknown_features if isinstance(unknown_features, int) else sum(per_event)

    def columns(self) -> dict[str, pa.Array]:
        """Each monitored name's column over the whole window, in the order the events came."""
        self._seal()
        columns = {}
        for name, kind in self.kinds.columns.items():
            parts = [chunk[name] for chunk in self._chunks]
            columns[name] = pa.concat_arrays(parts) if parts else pa.array([], ARROW_TYPES[kind])
        return columns

    def summarize(self, model: str, start_ms: int, window_ms: int,
                  segments: Sequence[tuple[str, ...]] | None = None) -> WindowSummary:
        """The window's summary: counts, a sketch per monitored name, the event sample.

        ``segments``: the model's top segment keys (the reference's, ``pipeline/segments.py``) when
        the model is segmented: the summary then carries each segment's own summary (the other
        segment gathers the rest); None: no segments.
        """
        columns = self.columns()
        topics, partitions, offsets = split_coordinates(self.coordinates)
        keys = event_keys(window_seed(model, start_ms), topics, partitions, offsets)
        invalid = self._invalid_tallies(keys, topics, partitions, offsets)
        summary = self._summary(model, start_ms, window_ms, columns, keys, len(self), self.unknown_features,
                                invalid(None), range(len(self)))
        by = self.config.segments.by if self.config.segments is not None else ()
        if segments is not None and by and len(self):
            unknown = np.asarray(self._unknown, dtype=np.int64)
            summary.segment_by = by
            for key, members in segment_members(columns, by, segments).items():
                taken = pa.array(members, type=pa.int64())
                summary.segments[key] = self._summary(model, start_ms, window_ms,
                                                      {name: column.take(taken) for name, column in columns.items()},
                                                      keys[members], len(members), int(unknown[members].sum()),
                                                      invalid(set(np.asarray(members).tolist())), members)
            coarsen_segments(summary, self.config.segments.sample_size)
        return summary

    def _invalid_tallies(self, keys: np.ndarray, topics: list, partitions: np.ndarray, offsets: np.ndarray):
        """A function of a set of event indices (None: all) giving each feature's invalid values among them."""
        entries = [(index, name, value, int(keys[index]),
                    where_text(topics[index], int(partitions[index]), int(offsets[index])))
                   for index, name, value in self._invalid]

        def tallies(members: set[int] | None) -> dict[str, InvalidValues]:
            out: dict[str, InvalidValues] = {}
            for index, name, value, key, where in entries:
                if members is None or index in members:
                    out.setdefault(name, InvalidValues()).add(key, value.reason, value.value, where)
            return out
        return tallies

    def _summary(self, model: str, start_ms: int, window_ms: int, columns: Mapping[str, pa.Array],
                 keys: np.ndarray, events: int, unknown: int, invalid: dict[str, InvalidValues],
                 rows: Sequence[int]) -> WindowSummary:
        """The summary of events given as columns and sample keys; ``rows``: the events' indices in the window.

        An invalid value is a null in its column (so in the sample) that its feature's sketch does not see.
        """
        sketches = {}
        for name, kind in self._sketch_kinds.items():
            column = columns[name]
            if name in invalid:
                bad = {i for i, n, _ in self._invalid if n == name}
                column = column.filter(pa.array([i not in bad for i in rows], type=pa.bool_()))
            sketches[name] = new_feature_sketch(kind, self.config, name).update(column)
        return WindowSummary(model, start_ms, start_ms + window_ms, events=events, unknown_features=unknown,
                             sketches=sketches, booleans=self.kinds.boolean, invalid=invalid,
                             groups=group_moments(self.config, columns),
                             sample=EventSample(self.config.sample_size, sampled_kinds(self._sketch_kinds)).update(keys, columns))

    def _seal(self) -> None:
        """Turn the values added event by event so far into one columnar chunk."""
        if len(self.coordinates) > self._in_chunks:
            self._chunks.append(feature_columns(self.numbers, self.labels, self.kinds))
            self.numbers, self.labels = [], []
            self._in_chunks = len(self.coordinates)


def coarsen_segments(summary: WindowSummary, sample_size: int | None = None) -> WindowSummary:
    """Bring each segment's numeric histograms to the resolution of the window's own
    (``sketches.histogram.segment_shift``) and, with ``sample_size`` (the model's ``segments.sample_size``),
    cut its event sample to its bottom ``sample_size`` events, in place: the rules the live job's Java
    ``MergeSegments`` applies when it writes a segmented window (a merge needs no cut: it keeps the smaller
    of its parts' sample sizes)."""
    for segment in summary.segments.values():
        if sample_size is not None:
            segment.sample = segment.sample.bottom(sample_size)
        for name, sketch in segment.sketches.items():
            whole = summary.sketches.get(name)
            if isinstance(sketch, HistogramSketch) and isinstance(whole, HistogramSketch):
                sketch.coarsen_to(segment_shift(sketch, whole))
    return summary


def group_moments(config: ModelConfig, columns: Mapping[str, pa.Array]) -> dict[str, GroupMoments]:
    """Each multivariate group's moments over a window's columns (a null, which an invalid value is, leaves
    its row out: ``sketches/moments.py``)."""
    groups = {}
    for name, members in config.groups.items():
        rows = np.column_stack([columns[f].to_numpy(zero_copy_only=False).astype(np.float64) for f in members])
        groups[name] = GroupMoments(members).update(rows)
    return groups


def new_feature_sketch(kind: str, config: ModelConfig, name: str) -> FeatureSketch:
    """An empty sketch for one configured feature, with the model's sketch settings."""
    return new_sketch(kind, name=name, max_buckets=config.sketch_buckets)


def summarize_window(
    model: str,
    start_ms: int,
    window_ms: int,
    feature_maps: Sequence[Mapping[str, object]],
    config: ModelConfig,
    predictions: Sequence[float | None] | None = None,
    segments: Sequence[tuple[str, ...]] | None = None,
) -> WindowSummary:
    """Summarize one window's events given as feature maps and predictions (none: all missing);
    the i-th event has coordinates (i,); ``segments`` as in :meth:`WindowRows.summarize`."""
    rows = WindowRows(config)
    for line, features in enumerate(feature_maps):
        rows.add(features, (line,), prediction=predictions[line] if predictions is not None else None)
    return rows.summarize(model, start_ms, window_ms, segments)
