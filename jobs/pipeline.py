"""The per-window pipeline shared by the streaming job and the replay CLI.

Two steps, both plain Python so that Flink (jobs/drift_job.py) and replay (replay/) run the very
same code on the same inputs:

1. :func:`summarize_window` turns the validated events of one (model, window) into a
   :class:`WindowSummary`: a FeatureSketch and a ReservoirSample per configured feature, built
   column by column (one vectorised sketch update per feature, never a Python call per value).
   Events are put in a canonical order first (Kafka topic, partition, offset) and the sample is
   seeded from (model, window), so the same input gives the same sample whatever order Flink or a
   replay delivered it in.
2. :func:`analyze_summary` gates every feature against the reference, deep-tests the alarms,
   applies Benjamini-Hochberg and returns a :class:`WindowReport` ready for the store and alerting.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import orjson
import pyarrow as pa
import pyarrow.json as pa_json

from alerting.records import FeatureOutcome, WindowReport
from jobs.dead_letters import Rejected
from schemas.config import ModelConfig, ThresholdConfig
from schemas.events import CATEGORICAL, NUMERIC, utc_from_ms
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


def summarize_window(
    model: str,
    start_ms: int,
    window_ms: int,
    feature_maps: Sequence[dict],
    config: ModelConfig,
) -> WindowSummary:
    """Sketch and sample every configured feature of one window's events (in canonical order)."""
    summary = WindowSummary(model, start_ms, start_ms + window_ms, events=len(feature_maps))
    names = set(config.features)
    summary.unknown_features = sum(len(f.keys() - names) for f in feature_maps)
    columns = {name: [f.get(name) for f in feature_maps] for name in config.features}
    _sketch_columns(summary, columns, config)
    return summary


def summarize_raw(
    model: str,
    start_ms: int,
    window_ms: int,
    values: Iterable[bytes],
    coordinates: Iterable[tuple],
    config: ModelConfig,
) -> WindowSummary:
    """Summarize already-validated raw JSON values, ordered canonically by their coordinates.

    The values are parsed in one Arrow call (C++, typed by the config's feature kinds) and each
    feature's column goes to its sketch and sample as an Arrow array; a batch Arrow cannot type
    (a value outside the contract slipped through) takes the plain Python path instead.
    """
    ordered = [value for _, value in sorted(zip(coordinates, values), key=lambda pair: pair[0])]
    try:
        columns, unknown = _arrow_columns(ordered, config)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError):
        feature_maps = [orjson.loads(value).get("features") or {} for value in ordered]
        return summarize_window(model, start_ms, window_ms, feature_maps, config)
    summary = WindowSummary(model, start_ms, start_ms + window_ms, events=len(ordered), unknown_features=unknown)
    _sketch_columns(summary, columns, config)
    return summary


def _arrow_columns(values: list[bytes], config: ModelConfig) -> tuple[dict[str, pa.Array], int]:
    """Each configured feature's column, and the number of values of features not in the config."""
    types = {NUMERIC: pa.float64(), CATEGORICAL: pa.string()}
    features = pa.struct([(name, types[kind]) for name, kind in config.features.items()])
    options = pa_json.ParseOptions(explicit_schema=pa.schema([("features", features)]),
                                   unexpected_field_behavior="infer")
    table = pa_json.read_json(io.BytesIO(b"\n".join(values)), parse_options=options)
    struct = table.column("features").combine_chunks()
    columns = {name: struct.field(name) for name in config.features}
    extra = [struct.field(i) for i in range(struct.type.num_fields) if struct.type.field(i).name not in columns]
    return columns, sum(len(c) - c.null_count for c in extra)


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

