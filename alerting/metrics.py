"""Prometheus metrics: delivery outcomes (in-process) and a collector that reads the SQL store.

:class:`StoreCollector` derives the job's counters and gauges from durable rows on every scrape
(windows closed, events, late and rejected events, gate alarms, deep checks, latest drift scores,
and per segment the latest drift score and severity), so /metrics survives restarts of the job and of
this process. Every metric takes ``registry=``.

Segment labels are bounded: per model at most its cap (the config's ``top`` + ``(other)`` when the
collector is given the config's :func:`segment_caps`, else :data:`SEGMENT_CAP`) segments keep their
name, the most recent first (then by events); the rest are folded into :data:`OTHER_SEGMENT` (the
worst score and severity among them) and counted by ``driftwarden_segments_folded``.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Connection, Engine, and_, case, func, select
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.records import boolean_shares
from driftwarden.schemas.alert_tables import alert_deliveries, alerts
from driftwarden.schemas.tables import dead_letters, segment_results, window_counts, window_results

log = logging.getLogger(__name__)
LATE_REASON = "late"  # dead_letters.reason of events that missed their window (jobs/ writes it)
SCORE_COLUMNS = ("gate_ks", "gate_psi", "gate_emd", "deep_ks_stat", "deep_psi", "deep_emd")
_SEVERITY_VALUE = {"none": 0, "minor": 1, "moderate": 2, "major": 3}
#: The most segment labels per model when the config is not known: SegmentConfig.top's maximum plus "(other)".
SEGMENT_CAP = 101
OTHER_SEGMENT = "_other"  # the label of the segments past a model's cap


def segment_caps(config) -> dict[str, int]:
    """Per model of a MonitorConfig, the most segment labels its metrics carry: ``top`` + other (0: no segments)."""
    return {m.name: m.segments.top + 1 if m.segments else 0 for m in config.models}


class DeliveryMetrics:
    """Counters of webhook deliveries by outcome and of attempts by result, plus attempt latency."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        kwargs = {"registry": registry} if registry is not None else {}
        self.deliveries = Counter("driftwarden_alert_deliveries", "Webhook deliveries finished or rescheduled, by outcome",
                                  ["route", "outcome"], **kwargs)
        self.attempts = Counter("driftwarden_alert_delivery_attempts", "Webhook POST attempts by result",
                                ["route", "result"], **kwargs)
        self.latency = Histogram("driftwarden_alert_delivery_seconds", "Duration of one webhook POST attempt",
                                 ["route"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), **kwargs)

    def outcome(self, route: str, outcome: str) -> None:
        """Count one delivery outcome (sent, failed, dead, disabled, rescheduled)."""
        self.deliveries.labels(route, outcome).inc()

    def attempt(self, route: str, result: str, seconds: float) -> None:
        """Count one attempt with its result (2xx, 4xx, 5xx, 429, timeout, error) and duration."""
        self.attempts.labels(route, result).inc()
        self.latency.labels(route).observe(seconds)


