"""The per-window pipeline shared by the streaming job and the replay CLI.

Two steps, both plain Python so that Flink (jobs/drift_job.py) and replay (replay/) run the very
same code on the same inputs:

1. :class:`WindowRows` turns the validated events of one (model, window) into a
   :class:`WindowSummary`: a FeatureSketch and a ReservoirSample per configured feature, built
   column by column (one vectorised sketch update per feature, never a Python call per value).
   Events are put in a canonical order first (Kafka topic, partition, offset) and the sample is
   seeded from (model, window), so the same input gives the same sample whatever order Flink or a
   replay delivered it in.
2. :func:`analyze_summary` gates every feature against the reference, deep-tests the alarms,
   applies Benjamini-Hochberg and returns a :class:`WindowReport` ready for the store and alerting.
"""

from __future__ import annotations

import operator
import zlib
from dataclasses import dataclass, field
from itertools import islice
from typing import Mapping, Sequence

import pyarrow as pa

from alerting.records import FeatureOutcome, WindowReport
from jobs.dead_letters import Rejected
from schemas.config import ModelConfig, ThresholdConfig
from jobs.columns import ARROW_TYPES, configured_values, feature_columns
from schemas.events import FeatureKinds, utc_from_ms
from sketches import DriftPolicy, FeatureVerdict, Reference, ReservoirSample, analyze_window, new_sketch
from sketches.feature import FeatureSketch, deserialize_sketch
from sketches.serialization import Reader, Writer

#: Frame kind of a serialized WindowSummary (sketches/ uses 1-15 for its own kinds).
KIND_WINDOW = 16


@dataclass
class WindowSummary:
    """What one (model, window) keeps: counts, and a sketch and a sample per feature."""

    model: str
    window_start_ms: int
    window_end_ms: int
    events: int = 0
    unknown_features: int = 0
    features: dict[str, tuple[FeatureSketch, ReservoirSample]] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)  # records of the window that failed validation

    def serialize(self) -> bytes:
        """Versioned bytes (our framing around the sketches' own bytes); never pickled."""
        w = Writer(KIND_WINDOW).text(self.model)
        w.pack("qqqqI", self.window_start_ms, self.window_end_ms, self.events, self.unknown_features,
               len(self.features))
        for name, (sketch, sample) in self.features.items():
            w.text(name).blob(sketch.serialize()).blob(sample.serialize())
        w.pack("I", len(self.rejected))
        for r in self.rejected:
            w.text(r.topic).pack("iq", r.partition, r.offset).text(r.reason).blob(r.payload)
        return w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> "WindowSummary":
        """Decode bytes written by :meth:`serialize`."""
        r = Reader(data, (KIND_WINDOW,))
        model = r.text()
        start, end, events, unknown, count = r.unpack("qqqqI")
        features = {}
        for _ in range(count):
            name = r.text()
            features[name] = (deserialize_sketch(r.blob()), ReservoirSample.deserialize(r.blob()))
        (rejects,) = r.unpack("I")
        rejected = [Rejected(r.text(), *r.unpack("iq"), r.text(), r.blob()) for _ in range(rejects)]
        r.done()
        return cls(model, start, end, events, unknown, features, rejected)


def window_start(event_ms: int, window_ms: int) -> int:
    """Start (epoch ms) of the epoch-aligned tumbling window holding ``event_ms``."""
    return event_ms - event_ms % window_ms


def window_seed(model: str, start_ms: int) -> int:
    """A stable seed per (model, window): reruns and replays draw the same sample."""
    return zlib.crc32(f"{model}|{start_ms}".encode())


