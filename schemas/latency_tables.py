"""SQL table of the latency benchmark (owned by latency): one row per (run, cell, arm).

Declared on :data:`schemas.tables.metadata`; importing this module registers the table so that
``core.store.create_schema`` creates it. A Grafana panel plots ``p50_ms``/``p99_ms`` over
``created_at`` per (baseline, candidate, batch_size, dtype, model_role, inputs).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Float, Integer, String, Table, UniqueConstraint

from driftwarden.schemas.tables import metadata

latency_runs = Table(
    "latency_runs",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("baseline", String(500), nullable=False),
    Column("candidate", String(500), nullable=False),
    Column("baseline_sha256", String(64)),
    Column("candidate_sha256", String(64)),
    Column("device", String(200), nullable=False),
    Column("batch_size", Integer, nullable=False),
    Column("dtype", String(8), nullable=False),
    Column("model_role", String(16), nullable=False),
    Column("inputs", String(16), nullable=False),
    Column("requests", BigInteger, nullable=False),
    Column("p50_ms", Float),
    Column("p90_ms", Float),
    Column("p95_ms", Float),
    Column("p99_ms", Float),
    Column("p999_ms", Float),
    Column("mean_ms", Float),
    Column("samples_per_s", Float),
    Column("j_per_sample", Float),
    Column("model_ratio_p50", Float),
    Column("model_ratio_p50_ci_low", Float),
    Column("model_ratio_p50_ci_high", Float),
    Column("model_ratio_p99", Float),
    Column("model_ratio_p99_ci_low", Float),
    Column("model_ratio_p99_ci_high", Float),
    Column("cell_verdict", String(32), nullable=False),
    Column("attribution", String(32), nullable=False),
    Column("run_verdict", String(32), nullable=False),
    UniqueConstraint("run_id", "batch_size", "dtype", "model_role", "inputs", name="uq_latency_runs"),
)
