"""The Python functions of the streaming drift job, kept thin: all statistics live in sketches/.

The per-event path runs in the JVM: Java reads every record's envelope and, for the records it
can vouch for, its features (``DW_FEATURES``), and the window aggregate is Java too
(``WindowSummaryAgg``: deterministic mergeable summaries, see ``sketches/FORMAT.md``). Python
runs where it must:

* :class:`ValidateRecord`: every record the JVM cannot take straight to a window, one table
  function: each goes through the one validator (:func:`pipeline.validation.validate_record`, as
  in replay) first; a rejected one is kept in the dead letters (the store's ``dead_letters`` table
  and a Kafka topic) with the validator's reason, a valid one the JVM turned away (a future clock,
  late: ``pipeline/event_time.py``'s rules) with the JVM's, and a valid one whose features Java
  does not vouch for comes back as the same typed columns. One Python operator for all: each Python
  operator has a Python runner of its own (a worker process, unless PyFlink runs it in the client
  process: "loopback", for a local job after the first).
* :class:`AnalyzeWindow`: the results sink, once per (model, window): gate, deep check, store,
  alerts (one transaction).

Sinks are Python functions feeding a blackhole table (PyFlink's Table API has no Python sink):
each write is an idempotent upsert, so replays after a restart leave the store unchanged, and a
write is retried while the store is unavailable (jobs/store_retry.py).
"""

from __future__ import annotations

import logging
from pyflink.common import Row
from pyflink.table import DataTypes
from pyflink.table.udf import FunctionContext, ScalarFunction, TableFunction, udf, udtf

from driftwarden.core.errors import InvalidEventError
from driftwarden.jobs.dead_letter_topic import DeadLetterWriter
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.jobs.store_retry import with_store_retries
from driftwarden.jobs.window_metrics import WindowMetrics
from driftwarden.pipeline.dead_letters import Rejected, dead_letter_row
from driftwarden.pipeline.validation import LATE, REASON_SEPARATOR, reason_text, validate_record
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
from driftwarden.schemas.events import NUMERIC, EventRules

__all__ = ["ENVELOPE", "ValidateRecord", "AnalyzeWindow", "validate_record_udtf", "analyze_window_udf"]

log = logging.getLogger(__name__)

#: The JVM's verdict for a record whose event time or model it could not read: Python finds the exact reason.
ENVELOPE = "envelope"


