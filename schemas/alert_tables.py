"""SQL tables of alerting (alert state, outbox, deliveries, endpoints, silences): owned by alerting/.

Declared on the shared :data:`schemas.tables.metadata`, so ``driftwarden.store.create_schema``
creates them with the results tables. The outbox is written in the same transaction as the
window results that caused it; the delivery worker turns due outbox rows into deliveries.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from schemas.tables import metadata

_ID = BigInteger().with_variant(Integer, "sqlite")

# Per model: the latest window alerting has seen, so that a re-run of an older window changes nothing.
alert_models = Table(
    "alert_models",
    metadata,
    Column("model", String(200), primary_key=True),
    Column("last_window_start", DateTime(timezone=True), nullable=False),
    Column("firing_fingerprint", String(32)),
)

# One row per fingerprint (model + drifted feature set + severity): its lifecycle.
alerts = Table(
    "alerts",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("fingerprint", String(32), nullable=False, unique=True),
    Column("model", String(200), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("features", Text, nullable=False),  # JSON list of feature names, sorted
    Column("status", String(16), nullable=False),  # firing | resolved
    Column("starts_at", DateTime(timezone=True), nullable=False),
    Column("ends_at", DateTime(timezone=True)),
    Column("last_window_start", DateTime(timezone=True), nullable=False),
    Column("last_window_end", DateTime(timezone=True), nullable=False),
    Column("last_notified_at", DateTime(timezone=True)),  # window_end of the last notification
    Column("acked_at", DateTime(timezone=True)),
    Column("acked_by", String(200)),
    Column("details", Text, nullable=False),  # JSON of the latest FeatureOutcomes of the drifted features
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# The outbox: one row per (route, alert notification); unique so that a re-run window adds nothing.
alert_outbox = Table(
    "alert_outbox",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("route", String(100), nullable=False),
    Column("model", String(200), nullable=False),
    Column("fingerprint", String(32), nullable=False),
    Column("kind", String(16), nullable=False),  # firing | resolved
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("window_end", DateTime(timezone=True), nullable=False),
    Column("alert", Text, nullable=False),  # JSON of the Alert record
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("delivery_id", BigInteger),
    UniqueConstraint("route", "fingerprint", "window_start", "kind", name="uq_alert_outbox"),
    Index("ix_alert_outbox_pending", "route", "model", "delivery_id"),
)

# One row per webhook POST (a sealed group of outbox rows); webhook_id is stable across retries.
alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("webhook_id", String(64), nullable=False, unique=True),
    Column("route", String(100), nullable=False),
    Column("model", String(200), nullable=False),
    Column("format", String(16), nullable=False),
    Column("body", Text, nullable=False),
    Column("alert_count", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | sent | failed | dead | disabled
    Column("attempts", Integer, nullable=False, default=0),
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