class StoreCollector(Collector):
    """Reads the results and alerting tables on each scrape and yields them as metric families."""

    def __init__(self, engine: Engine, min_interval_s: float = 0.0,
                 segment_caps: Mapping[str, int] | None = None) -> None:
        self.engine = engine
        self.min_interval_s = min_interval_s
        self.segment_caps = dict(segment_caps or {})
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> list[Metric]:
        """Return no descriptions, so registering does not run a scrape."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield every store-derived metric (reusing a result younger than ``min_interval_s``)."""
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] >= self.min_interval_s:
            self._cached = (now, list(self._read()))
        yield from self._cached[1]

    def _read(self) -> Iterator[Metric]:
        """Read the store; on a store error yield only ``driftwarden_store_up 0``."""
        up = GaugeMetricFamily("driftwarden_store_up", "1 when the last scrape could read the SQL store")
        try:
            with self.engine.connect() as conn:
                families = list(self._families(conn))
        except SQLAlchemyError as exc:
            log.warning("metrics scrape could not read the store: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, conn: Connection) -> Iterator[Metric]:
        yield from self._window_counts(conn)
        yield from self._window_results(conn)
        yield from self._latest_scores(conn)
        yield from self._segment_scores(conn)
        yield from self._rejected(conn)
        yield from self._alerting(conn)

    def _window_counts(self, conn: Connection) -> Iterator[Metric]:
        closed = CounterMetricFamily("driftwarden_windows_closed", "Windows closed and written", labels=["model"])
        events = CounterMetricFamily("driftwarden_window_events", "Events counted in closed windows", labels=["model"])
        checked = CounterMetricFamily("driftwarden_windows_deep_checked",
                                      "Windows whose gate fired so that the deep check ran", labels=["model"])
        wc = window_counts.c
        deep = func.coalesce(func.sum(case((wc.deep_checked, 1), else_=0)), 0)
        for model, n, total, n_deep in conn.execute(select(
                wc.model, func.count(), func.coalesce(func.sum(wc.events), 0), deep).group_by(wc.model)):
            closed.add_metric([model], n)
            events.add_metric([model], total)
            checked.add_metric([model], n_deep)
        latest = GaugeMetricFamily("driftwarden_latest_window_events", "Events in the latest closed window",
                                   labels=["model"])
        newest = select(wc.model, func.max(wc.window_start).label("ws")).group_by(wc.model).subquery()
        for model, n in conn.execute(select(wc.model, wc.events).join(
                newest, and_(wc.model == newest.c.model, wc.window_start == newest.c.ws))):
            latest.add_metric([model], n)
        yield from (closed, events, checked, latest)

    def _window_results(self, conn: Connection) -> Iterator[Metric]:
        alarms = CounterMetricFamily("driftwarden_gate_alarms", "Windows where the cheap gate alarmed",
                                     labels=["model", "feature"])
        deep = CounterMetricFamily("driftwarden_deep_checks", "Deep checks run, by verdict",
                                   labels=["model", "feature", "verdict"])
        wr = window_results.c
        for model, feature, n in conn.execute(select(wr.model, wr.feature, func.count()).where(
                wr.gate_alarm.is_(True)).group_by(wr.model, wr.feature)):
            alarms.add_metric([model, feature], n)
        ran = (wr.deep_ks_stat.is_not(None)) | (wr.deep_psi.is_not(None)) | (wr.deep_emd.is_not(None))
        for model, feature, drifted, n in conn.execute(select(wr.model, wr.feature, wr.drifted, func.count()).where(
                ran).group_by(wr.model, wr.feature, wr.drifted)):
            deep.add_metric([model, feature, "drifted" if drifted else "not_drifted"], n)
        invalid = CounterMetricFamily("driftwarden_invalid_values",
                                      "Monitored values of the wrong type in stored windows (their events were kept)",
                                      labels=["model", "feature"])
        for model, feature, n in conn.execute(select(wr.model, wr.feature, func.sum(wr.invalid)).where(
                wr.invalid > 0).group_by(wr.model, wr.feature)):
            invalid.add_metric([model, feature], n)
        yield from (alarms, deep, invalid, self._judging_errors(conn))

    def _judging_errors(self, conn: Connection) -> Metric:
        """Stored (feature or segment) cells whose judging raised, per model (``driftwarden_judging_errors_total``)."""
        errors = CounterMetricFamily("driftwarden_judging_errors",
                                     "Features (and segment cells) of stored windows not judged because judging raised",
                                     labels=["model"])
        counts: dict[str, int] = {}
        for table in (window_results, segment_results):
            for model, n in conn.execute(select(table.c.model, func.count()).where(
                    table.c.error.is_not(None)).group_by(table.c.model)):
                counts[model] = counts.get(model, 0) + n
        for model, n in sorted(counts.items()):
            errors.add_metric([model], n)
        return errors

    def _latest_scores(self, conn: Connection) -> Iterator[Metric]:
        scores = GaugeMetricFamily("driftwarden_drift_score", "Drift scores of the latest window per feature",
                                   labels=["model", "feature", "score"])
        severity = GaugeMetricFamily("driftwarden_feature_severity",
                                     "Severity of the latest window (0 none, 1 minor, 2 moderate, 3 major)",
                                     labels=["model", "feature"])
        wr = window_results.c
        newest = select(wr.model, wr.feature, func.max(wr.window_start).label("ws")).group_by(
            wr.model, wr.feature).subquery()
        rows = conn.execute(select(window_results).join(newest, and_(
            wr.model == newest.c.model, wr.feature == newest.c.feature, wr.window_start == newest.c.ws)))
        shares = GaugeMetricFamily("driftwarden_boolean_share",
                                   "A boolean feature's shares of true, false and null values in the latest window",
                                   labels=["model", "feature", "value"])
        for row in rows:
            for col in SCORE_COLUMNS:
                value = getattr(row, col)
                if value is not None:
                    scores.add_metric([row.model, row.feature, col], value)
            severity.add_metric([row.model, row.feature], _SEVERITY_VALUE.get(row.severity, 0))
            if row.true_count is not None and row.count:
                for value, share in boolean_shares(row.count, row.missing, row.true_count).items():
                    shares.add_metric([row.model, row.feature, value], share)
        yield from (scores, severity, shares)

    def _segment_scores(self, conn: Connection) -> Iterator[Metric]:
        """The latest segment_results row per (model, feature, segment), segment labels capped per model."""
        scores = GaugeMetricFamily("driftwarden_segment_drift_score",
                                   "PSI of the latest window per feature and segment (deep where it ran, else gate)",
                                   labels=["model", "feature", "segment"])
        severity = GaugeMetricFamily("driftwarden_segment_severity",
                                     "Severity of the latest window per feature and segment (0 none .. 3 major)",
                                     labels=["model", "feature", "segment"])
        folded = GaugeMetricFamily("driftwarden_segments_folded",
                                   f"Segments past the model's label cap, reported as segment={OTHER_SEGMENT!r}",
                                   labels=["model"])
        sr = segment_results.c
        newest = select(sr.model, sr.feature, sr.segment, func.max(sr.window_start).label("ws")).group_by(
            sr.model, sr.feature, sr.segment).subquery()
        rows = conn.execute(select(sr.model, sr.feature, sr.segment, sr.window_start, sr.count,
                                   func.coalesce(sr.deep_psi, sr.gate_psi), sr.severity).join(newest, and_(
            sr.model == newest.c.model, sr.feature == newest.c.feature, sr.segment == newest.c.segment,
            sr.window_start == newest.c.ws))).all()
        labels = self._segment_labels(rows)
        cells: dict[tuple[str, str, str], tuple[float | None, int]] = {}
        for model, feature, segment, _ws, _n, psi, sev in rows:
            key = (model, feature, labels[model, segment])
            old_psi, old_sev = cells.get(key, (None, 0))
            worst = max((p for p in (old_psi, psi) if p is not None), default=None)
            cells[key] = (worst, max(old_sev, _SEVERITY_VALUE.get(sev, 0)))
        for key, (psi, sev) in sorted(cells.items()):
            if psi is not None:
                scores.add_metric(list(key), psi)
            severity.add_metric(list(key), sev)
        for model in sorted({m for m, _ in labels}):
            folded.add_metric([model], sum(1 for (m, _), lab in labels.items() if m == model and lab == OTHER_SEGMENT))
        yield from (scores, severity, folded)

    def _segment_labels(self, rows) -> dict[tuple[str, str], str]:
        """Map each (model, segment) to its label: itself within the model's cap (newest, then largest), else other."""
        rank: dict[tuple[str, str], tuple] = {}
        for model, _feature, segment, ws, n, _psi, _sev in rows:
            key = (ws, n or 0)
            rank[model, segment] = max(rank.get((model, segment), key), key)
        ordered = sorted(rank, key=lambda ms: (ms[0], -rank[ms][0].timestamp(), -rank[ms][1], ms[1]))
        labels, kept = {}, {}
        for model, segment in ordered:
            kept[model] = kept.get(model, 0) + 1
            within = kept[model] <= self.segment_caps.get(model, SEGMENT_CAP)
            labels[model, segment] = segment if within else OTHER_SEGMENT
        return labels

    def _rejected(self, conn: Connection) -> Iterator[Metric]:
        """Dead letters: late events per model, every other reason as rejected."""
        rejected = CounterMetricFamily("driftwarden_rejected_events", "Events rejected (dead-lettered), by reason",
                                       labels=["reason"])
        late = CounterMetricFamily("driftwarden_late_events", "Events that arrived after their window closed",
                                   labels=["model"])
        dl = dead_letters.c
        for reason, model, n in conn.execute(select(dl.reason, dl.model, func.count()).group_by(dl.reason, dl.model)):
            if reason == LATE_REASON:
                late.add_metric([model or ""], n)
        for reason, n in conn.execute(select(dl.reason, func.count()).where(dl.reason != LATE_REASON)
                                      .group_by(dl.reason)):
            rejected.add_metric([reason], n)
        yield from (rejected, late)

    def _alerting(self, conn: Connection) -> Iterator[Metric]:
        outbox = GaugeMetricFamily("driftwarden_alert_outbox", "Webhook deliveries in the store, by status",
                                   labels=["route", "status"])
        d = alert_deliveries.c
        for route, status, n in conn.execute(select(d.route, d.status, func.count()).group_by(d.route, d.status)):
            outbox.add_metric([route, status], n)
        firing = GaugeMetricFamily("driftwarden_alerts_firing", "Alerts currently firing", labels=["model"])
        for model, n in conn.execute(select(alerts.c.model, func.count()).where(
                alerts.c.status == "firing").group_by(alerts.c.model)):
            firing.add_metric([model], n)
        yield from (outbox, firing)


def serve_metrics(port: int, registry: CollectorRegistry, addr: str = "127.0.0.1"):
    """Serve ``registry`` on http://addr:port/metrics in a daemon thread; return (server, thread)."""
    return start_http_server(port, addr=addr, registry=registry)
