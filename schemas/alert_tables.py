"""SQL tables of alerting (alert state, history, outbox, groups, deliveries, endpoints, silences): owned by alerting/.

Declared on the shared :data:`schemas.tables.metadata`, so ``core.store.create_schema``
creates them with the results tables. An alert is one identity (model, feature, segment or
none) with its own lifecycle; the outbox holds, per (route, alert), the newest state still to
be told, written in the same transaction as the window results that caused it; the delivery
worker seals a group's pending states into one delivery.

The alerting tables carry their own version (:data:`ALERT_SCHEMA_VERSION`, in
``alert_schema``) so that they can be upgraded in place: :func:`upgrade_alert_schema` runs
before the tables are created and turns a version-1 store (one alert per drifted feature set)
into this shape, keeping deliveries and silences and turning each firing alert into one
firing alert per feature.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from functools import lru_cache
from typing import Mapping

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    select,
    text,
)

from sqlalchemy.dialects import postgresql, sqlite

from driftwarden.core.errors import ConfigError
from driftwarden.schemas.tables import metadata

ALERT_SCHEMA_VERSION = 2
_ID = BigInteger().with_variant(Integer, "sqlite")

alert_schema = Table(
    "alert_schema",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
)

# Per model: when its latest window report arrived (wall clock), for the "no data" state.
alert_models = Table(
    "alert_models",
    metadata,
    Column("model", String(200), primary_key=True),
    Column("last_window_start", DateTime(timezone=True), nullable=False),
    Column("last_seen_at", DateTime(timezone=True), nullable=False),
)

# One row per alert identity (model, feature, segment or ""): its lifecycle.
alerts = Table(
    "alerts",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("fingerprint", String(32), nullable=False, unique=True),
    Column("model", String(200), nullable=False),
    Column("feature", String(200), nullable=False),
    Column("segment", String(500), nullable=False, default=""),
    Column("severity", String(16), nullable=False),  # highest severity since it started firing
    Column("status", String(16), nullable=False),  # firing | resolved | nodata
    Column("starts_at", DateTime(timezone=True), nullable=False),
    Column("ends_at", DateTime(timezone=True)),
    Column("last_window_start", DateTime(timezone=True), nullable=False),
    Column("last_window_end", DateTime(timezone=True), nullable=False),
    Column("clean_windows", Integer, nullable=False, default=0),  # clean windows in a row while firing
    Column("version", Integer, nullable=False, default=1),  # bumped on every notified change
    Column("migrated", Boolean, nullable=False, default=False),  # came from a version-1 store
    Column("acked_at", DateTime(timezone=True)),
    Column("acked_by", String(200)),
    Column("details", Text, nullable=False),  # JSON of the latest FeatureOutcome
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_alerts_model_status", "model", "status"),
)

# Every state change of every alert: the history behind the Grafana state timeline.
alert_events = Table(
    "alert_events",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("fingerprint", String(32), nullable=False),
    Column("model", String(200), nullable=False),
    Column("feature", String(200), nullable=False),
    Column("segment", String(500), nullable=False, default=""),
    Column("status", String(16), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("window_start", DateTime(timezone=True), nullable=False),  # window of the change (event time)
    Column("at", DateTime(timezone=True), nullable=False),  # wall clock
    Index("ix_alert_events_model_time", "model", "window_start"),
)

# The outbox: per (route, alert) the newest state to tell; ``pending`` until a sealed delivery holds it.
alert_outbox = Table(
    "alert_notify",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("route", String(100), nullable=False),
    Column("group_key", String(1000), nullable=False),
    Column("model", String(200), nullable=False),
    Column("fingerprint", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("alert", Text, nullable=False),  # JSON of the native alert document
    Column("version", Integer, nullable=False),
    Column("pending", Boolean, nullable=False),
    Column("told_firing", Boolean, nullable=False, default=False),  # a sealed delivery told this route it fires
    Column("changed_at", DateTime(timezone=True), nullable=False),
    Column("delivery_id", BigInteger),  # the latest delivery that held it
    UniqueConstraint("route", "fingerprint", name="uq_alert_notify"),
    Index("ix_alert_notify_group", "route", "group_key", "pending"),
)

# Per (route, group): when its last notification was sealed (group_interval, repeat_interval).
alert_groups = Table(
    "alert_groups",
    metadata,
    Column("route", String(100), primary_key=True),
    Column("group_key", String(1000), primary_key=True),
    Column("last_sealed_at", DateTime(timezone=True)),
)

# One row per webhook POST (a sealed notification of a group); webhook_id is stable across retries.
alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("webhook_id", String(64), nullable=False, unique=True),
    Column("route", String(100), nullable=False),
    Column("model", String(200), nullable=False),
    Column("group_key", String(1000), nullable=False, default=""),
    Column("format", String(16), nullable=False),
    Column("body", Text, nullable=False),
    Column("alert_count", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | sent | failed | dead | disabled | superseded
    Column("attempts", Integer, nullable=False, default=0),  # POSTs started, a killed worker's included
    Column("failures", Integer, nullable=False, default=0),  # failed attempts (inherited on supersede): backoff
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("claimed_until", DateTime(timezone=True)),
    Column("claimed_by", String(100)),
    Column("first_attempt_at", DateTime(timezone=True)),
    Column("last_attempt_at", DateTime(timezone=True)),
    Column("last_status_code", Integer),
    Column("last_error", String(500)),
    Column("finished_at", DateTime(timezone=True)),
    Index("ix_alert_deliveries_due", "status", "next_attempt_at"),
    Index("ix_alert_deliveries_finished", "finished_at"),  # retention (store version 7)
)

# Endpoints switched off by a 410 Gone (or by hand): deliveries to them are not attempted.
alert_endpoints = Table(
    "alert_endpoints",
    metadata,
    Column("route", String(100), primary_key=True),
    Column("disabled_at", DateTime(timezone=True), nullable=False),
    Column("reason", String(500), nullable=False),
)

# Silences: alerts matching every matcher get no notification until ends_at.
alert_silences = Table(
    "alert_silences",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("matchers", Text, nullable=False),  # JSON list of {"label", "op", "value"}
    Column("starts_at", DateTime(timezone=True), nullable=False),
    Column("ends_at", DateTime(timezone=True), nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("comment", String(1000), nullable=False, default=""),
)


def segment_key(segment: Mapping[str, str] | None) -> str:
    """Return the canonical text of a segment (``""`` for none): sorted ``key=value`` pairs joined by commas.

    Names and values are data: a backslash, comma or equals sign in one is escaped with a backslash,
    so two segments never share a text (the store's key, the alert's ``segment`` label).

    >>> segment_key({"os": "ios", "country": "FR"})
    'country=FR,os=ios'
    >>> segment_key({"a": "x,b=y", "b": "z"}) != segment_key({"a": "x", "b": "y,b=z"})
    True
    >>> print(segment_key({"a": "x,b=y", "b": "z"}))
    a=x\\,b\\=y,b=z
    """
    if not segment:
        return ""
    return _segment_text(tuple(sorted(segment.items())))


@lru_cache(maxsize=4096)
def _segment_text(pairs: tuple[tuple[str, str], ...]) -> str:
    """The text of a segment's sorted (name, value) pairs; cached: a segmented window writes each segment's text
    once per feature, and the segments repeat from window to window."""
    return ",".join(f"{_escape_segment_text(k)}={_escape_segment_text(v)}" for k, v in pairs)


def _escape_segment_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def alert_fingerprint(model: str, feature: str, segment: Mapping[str, str] | None = None) -> str:
    """Return the 16-hex-digit key of one alert identity (model, feature, segment or none)."""
    seg = sorted(segment.items()) if segment else None
    key = json.dumps([model, feature, seg], separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def prepare_alert_upgrade(conn: Connection) -> list[dict]:
    """Before the tables are created: turn a version-1 alerting store into this shape; return its firing alerts.

    Version 1 had one ``alerts`` row per (model, drifted feature set, severity) and an outbox row per
    notification. Its alert state and unsealed outbox rows are dropped (the firing alerts are
    returned, to be re-created per feature by :func:`finish_alert_upgrade`); sealed deliveries,
    endpoints and silences are kept, and ``alert_deliveries`` gains its new columns.
    """
    tables = set(inspect(conn).get_table_names())
    if "alerts" not in tables or "feature" in {c["name"] for c in inspect(conn).get_columns("alerts")}:
        return []
    when = DateTime(timezone=True)
    firing = [dict(r._mapping) for r in conn.execute(text(
        "SELECT model, severity, starts_at, last_window_start, last_window_end, acked_at, acked_by, details"
        " FROM alerts WHERE status = 'firing'").columns(
        starts_at=when, last_window_start=when, last_window_end=when, acked_at=when))]
    for old in ("alert_outbox", "alert_models", "alerts"):
        conn.execute(text(f"DROP TABLE IF EXISTS {old}"))
    if "alert_deliveries" in tables:
        for column, ddl in (("group_key", "VARCHAR(1000) NOT NULL DEFAULT ''"),
                            ("failures", "INTEGER NOT NULL DEFAULT 0")):
            conn.execute(text(f"ALTER TABLE alert_deliveries ADD COLUMN {column} {ddl}"))
    return firing


def finish_alert_upgrade(conn: Connection, firing: list[dict], now: datetime) -> None:
    """After the tables exist: record the version; re-create each old firing alert as one firing alert per feature.

    Re-created alerts are ``migrated``: receivers were told they fire, so their resolve is sent.
    """
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(alert_schema).values(id=1, version=ALERT_SCHEMA_VERSION).on_conflict_do_nothing())
    version = conn.execute(select(alert_schema.c.version)).scalar_one()
    if version > ALERT_SCHEMA_VERSION:
        raise ConfigError(f"the store's alerting tables are version {version}; this driftwarden knows "
                          f"{ALERT_SCHEMA_VERSION}: upgrade driftwarden")
    rows: dict[str, dict] = {}
    for old in firing:
        for feature in json.loads(old["details"]):
            fp = alert_fingerprint(old["model"], feature["name"], feature.get("segment"))
            rows.setdefault(fp, {
                "fingerprint": fp, "model": old["model"], "feature": feature["name"],
                "segment": segment_key(feature.get("segment")), "severity": feature.get("severity", old["severity"]),
                "status": "firing", "starts_at": old["starts_at"], "ends_at": None,
                "last_window_start": old["last_window_start"], "last_window_end": old["last_window_end"],
                "clean_windows": 0, "version": 1, "migrated": True, "acked_at": old["acked_at"],
                "acked_by": old["acked_by"], "details": json.dumps(feature), "updated_at": now})
    if rows:
        conn.execute(alerts.insert(), list(rows.values()))
