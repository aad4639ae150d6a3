"""``driftwarden alerts``: list alerts and deliveries, acknowledge, silence, run the delivery worker."""

from __future__ import annotations

import json
import re
import signal
import threading
from datetime import timedelta
from pathlib import Path
from typing import Optional

import typer
from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.markup import escape
from sqlalchemy import and_, delete, insert, select, update

from driftwarden.alerting.delivery import utcnow
from driftwarden.alerting.metrics import DeliveryMetrics, StoreCollector, serve_metrics
from driftwarden.alerting.outbox import prune, set_delivery_status
from driftwarden.alerting.rules import Matcher, load_rules, parse_duration
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.alerting.worker_metrics import OutboxAgeCollector, WorkerMetrics
from driftwarden.core.console import command_app, data_table
from driftwarden.core.endpoints import DEFAULT_METRICS_HOST, STORE_URL_HELP_DEFAULT, store_url
from driftwarden.core.errors import ConfigError
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries, alert_endpoints, alert_silences, alerts
from driftwarden.schemas.config import config_store_url

app = command_app("Alerts: list, acknowledge, silence, re-enable routes, and deliver webhooks from the outbox.",
                  no_args_is_help=True)
_console = Console()
_MATCHER = re.compile(r"^\s*(model|feature|segment|severity)\s*(=~|!~|!=|>=|=)\s*(.+?)\s*$")

StoreOpt = typer.Option(None, "--store-url", help="SQLAlchemy URL of the results store.",
                        show_default=STORE_URL_HELP_DEFAULT)
ConfigOpt = typer.Option(None, "--config",
                         help="Monitor config YAML: its store_url (and, for deliver, its alerting: key).",
                         show_default="none")


def alert_store(option: str | None, config: Path | None):
    """The engine of the results store: ``--store-url``, else the config's ``store_url``, else
    $DRIFTWARDEN_STORE_URL, else local SQLite (driftwarden.core.endpoints.store_url)."""
    return make_engine(store_url(option, config_store_url(config)))


def parse_matcher(text: str) -> Matcher:
    """Parse ``model=fraud``, ``feature=~amount.*``, ``severity>=major`` into a Matcher."""
    match = _MATCHER.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r}: expected LABEL OP VALUE, label model|feature|segment|severity, "
                                 "op = != =~ !~ >=")
    try:
        return Matcher(label=match.group(1), op=match.group(2), value=match.group(3))
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r}: {exc}") from exc


@app.command("list")
def list_cmd(
    store: Optional[str] = StoreOpt,
    status: str = typer.Option("firing", help="Status to show: firing, nodata, resolved or all (deliveries: "
                               "pending, sent, failed, dead, disabled, superseded or all; firing means all).",
                               show_default=True),
    deliveries: bool = typer.Option(False, "--deliveries/--alerts", help="Show webhook deliveries instead of alerts.",
                                    show_default=True),
    limit: int = typer.Option(50, min=1, help="Most rows to show.", show_default=True),
    config: Optional[Path] = ConfigOpt,
) -> None:
    """List alerts (or deliveries, including dead ones)."""
    engine = alert_store(store, config)
    if deliveries:
        _print_deliveries(engine, status, limit)
    else:
        _print_alerts(engine, status, limit)


