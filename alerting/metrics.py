"""Prometheus metrics: delivery outcomes (in-process) and a collector that reads the SQL store.

:class:`StoreCollector` derives the job's counters and gauges from durable rows on every scrape
(windows closed, events, late and rejected events, gate alarms, deep checks, latest drift scores,
and per segment the latest drift score and severity), so /metrics survives restarts of the job and of
this process. A scrape costs five queries that read a row (or an index lookup) per series, whatever the
size of the tables: the counters are the store's running totals (``core.totals``, kept by the writers),
the latest scores one index lookup per (model, feature[, segment]). Every metric takes ``registry=``.

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
from sqlalchemy import Connection, Engine, Table, func, select
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.records import boolean_shares
from driftwarden.core.totals import Key, read_totals
from driftwarden.schemas.alert_tables import alerts
from driftwarden.schemas.tables import segment_results, store_totals, window_counts, window_results

log = logging.getLogger(__name__)
SCORE_COLUMNS = ("gate_ks", "gate_psi", "gate_emd", "deep_ks_stat", "deep_psi", "deep_emd")
_SEVERITY_VALUE = {"none": 0, "minor": 1, "moderate": 2, "major": 3}
#: The most segment labels per model when the config is not known: SegmentConfig.top's maximum plus "(other)".
SEGMENT_CAP = 101
OTHER_SEGMENT = "_other"  # the label of the segments past a model's cap
DELIVERY_OUTCOMES = ("sent", "failed", "dead", "disabled", "rescheduled")


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

    def preset(self, routes: list[str]) -> None:
        """Export every route's outcomes at 0 from the start, so that the first dead delivery is an increase."""
        for route in routes:
            for outcome in DELIVERY_OUTCOMES:
                self.deliveries.labels(route, outcome)

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
        totals = read_totals(conn)  # a row per series: what the writers counted (core.totals)
        yield from self._window_counts(conn, totals)
        yield from self._window_results(totals)
        yield from self._latest_scores(conn)
        yield from self._segment_scores(conn)
        yield from self._rejected(totals)
        yield from self._alerting(conn, totals)

    def _window_counts(self, conn: Connection, totals: dict[Key, int]) -> Iterator[Metric]:
        closed = CounterMetricFamily("driftwarden_windows_closed", "Windows closed and written", labels=["model"])
        events = CounterMetricFamily("driftwarden_window_events", "Events counted in closed windows", labels=["model"])
        checked = CounterMetricFamily("driftwarden_windows_deep_checked",
                                      "Windows whose gate fired so that the deep check ran", labels=["model"])
        for (metric, model, _, _), n in sorted(totals.items()):
            if metric == "windows_closed":  # the model's other counters start at 0 with its first window
                closed.add_metric([model], n)
                events.add_metric([model], totals.get(("window_events", model, "", ""), 0))
                checked.add_metric([model], totals.get(("windows_deep_checked", model, "", ""), 0))
        latest = GaugeMetricFamily("driftwarden_latest_window_events", "Events in the latest closed window",
                                   labels=["model"])
        wc, t = window_counts.c, store_totals.c
        newest = (select(wc.events).where(wc.model == t.model).order_by(wc.window_start.desc()).limit(1)
                  .correlate(store_totals).scalar_subquery())  # one index lookup per model
        for model, n in conn.execute(select(t.model, newest).where(t.metric == "windows_closed").order_by(t.model)):
            if n is not None:
                latest.add_metric([model], n)
        yield from (closed, events, checked, latest)

    def _window_results(self, totals: dict[Key, int]) -> Iterator[Metric]:
        alarms = CounterMetricFamily("driftwarden_gate_alarms", "Windows where the cheap gate alarmed",
                                     labels=["model", "feature"])
        deep = CounterMetricFamily("driftwarden_deep_checks", "Deep checks run, by verdict",
                                   labels=["model", "feature", "verdict"])
        invalid = CounterMetricFamily("driftwarden_invalid_values",
                                      "Monitored values of the wrong type in stored windows (their events were kept)",
                                      labels=["model", "feature"])
        errors = CounterMetricFamily("driftwarden_judging_errors",
                                     "Features (and segment cells) of stored windows not judged because judging raised",
                                     labels=["model"])
        families = {"gate_alarms": alarms, "invalid_values": invalid}
        for (metric, model, feature, label), n in sorted(totals.items()):
            if metric in families:
                families[metric].add_metric([model, feature], n)
            elif metric == "deep_checks":
                deep.add_metric([model, feature, label], n)
            elif metric == "judging_errors":
                errors.add_metric([model], n)
        yield from (alarms, deep, invalid, errors)

    def _latest_scores(self, conn: Connection) -> Iterator[Metric]:
        scores = GaugeMetricFamily("driftwarden_drift_score", "Drift scores of the latest window per feature",
                                   labels=["model", "feature", "score"])
        severity = GaugeMetricFamily("driftwarden_feature_severity",
                                     "Severity of the latest window (0 none, 1 minor, 2 moderate, 3 major)",
                                     labels=["model", "feature"])
        shares = GaugeMetricFamily("driftwarden_boolean_share",
                                   "A boolean feature's shares of true, false and null values in the latest window",
                                   labels=["model", "feature", "value"])
        for row in conn.execute(_latest_rows(window_results, "windows_judged")):
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
        rows = self._latest_segment_rows(conn)
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

    def _latest_segment_rows(self, conn: Connection) -> list[tuple]:
        """The latest segment_results row per (model, feature, segment) as (model, feature, segment, window_start,
        count, psi, severity), the psi deep where the deep tests ran, else the gate's."""
        return [(r.model, r.feature, r.segment, r.window_start, r.count, r.deep_psi if r.deep_psi is not None
                 else r.gate_psi, r.severity) for r in conn.execute(_latest_rows(segment_results, "segment_windows_judged"))]

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

    def _rejected(self, totals: dict[Key, int]) -> Iterator[Metric]:
        """Dead letters: late events per model, every other reason as rejected."""
        rejected = CounterMetricFamily("driftwarden_rejected_events", "Events rejected (dead-lettered), by reason",
                                       labels=["reason"])
        late = CounterMetricFamily("driftwarden_late_events", "Events that arrived after their window closed",
                                   labels=["model"])
        for (metric, model, _, label), n in sorted(totals.items()):
            if metric == "late_events":
                late.add_metric([model], n)
            elif metric == "rejected_events":
                rejected.add_metric([label], n)
        yield from (rejected, late)

    def _alerting(self, conn: Connection, totals: dict[Key, int]) -> Iterator[Metric]:
        outbox = GaugeMetricFamily("driftwarden_alert_outbox", "Webhook deliveries in the store, by status",
                                   labels=["route", "status"])
        for (metric, _, route, status), n in sorted(totals.items()):
            if metric == "deliveries" and n:
                outbox.add_metric([route, status], n)
        firing = GaugeMetricFamily("driftwarden_alerts_firing", "Alerts currently firing", labels=["model"])
        # one row per alert identity (model, feature, segment), not per window: bounded by the series
        for model, n in conn.execute(select(alerts.c.model, func.count()).where(
                alerts.c.status == "firing").group_by(alerts.c.model)):
            firing.add_metric([model], n)
        yield from (outbox, firing)


def _latest_rows(table: Table, series_metric: str):
    """The newest row of ``table`` per series that ``series_metric`` lists in the totals (model, feature
    [, segment]): one lookup in the table's unique index per series, whatever the table's size."""
    c, t = table.c, store_totals.c
    same = [c.model == t.model, c.feature == t.item] + ([c.segment == t.label] if "segment" in c else [])
    newest = (select(c.id).where(*same).order_by(c.window_start.desc()).limit(1)
              .correlate(store_totals).scalar_subquery())
    return (select(table).select_from(store_totals).join(table, c.id == newest)
            .where(t.metric == series_metric).order_by(t.model, t.item, t.label))


def serve_metrics(port: int, registry: CollectorRegistry, addr: str = "127.0.0.1"):
    """Serve ``registry`` on http://addr:port/metrics in a daemon thread; return (server, thread)."""
    return start_http_server(port, addr=addr, registry=registry)
