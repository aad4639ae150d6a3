"""`driftwarden status`: is the running job keeping up? One screen for on-call, one exit code for scripts.

Reads three places, so it works for the embedded MiniCluster and a cluster alike:

* Kafka: the job group's consumer lag per partition (jobs/consumer_lag.py), connected as ``source.security``
  says (a refused connection raises KafkaSecurityError: the config is wrong, nothing can be judged);
* the SQL store: the last window judged per model, and the alert outbox backlog;
* Prometheus (scraping Flink's reporter): watermark lag per partition and for the job, the last
  completed checkpoint, failed checkpoints, restarts (the dashboard's queries,
  alerting/dashboards/health.py).

Exit 0 when everything is within the limits, 3 when something is behind, 4 when nothing is behind
but something could not be read (driftwarden.core.errors; ``driftwarden status`` also exits 4 on a
KafkaSecurityError, after one line that says why). The default limits are the alert rules' thresholds
(deploy/prometheus/driftwarden-health.rules.yml).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import httpx
from sqlalchemy import Engine, func, select

from driftwarden.alerting.dashboards.health import SIGNALS
from driftwarden.core.errors import EXIT_BEHIND, EXIT_UNKNOWN, KafkaSecurityError, ServiceError
from driftwarden.core.kafka_check import check_kafka
from driftwarden.alerting.dashboards.macros import expand_promql
from driftwarden.jobs.consumer_lag import PartitionLag, consumer_lags
from driftwarden.schemas.alert_tables import alert_deliveries
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.tables import window_counts

OK, BEHIND, UNKNOWN = "ok", "behind", "unknown"


@dataclass(frozen=True)
class Limits:
    """When a signal counts as behind (defaults: the alert rules' thresholds)."""

    max_lag_s: float = 300.0
    max_windows: float = 3.0
    max_checkpoint_age_s: float = 60.0


@dataclass
class Check:
    """One line of the report: what, its value, and whether it is within its limit."""

    scope: str
    signal: str
    value: str
    state: str


@dataclass
class Report:
    """Every check of one status run."""

    checks: list[Check] = field(default_factory=list)

    def add(self, scope: str, signal: str, value: str, state: str) -> None:
        """Append one check."""
        self.checks.append(Check(scope, signal, value, state))

    @property
    def exit_code(self) -> int:
        """0 all ok, 3 something behind, 4 nothing behind but something unknown (driftwarden.core.errors)."""
        states = {c.state for c in self.checks}
        return EXIT_BEHIND if BEHIND in states else EXIT_UNKNOWN if UNKNOWN in states else 0


def collect_status(config: MonitorConfig, engine: Engine, prometheus_url: str | None,
                   limits: Limits = Limits(), now_s: float | None = None) -> Report:
    """Read Kafka, the store and Prometheus; judge each signal against ``limits``."""
    now_s = time.time() if now_s is None else now_s
    report = Report()
    _consumer_lag(report, config, limits)
    _windows(report, config, engine, limits, now_s)
    _outbox(report, engine, limits, now_s)
    _flink(report, prometheus_url, limits)
    return report


def _state(value: float | None, limit: float) -> str:
    return UNKNOWN if value is None else BEHIND if value > limit else OK


def _consumer_lag(report: Report, config: MonitorConfig, limits: Limits) -> None:
    from confluent_kafka import KafkaException

    try:
        check_kafka(config.source)
        lags: list[PartitionLag] = consumer_lags(config.source)
    except KafkaSecurityError:
        raise
    except (KafkaException, ServiceError) as exc:
        report.add("kafka", "consumer lag", f"unreadable: {exc}", UNKNOWN)
        return
    if not lags:
        report.add("kafka", "consumer lag", "no partition of the source's topics found", UNKNOWN)
    for lag in lags:
        report.add(f"{lag.topic}[{lag.partition}]", "consumer lag",
                   f"{lag.records} records, {lag.seconds:.0f} s", _state(lag.seconds, limits.max_lag_s))


def _windows(report: Report, config: MonitorConfig, engine: Engine, limits: Limits, now_s: float) -> None:
    wc = window_counts.c
    with engine.connect() as conn:
        last = dict(conn.execute(select(wc.model, func.max(wc.window_end)).group_by(wc.model)).all())
    window_s = config.window.size_ms / 1000
    for model in config.models:
        end = last.get(model.name)
        if end is None:
            report.add(f"model {model.name}", "last window judged", "none yet", UNKNOWN)
            continue
        age = now_s - _utc(end).timestamp()
        report.add(f"model {model.name}", "last window judged", f"{_utc(end):%Y-%m-%dT%H:%M:%SZ} ({age:.0f} s ago)",
                   _state(age, limits.max_windows * window_s))


def _outbox(report: Report, engine: Engine, limits: Limits, now_s: float) -> None:
    d = alert_deliveries.c
    with engine.connect() as conn:
        pending, oldest = conn.execute(select(func.count(), func.min(d.created_at)).where(
            d.status == "pending")).one()
    age = now_s - _utc(oldest).timestamp() if oldest is not None else 0.0
    report.add("alerts", "outbox backlog", f"{pending} pending" + (f", oldest {age:.0f} s" if pending else ""),
               _state(age, limits.max_lag_s))


def _flink(report: Report, prometheus_url: str | None, limits: Limits) -> None:
    if not prometheus_url:
        report.add("flink", "watermark, checkpoints", "no --prometheus given", UNKNOWN)
        return
    try:
        values = {name: _query(prometheus_url, SIGNALS[name]) for name in (
            "watermark_lag_seconds", "partition_watermark_lag_seconds", "checkpoint_age_seconds",
            "failed_checkpoints", "restarts")}
    except (httpx.HTTPError, ValueError) as exc:
        report.add("flink", "watermark, checkpoints", f"Prometheus unreadable: {exc}", UNKNOWN)
        return
    for labels, value in values["partition_watermark_lag_seconds"] or [({"split": "?"}, None)]:
        report.add(f"split {labels.get('split', '?')}", "watermark lag", _seconds(value),
                   _state(value, limits.max_lag_s))
    for signal, name, limit in (("watermark lag", "watermark_lag_seconds", limits.max_lag_s),
                                ("last checkpoint age", "checkpoint_age_seconds", limits.max_checkpoint_age_s)):
        value = max((v for _, v in values[name]), default=None)
        report.add("job", signal, _seconds(value), _state(value, limit))
    for signal, name in (("failed checkpoints", "failed_checkpoints"), ("restarts", "restarts")):
        value = max((v for _, v in values[name]), default=None)
        report.add("job", signal, "?" if value is None else f"{value:.0f}", OK if value is not None else UNKNOWN)


def _query(prometheus_url: str, expr: str) -> list[tuple[dict, float]]:
    """An instant PromQL query: (labels, value) per series."""
    answer = httpx.get(f"{prometheus_url.rstrip('/')}/api/v1/query", params={"query": expand_promql(expr, {})},
                       timeout=10).json()
    if answer.get("status") != "success":
        raise ValueError(answer.get("error", "query failed"))
    return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} s"


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