class ValidateRecord(TableFunction):
    """A record the JVM cannot take straight to a window: a dead letter, or validated into one row.

    ``turned_away`` is the JVM's verdict: None when it only could not vouch for the features,
    :data:`ENVELOPE` when it could not read the event time or the model, else the reason of a
    record its event-time rules turned away (``late``, ``future | ...``). Every record is validated
    first (:func:`pipeline.validation.validate_record`, replay's order: a bad record keeps the
    validator's reason, late or not); a valid record the JVM turned away is kept with the JVM's
    reason. A valid record yields ``(unknown, invalid, c0 .. cN)``: its configured features (and its
    prediction, where monitored) in the columns of :class:`FeatureColumnSpec`, the count of its
    values of unconfigured features, and its values of the wrong type
    (:meth:`FeatureColumnSpec.invalid_json`). Anything else is kept in the dead letters and yields nothing.

    Dead letters are written once per bundle (one store transaction, then the DLQ topic), at the
    bundle's end, which Flink waits for before a checkpoint barrier passes (jobs/bundles.py), or
    sooner when :data:`MAX_BUFFERED` are waiting: at least once, as before, without a transaction
    per record.
    """

    #: Dead letters written at once at the latest (a bundle is at most 5,000 records by default).
    MAX_BUFFERED = 1000

    def __init__(self, config: MonitorConfig, store_url: str) -> None:
        self.config = config
        self.store_url = store_url

    def open(self, function_context: FunctionContext) -> None:
        from driftwarden.core.store import make_engine
        from driftwarden.jobs.bundles import install_bundle_hook

        install_bundle_hook()
        self.engine = make_engine(self.store_url, create=False)
        self.writer = DeadLetterWriter(self.config.source, self.config.source.dlq_topic)
        self.kinds_of = feature_kinds_lookup(self.config)
        self.rules = EventRules.of(self.config.source)
        self.spec = FeatureColumnSpec.from_config(self.config)
        self.rows: list[dict] = []
        self.payloads: list[bytes] = []

    def keep(self, record: Rejected, model: str | None, event_ms: int | None) -> None:
        """Queue one dead letter (written by :meth:`finish_bundle`)."""
        self.rows.append(dead_letter_row(record, model, event_ms))
        self.payloads.append(record.payload)
        if len(self.rows) >= self.MAX_BUFFERED:
            self.finish_bundle()

    def finish_bundle(self) -> None:
        """Store the queued dead letters in one transaction (retried while the store is down), then publish them."""
        if not self.rows:
            return
        with_store_retries("dead_letters", self._store)
        self.writer.publish(self.rows, self.payloads)
        self.rows, self.payloads = [], []

    def _store(self) -> None:
        with self.engine.begin() as conn:
            self.writer.store(conn, self.rows)
            self._recount_late(conn)

    def _recount_late(self, conn) -> None:
        """Each window with a late event among the rows, if already stored, counts them (pipeline/results.py)."""
        from driftwarden.pipeline.event_time import window_bounds
        from driftwarden.pipeline.results import recount_late

        windows = {(row["model"], window_bounds(int(row["event_time"].timestamp() * 1000), self.config.window.size_ms))
                   for row in self.rows if row["reason"] == LATE and row["event_time"] is not None}
        for model, (start, end) in sorted(windows, key=lambda w: (w[0] or "", w[1][0])):
            recount_late(conn, model, start, end)

    def close(self) -> None:
        self.finish_bundle()
        self.writer.close()
        self.engine.dispose()

    def eval(self, topic: str, partition: int, offset: int, turned_away: str | None, model: str | None,
             event_ms: int | None, value: bytes):
        try:
            record = validate_record(value, self.kinds_of, self.rules)
        except InvalidEventError as exc:
            self.keep(Rejected(topic, partition, offset, reason_text(exc), value), model,
                      None if turned_away == ENVELOPE else event_ms)
            return
        if turned_away == ENVELOPE:  # valid for Python, not for Java's reader
            self.keep(Rejected(topic, partition, offset, self._envelope_reason(), value), model, None)
            return
        if turned_away is not None:
            self.keep(Rejected(topic, partition, offset, turned_away, value), model, event_ms)
            return
        event = record.event
        if record.values is None:  # a model the config does not monitor: counted, not sketched
            yield Row(0, None, *self.spec.row_values(event.model, None))
            return
        yield Row(record.unknown, self.spec.invalid_json(event.model, event.invalid),
                  *self.spec.row_values(event.model, record.values))

    def _envelope_reason(self) -> str:
        """The reason of a record Python reads but Java could not: its Avro reader refused it, or its
        stricter RFC 3339 parser refused the event time."""
        if self.rules.decode is not None:  # an Avro record Java's reader refused (tests/test_avro_registry.py)
            return f"avro_undecodable{REASON_SEPARATOR}refused by the job's Java Avro reader"
        return f"bad_event_time{REASON_SEPARATOR}not accepted by the job's RFC 3339 parser"

    def is_deterministic(self) -> bool:
        return False  # it writes dead letters: the planner must call it once per record


def validate_record_udtf(config: MonitorConfig, store_url: str):
    """The ValidateRecord function as a Flink table function: ``(unknown, invalid, c0 .. cN)``."""
    spec = FeatureColumnSpec.from_config(config)
    types = [DataTypes.INT(), DataTypes.STRING()] + [DataTypes.DOUBLE() if kind == NUMERIC else DataTypes.STRING()
                                                     for kind in spec.kinds]
    return udtf(ValidateRecord(config, store_url), result_types=types)


