"""The Python functions of the streaming drift job, kept thin: all statistics live in sketches/.

* :func:`reject_reason_udf`: vectorised (pandas) validation of raw values; None when valid.
* :func:`summarize_udaf`: vectorised aggregate over one (model, window): a WindowSummary's bytes.
* :class:`AnalyzeWindow`: the results sink; gate, deep check, store and alerts for one window.
* :class:`DeadLetter`: the dead-letter sink; the store's ``dead_letters`` table and a Kafka topic.

Sinks are scalar functions feeding a blackhole table (PyFlink's Table API has no Python sink):
each write is an idempotent upsert, so replays after a restart leave the store unchanged.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Callable, Mapping

import orjson
import pandas as pd
from pyflink.table import DataTypes
from pyflink.table.udf import FunctionContext, ScalarFunction, udaf, udf

from driftwarden.errors import InvalidEventError
from schemas.config import MonitorConfig
from schemas.events import validate_event

#: Between a reason code and its human detail in the value reject_reason returns.
REASON_SEPARATOR = " | "

log = logging.getLogger(__name__)


def reject_reason(value: bytes | str, config: MonitorConfig) -> str | None:
    """Why a raw value is rejected (a reason code with its detail), or None when it is valid."""
    return _reject_reason(value, feature_kinds_lookup(config))


def feature_kinds_lookup(config: MonitorConfig) -> Callable[[str], Mapping[str, str] | None]:
    """model name -> its feature kinds (None for a model the config does not monitor)."""
    return {m.name: dict(m.features) for m in config.models}.get


def _reject_reason(value: bytes | str, kinds_of: Callable[[str], Mapping[str, str] | None]) -> str | None:
    try:
        validate_event(value, kinds_of)
    except InvalidEventError as exc:
        return f"{exc.reason}{REASON_SEPARATOR}{exc.detail}"[:1000]
    return None


def reject_reason_udf(config: MonitorConfig):
    """Pandas scalar UDF: the rejection reason of each raw value (None = valid)."""

    kinds_of = feature_kinds_lookup(config)

    def reasons(values: pd.Series) -> pd.Series:
        return pd.Series([_reject_reason(v, kinds_of) for v in values], dtype=object)

    return udf(reasons, result_type=DataTypes.STRING(), func_type="pandas")


def summarize_udaf(config: MonitorConfig):
    """Pandas aggregate UDF: the serialized WindowSummary of one (model, window)."""
    from jobs.pipeline import WindowSummary, summarize_raw, window_start

    window_ms = config.window.size_ms

    def summarize(values: pd.Series, models: pd.Series, event_ms: pd.Series, topics: pd.Series,
                  partitions: pd.Series, offsets: pd.Series) -> bytes:
        model = str(models.iloc[0])
        start = window_start(int(event_ms.iloc[0]), window_ms)
        model_config = config.model(model)
        if model_config is None:  # not monitored: counted, not sketched
            return WindowSummary(model, start, start + window_ms, events=len(values)).serialize()
        coordinates = zip(topics.tolist(), partitions.tolist(), offsets.tolist())
        return summarize_raw(model, start, window_ms, values.tolist(), coordinates, model_config).serialize()

    return udaf(summarize, result_type=DataTypes.BYTES(), func_type="pandas")


class AnalyzeWindow(ScalarFunction):
    """Results sink: judge one window summary and store results, counts and alerts atomically."""

    def __init__(self, config: MonitorConfig, store_url: str, reference_path: str | None) -> None:
        self.config = config
        self.store_url = store_url
        self.reference_path = reference_path

    def open(self, function_context: FunctionContext) -> None:
        from alerting.rules import parse_rules
        from driftwarden.store import make_engine
        from jobs.pipeline import drift_policy
        from jobs.references import ReferenceSet, StoredReferences

        self.engine = make_engine(self.store_url, create=False)
        self.policy = drift_policy(self.config.thresholds)
        self.rules = parse_rules(self.config.alerting) if self.config.alerting else None
        self.file_references = ReferenceSet.load(self.reference_path) if self.reference_path else None
        self.stored_references = StoredReferences(self.config, self.policy)

    def eval(self, summary_bytes: bytes) -> int:
        from jobs.pipeline import WindowSummary

        summary = WindowSummary.deserialize(summary_bytes)
        with self.engine.begin() as conn:
            self._judge_and_store(conn, summary)
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
        self.engine.dispose()


class DeadLetter(ScalarFunction):
    """Dead-letter sink: keep a rejected or late event in the store and on the DLQ topic."""

    def __init__(self, store_url: str, bootstrap: str, dlq_topic: str | None) -> None:
        self.store_url = store_url
        self.bootstrap = bootstrap
        self.dlq_topic = dlq_topic

    def open(self, function_context: FunctionContext) -> None:
        from confluent_kafka import Producer

        from driftwarden.store import make_engine

        self.engine = make_engine(self.store_url, create=False)
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 50}) if self.dlq_topic else None

    def eval(self, topic: str, partition: int, offset: int, reason: str, model: str | None,
             event_ms: int | None, value: bytes) -> int:
        from driftwarden.store import insert_ignore
        from schemas.tables import dead_letters

        now = datetime.now(timezone.utc)
        event_time = datetime.fromtimestamp(event_ms / 1000, tz=timezone.utc) if event_ms else None
        code, _, detail = reason.partition(REASON_SEPARATOR)
        payload = value.decode("utf-8", errors="backslashreplace")
        row = {"topic": topic, "partition": partition, "offset": offset, "reason": code[:200], "detail": detail,
               "model": model, "event_time": event_time, "payload": payload, "seen_at": now}
        with self.engine.begin() as conn:
            insert_ignore(conn, dead_letters, [row], ("topic", "partition", "offset"))
        if self.producer is not None:
            record = {**row, "event_time": event_time.isoformat() if event_time else None, "seen_at": now.isoformat()}
            self.producer.produce(self.dlq_topic, orjson.dumps(record), key=f"{topic}:{partition}:{offset}")
            self.producer.poll(0)
        return 1

    def is_deterministic(self) -> bool:
        return False

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(10)
        self.engine.dispose()


def analyze_window_udf(config: MonitorConfig, store_url: str, reference_path: str | None):
    """The AnalyzeWindow sink as a Flink UDF."""
    return udf(AnalyzeWindow(config, store_url, reference_path), result_type=DataTypes.INT())


def dead_letter_udf(store_url: str, bootstrap: str, dlq_topic: str | None):
    """The DeadLetter sink as a Flink UDF."""
    return udf(DeadLetter(store_url, bootstrap, dlq_topic), result_type=DataTypes.INT())