@app.command()
def ack(
    fingerprint: str = typer.Argument(..., help="Fingerprint of the alert (see `alerts list`)."),
    by: str = typer.Option("cli", "--by", help="Who acknowledges.", show_default=True),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Acknowledge one alert (model, feature[, segment]): no more repeat notifications; changes are still sent."""
    engine = alert_store(store, config)
    with engine.begin() as conn:
        done = conn.execute(update(alerts).where(alerts.c.fingerprint == fingerprint).values(
            acked_at=utcnow(), acked_by=by)).rowcount
    if not done:
        raise ConfigError(f"no alert with fingerprint {fingerprint!r}")
    _console.print(f"acknowledged {fingerprint}")


@app.command()
def silence(
    match: list[str] = typer.Option(..., "--match", help="Matcher LABEL OP VALUE, e.g. model=fraud; repeatable."),
    duration: str = typer.Option("2h", "--for", help="How long, e.g. 30m, 2h, 1d.", show_default=True),
    by: str = typer.Option("cli", "--by", help="Who silences.", show_default=True),
    comment: str = typer.Option("", help="Why (shown in `alerts list`).", show_default="empty"),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Silence alerts matching every --match (labels model, feature, segment, severity) until the duration runs out."""
    matchers = [parse_matcher(m) for m in match]
    length = parse_duration(duration)
    if not isinstance(length, timedelta):
        raise typer.BadParameter(f"{duration!r}: expected a duration such as 30m, 2h, 1d", param_hint="--for")
    now = utcnow()
    with alert_store(store, config).begin() as conn:
        new_id = conn.execute(insert(alert_silences).values(
            matchers=json.dumps([m.model_dump() for m in matchers]), starts_at=now, ends_at=now + length,
            created_by=by, comment=comment)).inserted_primary_key[0]
    _console.print(f"silence {new_id} until {(now + length).isoformat()}")


@app.command()
def enable(
    route: str = typer.Argument(..., help="Route name disabled by a 410 Gone (see `alerts list --deliveries`)."),
    requeue: bool = typer.Option(True, "--requeue/--no-requeue", help="Send again the deliveries it disabled.",
                                 show_default=True),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Re-enable a route that answered 410 Gone."""
    with alert_store(store, config).begin() as conn:
        removed = conn.execute(delete(alert_endpoints).where(alert_endpoints.c.route == route)).rowcount
        if not removed:
            raise ConfigError(f"route {route!r} is not disabled")
        requeued = set_delivery_status(conn, alert_deliveries.c.route == route, "disabled", "pending",
                                       next_attempt_at=utcnow(), finished_at=None, claimed_until=None) if requeue else 0
    _console.print(f"route {escape(route)} enabled; {requeued} deliveries queued again")


@app.command("prune")
def prune_cmd(
    keep: str = typer.Option("30d", "--keep", help="Keep history younger than this (e.g. 7d, 12h).",
                             show_default=True),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Delete finished deliveries, resolved alerts and expired silences older than --keep."""
    length = parse_duration(keep)
    if not isinstance(length, timedelta):
        raise typer.BadParameter(f"{keep!r}: expected a duration such as 7d or 12h", param_hint="--keep")
    with alert_store(store, config).begin() as conn:
        counts = prune(conn, utcnow() - length)
    _console.print(", ".join(f"{n} {what}" for what, n in counts.items()) + " deleted")


@app.command()
def deliver(
    config: Optional[Path] = typer.Option(None, "--config", help="Monitor config YAML: its alerting: key and its "
                                          "store_url.",
                                          show_default="none: default rules, no routes"),
    store: Optional[str] = StoreOpt,
    once: bool = typer.Option(False, "--once/--forever", help="Handle what is due now and exit, or keep running.",
                              show_default=True),
    poll: float = typer.Option(1.0, help="Seconds between polls when idle.", show_default=True),
    lease: float = typer.Option(30.0, help="Seconds a claimed delivery stays leased to this worker (one POST "
                                "per claim: must exceed every route's timeout_s by 1 s).", show_default=True),
    metrics_port: int = typer.Option(0, help="Serve /metrics on this port (0: off): deliveries, the worker's "
                                     "heartbeat, the outbox's age and the store's metrics.", show_default=True),
    metrics_host: str = typer.Option(DEFAULT_METRICS_HOST, help="Address /metrics listens on (0.0.0.0: every "
                                     "interface, as in a container, so that Prometheus can scrape it).",
                                     show_default=True),
) -> None:
    """Run the delivery worker: seal due groups, send webhooks, retry with backoff, record outcomes (SIGTERM stops it)."""
    rules = load_rules(config)
    engine = alert_store(store, config)
    registry = CollectorRegistry()
    metrics, health = DeliveryMetrics(registry), WorkerMetrics(registry)
    if metrics_port:
        registry.register(StoreCollector(engine, min_interval_s=5.0))
        registry.register(OutboxAgeCollector(engine))
        serve_metrics(metrics_port, registry, metrics_host)
    with make_client() as client:
        dispatcher = Dispatcher(engine, rules, build_sinks(rules, client), metrics, health,
                                lease=timedelta(seconds=lease))
        if once:
            while dispatcher.run_once():
                pass
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        _console.print(f"delivery worker started: {len(rules.routes)} route(s), lease {lease:g} s; SIGTERM stops it")
        try:
            dispatcher.run_forever(stop, poll)
        except KeyboardInterrupt:
            stop.set()


def _print_alerts(engine, status: str, limit: int) -> None:
    query = select(alerts).order_by(alerts.c.updated_at.desc()).limit(limit)
    if status != "all":
        query = query.where(alerts.c.status == status)
    table = data_table("fingerprint", "model", "feature", "segment", "severity", "status", "since", "acked by",
                       whole=("fingerprint",))
    with engine.connect() as conn:
        for r in conn.execute(query):
            table.add_row(*(escape(str(v)) for v in (r.fingerprint, r.model, r.feature, r.segment, r.severity,
                                                      r.status, r.starts_at, r.acked_by or "")))
    _console.print(table)


def _print_deliveries(engine, status: str, limit: int) -> None:
    d = alert_deliveries.c
    query = select(alert_deliveries).order_by(d.id.desc()).limit(limit)
    if status not in ("all", "firing"):
        query = query.where(d.status == status)
    table = data_table("webhook-id", "route", "model", "status", "alerts", "attempts", "last code", "last error",
                       whole=("webhook-id",))
    with engine.connect() as conn:
        for r in conn.execute(query):
            table.add_row(*(escape(str(v)) for v in (r.webhook_id, r.route, r.model, r.status, r.alert_count,
                                                      r.attempts, r.last_status_code or "", r.last_error or "")))
    _console.print(table)