class AnalyzeWindow(ScalarFunction):
    """Results sink: judge one window summary and store results, counts and alerts atomically."""

    def __init__(self, config: MonitorConfig, store_url: str, reference_path: str | None) -> None:
        self.config = config
        self.store_url = store_url
        self.reference_path = reference_path

    def open(self, function_context: FunctionContext) -> None:
        from driftwarden.alerting.rules import parse_rules
        from driftwarden.core.gc_pause import freeze_loaded
        from driftwarden.core.store import make_engine
        from driftwarden.pipeline.judging import drift_policy
        from driftwarden.pipeline.reference_set import ReferenceSet
        from driftwarden.pipeline.references import References

        self.engine = make_engine(self.store_url, create=False)
        policy = drift_policy(self.config.thresholds, self.config.window.size_ms)
        self.rules = parse_rules(self.config.alerting) if self.config.alerting else None
        self.references = References(self.config, policy,
                                     ReferenceSet.load(self.reference_path) if self.reference_path else None,
                                     where=str(self.reference_path))
        self.window_metrics = WindowMetrics.open(function_context, self.config)  # jobs/window_metrics.py
        freeze_loaded()  # the references, held for the job's life, out of the collector's scans

    def eval(self, summary_bytes: bytes) -> int:
        from driftwarden.pipeline.summary import WindowSummary

        summary = WindowSummary.deserialize(summary_bytes)
        report = with_store_retries("results", lambda: self._store(summary))
        if report is not None:
            self.window_metrics.judged(summary, sum(f.error is not None for f in report.features))
        return 1

    def _store(self, summary):
        """One transaction: the window's results, counts and alerts; its report (None: it was stored already)."""
        with self.engine.begin() as conn:
            return self._judge_and_store(conn, summary)

    def _judge_and_store(self, conn, summary):
        """Judge the window and store it; its report, None when it was stored already (:meth:`_already_final`)."""
        from driftwarden.pipeline.judging import judge_window
        from driftwarden.pipeline.results import previous_cusum, store_window
        from driftwarden.pipeline.window_store import SqlWindows
        from driftwarden.schemas.events import utc_from_ms

        if self._already_final(conn, summary):
            return None
        state = previous_cusum(conn, summary.model, utc_from_ms(summary.window_start_ms))
        report, _reference = judge_window(summary, self.references, SqlWindows(conn), state)
        store_window(conn, report, summary.events, summary.unknown_features, self.rules)
        return report

    def _already_final(self, conn, summary) -> bool:
        """A stored window is final: a summary of it again (after a restart) changes nothing.

        Lateness is decided per partition from state restored with the offsets, so a window fired
        again after a restart has the same events; one that does not (the source's idleness rule,
        docs/faults.md, is there so that none does) is logged and counted, and never replaces the
        stored one (nor enters a rolling reference).
        """
        from driftwarden.pipeline.results import stored_events
        from driftwarden.schemas.events import utc_from_ms

        events = stored_events(conn, summary.model, utc_from_ms(summary.window_start_ms))
        if events is None:
            return False
        if events != summary.events:
            log.warning("window %s of model %r is already stored with %d events; its summary of %d events "
                        "after a restart is not kept", utc_from_ms(summary.window_start_ms).isoformat(),
                        summary.model[:200], events, summary.events)
            self.window_metrics.kept_final(summary)
        return True

    def is_deterministic(self) -> bool:
        return False

    def close(self) -> None:
        self.engine.dispose()


def analyze_window_udf(config: MonitorConfig, store_url: str, reference_path: str | None):
    """The AnalyzeWindow sink as a Flink UDF."""
    return udf(AnalyzeWindow(config, store_url, reference_path), result_type=DataTypes.INT())
