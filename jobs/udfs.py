"""The Python functions of the streaming drift job, kept thin: all statistics live in sketches/.

* :func:`summarize_udaf`: vectorised aggregate over one (model, window): takes the feature columns
  Java read for the records it vouched for (jobs/feature_spec.py), validates every other record
  (:func:`reject_reason`) and returns a WindowSummary's bytes, the rejected records included.
* :class:`AnalyzeWindow`: the results sink; gate, deep check, store, alerts and the window's
  rejected records for one window.
* :class:`DeadLetter`: the dead-letter sink for records whose envelope (event time, model) Java
  could not read, and for late records; the store's ``dead_letters`` table and a Kafka topic.

Validation runs inside the window aggregate rather than as a per-record Python function: the
record then crosses from Java to Python once instead of twice (measured: 1.65x less time after
start-up on 300,000 events).

Sinks are scalar functions feeding a blackhole table (PyFlink's Table API has no Python sink):
each write is an idempotent upsert, so replays after a restart leave the store unchanged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import compress
from typing import Callable, Mapping

import pandas as pd
import pyarrow as pa
from pyflink.table import DataTypes
from pyflink.table.udf import FunctionContext, ScalarFunction, udaf, udf

from driftwarden.errors import InvalidEventError
from driftwarden.gc_pause import gc_paused
from jobs.dead_letters import REASON_SEPARATOR, DeadLetterWriter, Rejected, dead_letter_row
from jobs.feature_spec import FeatureColumnSpec
from jobs.window_metrics import WindowMetrics
from schemas.config import MonitorConfig, feature_kinds_lookup
from schemas.events import validate_event

__all__ = ["REASON_SEPARATOR", "reject_reason", "feature_kinds_lookup", "summarize_udaf", "AnalyzeWindow",
           "DeadLetter", "analyze_window_udf", "dead_letter_udf"]

log = logging.getLogger(__name__)


def reject_reason(value: bytes | str, config: MonitorConfig) -> str | None:
    """Why a raw value is rejected (a reason code with its detail), or None when it is valid."""
    return _reject_reason(value, feature_kinds_lookup(config))


def _reject_reason(value: bytes | str, kinds_of: Callable[[str], Mapping[str, str] | None]) -> str | None:
    try:
        validate_event(value, kinds_of)
    except InvalidEventError as exc:
        return _reason_text(exc)
    return None


def _reason_text(exc: InvalidEventError) -> str:
    """The stored reason: code, separator, detail (at most 1,000 characters)."""
    return f"{exc.reason}{REASON_SEPARATOR}{exc.detail}"[:1000]


def summarize_udaf(config: MonitorConfig):
    """Pandas aggregate UDF: the serialized WindowSummary of one (model, window).

    Its arguments: the raw value (null where Java vouched for the record), model, event ms, Kafka
    coordinates, Java's ``ok`` flag, then the typed feature columns of :class:`FeatureColumnSpec`.
    """
    window_ms = config.window.size_ms
    kinds_of = feature_kinds_lookup(config)
    spec = FeatureColumnSpec.from_config(config)

    def summarize(values: pd.Series, models: pd.Series, event_ms: pd.Series, topics: pd.Series,
                  partitions: pd.Series, offsets: pd.Series, vouched: pd.Series, *columns: pd.Series) -> bytes:
        with gc_paused():  # the window's events are held until summarized (see driftwarden.gc_pause)
            model = str(models.iloc[0])
            ok = vouched.to_numpy(dtype=bool)
            coordinates = list(zip(topics.tolist(), partitions.tolist(), offsets.tolist()))
            checked = VouchedRows(spec.model_columns(model, columns, ok), list(compress(coordinates, ok)))
            unchecked = ~ok
            return summarize_checked(model, int(event_ms.iloc[0]), window_ms, values[unchecked].tolist(),
                                     list(compress(coordinates, unchecked)), config, kinds_of, checked).serialize()

    return udaf(summarize, result_type=DataTypes.BYTES(), func_type="pandas")


@dataclass
class VouchedRows:
    """Records Java vouched for (see jobs/feature_spec.py): their feature columns and coordinates."""

    columns: dict[str, pa.Array]
    coordinates: list[tuple]


def summarize_checked(model: str, any_event_ms: int, window_ms: int, values: list[bytes], coordinates: list[tuple],
                      config: MonitorConfig, kinds_of: Callable[[str], Mapping[str, str] | None],
                      vouched: VouchedRows | None = None):
    """Validate a window's records, then summarize the valid ones; the others ride along as rejects.

    ``values`` are raw records (with their ``coordinates``) that Python validates; each is parsed
    once, and validation's parsed features go straight into the window's rows. ``vouched`` records
    are already valid and in columns.
    """
    from jobs.pipeline import WindowRows, WindowSummary, window_start

    start = window_start(any_event_ms, window_ms)
    model_config = config.model(model)
    rows = WindowRows(model_config) if model_config is not None else None
    rejected, events = [], 0
    if vouched is not None and vouched.coordinates:
        events += len(vouched.coordinates)
        if rows is not None:
            rows.add_columns(vouched.columns, vouched.coordinates)
    for value, where in zip(values, coordinates):
        try:
            event = validate_event(value, kinds_of)
        except InvalidEventError as exc:
            rejected.append(Rejected(*where, _reason_text(exc), value))
            continue
        events += 1
        if rows is not None:
            rows.add(event.features, where, event.by_kind)
    if rows is None:  # not monitored: counted, not sketched
        summary = WindowSummary(model, start, start + window_ms, events=events)
    else:
        summary = rows.summarize(model, start, window_ms)
    summary.rejected = rejected
    return summary


class AnalyzeWindow(ScalarFunction):
    """Results sink: judge one window summary and store results, counts and alerts atomically."""

    def __init__(self, config: MonitorConfig, store_url: str, reference_path: str | None) -> None:
        self.config = config
        self.store_url = store_url
        self.reference_path = reference_path

    def open(self, function_context: FunctionContext) -> None:
        self.dead_letters = DeadLetterWriter(self.config.source.bootstrap_servers, self.config.source.dlq_topic)
        from alerting.rules import parse_rules
        from driftwarden.store import make_engine
        from jobs.pipeline import drift_policy
        from jobs.references import ReferenceSet, StoredReferences

        self.engine = make_engine(self.store_url, create=False)
        self.policy = drift_policy(self.config.thresholds)
        self.rules = parse_rules(self.config.alerting) if self.config.alerting else None
        self.file_references = ReferenceSet.load(self.reference_path) if self.reference_path else None
        self.stored_references = StoredReferences(self.config, self.policy)
        self.window_metrics = WindowMetrics.open(function_context, self.config)  # jobs/window_metrics.py

    def eval(self, summary_bytes: bytes) -> int:
        from jobs.pipeline import WindowSummary

        summary = WindowSummary.deserialize(summary_bytes)
        rejected = [dead_letter_row(r, summary.model) for r in summary.rejected]
        with self.engine.begin() as conn:
            self._judge_and_store(conn, summary)
            self.dead_letters.store(conn, rejected)
        self.window_metrics.judged(summary)
        self.dead_letters.publish(rejected)
        return 1

    def _judge_and_store(self, conn, summary) -> None:
        from jobs.pipeline import analyze_summary
        from jobs.results import store_window
        from sketches import Reference

        if self.config.model(summary.model) is None:
            reference = Reference()
        elif self.file_references is not None:
            reference = self.file_references.models.get(summary.model, Reference())
        else:
            reference = self.stored_references.reference_for(conn, summary.model, summary.window_start_ms)
            self.stored_references.remember(conn, summary)
            reference = reference or Reference()  # warming up: counts only, no alarms
        report = analyze_summary(summary, reference, self.policy)
        store_window(conn, report, summary.events, summary.unknown_features, self.rules)

    def is_deterministic(self) -> bool:
        return False

    def close(self) -> None:
        self.dead_letters.close()
        self.engine.dispose()


class DeadLetter(ScalarFunction):
    """Dead-letter sink: keep a record Java could not place (or a late one) with its reason."""

    def __init__(self, config: MonitorConfig, store_url: str) -> None:
        self.config = config
        self.store_url = store_url

    def open(self, function_context: FunctionContext) -> None:
        from driftwarden.store import make_engine

        self.engine = make_engine(self.store_url, create=False)
        self.writer = DeadLetterWriter(self.config.source.bootstrap_servers, self.config.source.dlq_topic)
        self.kinds_of = feature_kinds_lookup(self.config)

    def eval(self, topic: str, partition: int, offset: int, reason: str | None, model: str | None,
             event_ms: int | None, value: bytes) -> int:
        reason = reason or self._reason(value)
        row = dead_letter_row(Rejected(topic, partition, offset, reason, value), model, event_ms)
        with self.engine.begin() as conn:
            self.writer.store(conn, [row])
        self.writer.publish([row])
        return 1

    def _reason(self, value: bytes) -> str:
        """Python's reason for a record whose event time or model Java could not read."""
        reason = _reject_reason(value, self.kinds_of)
        return reason or f"bad_event_time{REASON_SEPARATOR}not accepted by the job's RFC 3339 parser"

    def is_deterministic(self) -> bool:
        return False

    def close(self) -> None:
        self.writer.close()
        self.engine.dispose()


def analyze_window_udf(config: MonitorConfig, store_url: str, reference_path: str | None):
    """The AnalyzeWindow sink as a Flink UDF."""
    return udf(AnalyzeWindow(config, store_url, reference_path), result_type=DataTypes.INT())


def dead_letter_udf(config: MonitorConfig, store_url: str):
    """The DeadLetter sink as a Flink UDF."""
    return udf(DeadLetter(config, store_url), result_type=DataTypes.INT())
