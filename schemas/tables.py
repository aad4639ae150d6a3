"""SQL tables of the results store (SQLAlchemy Core), shared by jobs/, alerting/ and replay/.

All tables hang off one :data:`metadata`; ``core.store.create_schema`` creates a new store from it
and upgrades an older one with the Alembic migrations of ``schemas/migrations`` (one revision per
change to a table). Window times are stored as timezone-aware UTC timestamps so that Grafana can use
them directly as time columns. ``SCHEMA_VERSION`` is bumped with every change to a table (the number
of the newest migration): a driftwarden older than a store refuses it.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 8

metadata = MetaData()

schema_info = Table(
    "schema_info",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
)

def _result_columns() -> list:
    """The columns of one (model, feature, window) result: window_results and segment_results share them."""
    return [
        Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
        Column("model", String(200), nullable=False),
        Column("feature", String(200), nullable=False),
        Column("window_start", DateTime(timezone=True), nullable=False),
        Column("window_end", DateTime(timezone=True), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("count", BigInteger, nullable=False),
        Column("missing", BigInteger, nullable=False),
        Column("gate_ks", Float),
        Column("gate_ks_bound", Float),
        Column("gate_psi", Float),
        Column("gate_emd", Float),
        Column("gate_chi2", Float),  # categorical gate scores
        Column("gate_js", Float),
        Column("gate_new_share", Float),
        Column("gate_missing_delta", Float),
        Column("gate_alarm", Boolean, nullable=False),
        Column("deep_ks_stat", Float),
        Column("deep_ks_pvalue", Float),
        Column("deep_psi", Float),
        Column("deep_emd", Float),
        Column("deep_chi2_stat", Float),
        Column("deep_chi2_pvalue", Float),
        Column("p_adjusted", Float),
        Column("drifted", Boolean, nullable=False),
        Column("severity", String(16), nullable=False),
        Column("computed_at", DateTime(timezone=True), nullable=False),
        Column("evidence", Text),  # JSON of sketches.analysis.verdict_evidence when the deep test ran (version 3)
        Column("cusum_up", Float),  # slow-drift CUSUM sums after this window, the next window's start (version 4)
        Column("cusum_down", Float),
        Column("error", String(200)),  # "not judged: <exception type>" when judging the feature raised (version 6)
        Column("invalid", BigInteger),  # values of the wrong type, kept out of count and missing (version 7)
        Column("invalid_examples", Text),  # JSON: up to five of them, [{"reason", "value", "where"}] (version 7)
        Column("true_count", BigInteger),  # a boolean feature's true values; false = count - missing - true_count
    ]


# One row per (model, feature, window): what the gate and (if run) the deep check found.
window_results = Table(
    "window_results",
    metadata,
    *_result_columns(),
    UniqueConstraint("model", "feature", "window_start", name="uq_window_results"),
    Index("ix_window_results_start", "window_start"),  # a window's rows, retention (version 8)
)

# One row per (model, feature, segment, window) of a model with segments (version 5): the same columns plus the
# segment as schemas.alert_tables.segment_key writes it ("country=US"); p_adjusted is the hierarchical one.
segment_results = Table(
    "segment_results",
    metadata,
    *_result_columns(),
    Column("segment", String(500), nullable=False),
    UniqueConstraint("model", "feature", "segment", "window_start", name="uq_segment_results"),
    Index("ix_segment_results_start", "window_start"),  # a window's rows, retention (version 8)
)

# One row per (model, window): event counts of the window as a whole.
window_counts = Table(
    "window_counts",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("model", String(200), nullable=False),
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("window_end", DateTime(timezone=True), nullable=False),
    Column("events", BigInteger, nullable=False),
    Column("late", BigInteger, nullable=False, default=0),
    Column("unknown_features", BigInteger, nullable=False, default=0),
    Column("deep_checked", Boolean, nullable=False, default=False),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("model", "window_start", name="uq_window_counts"),
)

# Events that failed validation or arrived after their window closed: kept, never lost.
dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("topic", String(250), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("reason", String(200), nullable=False),
    Column("detail", Text),
    Column("model", String(200)),
    Column("event_time", DateTime(timezone=True)),
    Column("payload", Text, nullable=False),
    Column("seen_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("topic", "partition", "offset", name="uq_dead_letters"),
    Index("ix_dead_letters_seen", "seen_at"),  # retention (version 8)
)

# Window summaries (sketches + samples) kept for the warmup and rolling reference modes.
window_summaries = Table(
    "window_summaries",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("model", String(200), nullable=False),
    Column("window_start", BigInteger, nullable=False),  # epoch ms
    Column("summary", LargeBinary, nullable=False),
    UniqueConstraint("model", "window_start", name="uq_window_summaries"),
)

# Running totals behind /metrics (version 8): one row per (metric, model, item, label), kept by the writers in
# the same transaction as the rows they count (core.totals), so that a scrape reads a row per series whatever
# the size of the tables, and retention, which deletes old rows, never lowers a counter. ``item`` is a feature
# or a route, ``label`` a segment, a verdict, a reason or a delivery status ("" where a metric has none).
store_totals = Table(
    "store_totals",
    metadata,
    Column("metric", String(40), primary_key=True),
    Column("model", String(200), primary_key=True),
    Column("item", String(200), primary_key=True),
    Column("label", String(500), primary_key=True),
    Column("value", BigInteger, nullable=False),
)