class WindowRows:
    """One (model, window)'s configured feature values, gathered as events come, sketched once.

    Values come either event by event (:meth:`add`, the live job's aggregate: appended to two flat
    lists straight from validation's parse) or as Arrow columns of a validated batch
    (:meth:`add_columns`, replay's batch path). A value is parsed once, by validation, and never
    again. When the window closes each feature becomes one Arrow column, put in the canonical
    order of the events' coordinates (Kafka topic, partition, offset; or file and line), and goes
    to its sketch and sample in one vectorised call.

    >>> from schemas.config import ModelConfig
    >>> rows = WindowRows(ModelConfig(name="m", features={"x": "numeric", "c": "categorical"}))
    >>> rows.add({"x": 2.5, "c": "b"}, ("t", 0, 7))
    >>> rows.add({"x": 1, "c": "a", "extra": 3}, ("t", 0, 6))
    >>> summary = rows.summarize("m", 0, 60_000)
    >>> (summary.events, summary.unknown_features, summary.features["x"][1].values.tolist())
    (2, 1, [1.0, 2.5])
    """

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.kinds = FeatureKinds(config.features)
        self.numbers: list = []
        self.labels: list = []
        self.coordinates: list[tuple] = []
        self.unknown_features = 0
        self._chunks: list[dict[str, pa.Array]] = []
        self._in_chunks = 0  # events already in self._chunks

    def __len__(self) -> int:
        return len(self.coordinates)

    def add(self, features: Mapping[str, object], coordinates: tuple,
            by_kind: tuple[tuple, tuple] | None = None) -> None:
        """Append one validated event's configured features (absent ones as nulls).

        ``by_kind`` is the event's :attr:`schemas.events.Event.by_kind` when validation already
        split it with this model's kinds (saves doing it twice).
        """
        split, unknown = configured_values(features, self.kinds, by_kind)
        self.unknown_features += unknown
        self.numbers.extend(split[0])
        self.labels.extend(split[1])
        self.coordinates.append(coordinates)

    def add_columns(self, columns: Mapping[str, pa.Array], coordinates: Sequence[tuple],
                    unknown_features: int = 0) -> None:
        """Append validated events given as one Arrow column per configured feature."""
        self._seal()
        self._chunks.append({name: columns[name] for name in self.kinds})
        self.coordinates.extend(coordinates)
        self._in_chunks = len(self.coordinates)
        self.unknown_features += unknown_features

    def columns(self) -> dict[str, pa.Array]:
        """Each configured feature's column over the whole window, in canonical order."""
        self._seal()
        order = canonical_order(self.coordinates)
        columns = {}
        for name, kind in self.kinds.items():
            parts = [chunk[name] for chunk in self._chunks]
            column = pa.concat_arrays(parts) if parts else pa.array([], ARROW_TYPES[kind])
            columns[name] = column if order is None else column.take(order)
        return columns

    def summarize(self, model: str, start_ms: int, window_ms: int) -> WindowSummary:
        """The window's summary: counts, and a sketch and a sample per configured feature."""
        summary = WindowSummary(model, start_ms, start_ms + window_ms, events=len(self),
                                unknown_features=self.unknown_features)
        _sketch_columns(summary, self.columns(), self.config)
        return summary

    def _seal(self) -> None:
        """Turn the values added event by event so far into one columnar chunk."""
        if len(self.coordinates) > self._in_chunks:
            self._chunks.append(feature_columns(self.numbers, self.labels, self.kinds))
            self.numbers, self.labels = [], []
            self._in_chunks = len(self.coordinates)


def canonical_order(coordinates: list[tuple]) -> pa.Array | None:
    """Indices that sort ``coordinates``; None when they already are in order (the usual case)."""
    if all(map(operator.le, coordinates, islice(coordinates, 1, None))):
        return None
    return pa.array(sorted(range(len(coordinates)), key=coordinates.__getitem__), type=pa.int64())


def summarize_window(
    model: str,
    start_ms: int,
    window_ms: int,
    feature_maps: Sequence[Mapping[str, object]],
    config: ModelConfig,
) -> WindowSummary:
    """Sketch and sample every configured feature of one window's events (already in canonical order)."""
    rows = WindowRows(config)
    for line, features in enumerate(feature_maps):
        rows.add(features, (line,))
    return rows.summarize(model, start_ms, window_ms)


def _sketch_columns(summary: WindowSummary, columns: dict, config: ModelConfig) -> None:
    seed = window_seed(summary.model, summary.window_start_ms)
    for name, kind in config.features.items():
        column = columns[name]
        sketch = new_sketch(kind, k=config.sketch_k, name=name).update(column)
        sample = ReservoirSample(config.sample_size, seed, name).update(column)
        summary.features[name] = (sketch, sample)


def drift_policy(thresholds: ThresholdConfig) -> DriftPolicy:
    """The sketches' DriftPolicy from the config's thresholds section."""
    return DriftPolicy(alpha=thresholds.alpha, psi_minor=thresholds.psi_minor, psi_major=thresholds.psi_major,
                       false_alarm_rate=thresholds.false_alarm_rate, bins=thresholds.bins,
                       min_count=thresholds.min_count)


def analyze_summary(summary: WindowSummary, reference: Reference, policy: DriftPolicy) -> WindowReport:
    """Gate, deep-test and judge one window against the reference."""
    verdicts = analyze_window(summary.features, reference, policy)
    return WindowReport(
        model=summary.model,
        window_start=utc_from_ms(summary.window_start_ms),
        window_end=utc_from_ms(summary.window_end_ms),
        features=[feature_outcome(v) for v in verdicts],
    )


def feature_outcome(v: FeatureVerdict) -> FeatureOutcome:
    """Flatten a sketches FeatureVerdict into alerting's FeatureOutcome record."""
    deep = v.deep
    return FeatureOutcome(
        name=v.name, kind=v.kind, count=v.count, missing=v.missing,
        gate_ks=v.gate.ks, gate_psi=v.gate.psi, gate_emd=v.gate.emd, alarm=v.alarm,
        ks_stat=deep.ks_stat if deep else None, ks_pvalue=deep.ks_pvalue if deep else None,
        psi=deep.psi if deep else None, emd=deep.emd if deep else None,
        p_adjusted=v.p_adjusted, drifted=v.drifted, severity=v.severity,
        gate_ks_bound=v.gate.ks_bound, gate_chi2=v.gate.chi2, gate_js=v.gate.js, gate_new_share=v.gate.new_share,
        gate_missing_delta=v.gate.missing_delta,
        chi2_stat=deep.chi2_stat if deep else None, chi2_pvalue=deep.chi2_pvalue if deep else None,
    )

