"""Writing a benchmark report into the SQL results store (table ``latency_runs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.errors import ServiceError

KEYS = ("run_id", "batch_size", "dtype", "model_role", "inputs")


def rows(report: Mapping[str, Any]) -> list[dict]:
    """One row per (cell, arm) of the report's measured cells."""
    created = datetime.fromisoformat(report["created_at"].replace("Z", "+00:00"))
    base = {
        "run_id": report["run_id"], "created_at": created, "run_verdict": report["verdict"],
        "baseline": report["models"]["baseline"]["path"], "candidate": report["models"]["candidate"]["path"],
        "baseline_sha256": report["models"]["baseline"]["sha256"], "candidate_sha256": report["models"]["candidate"]["sha256"],
        "device": report["environment"]["device"],
    }
    out = []
    for cell in report["cells"]:
        if cell["status"] == "ok":
            out.extend({**base, **_cell_fields(cell), **_arm_fields(arm)} for arm in cell["arms"])
    return out


def save(report: Mapping[str, Any], url: str) -> int:
    """Upsert the report's rows into the store at ``url``; return how many rows were written."""
    import driftwarden.schemas.latency_tables  # noqa: F401  (registers latency_runs before the store creates tables)
    from driftwarden.core.store import make_engine, upsert
    from driftwarden.schemas.latency_tables import latency_runs

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            return upsert(conn, latency_runs, rows(report), KEYS)
    except SQLAlchemyError as exc:
        raise ServiceError(f"cannot write latency_runs to the store: {exc.__class__.__name__}: {exc}; "
                           "check --store-url") from exc
    finally:
        engine.dispose()


def _cell_fields(cell: Mapping[str, Any]) -> dict:
    eff = cell["model_effect"]
    return {
        "batch_size": cell["batch_size"], "dtype": cell["dtype"], "cell_verdict": cell["verdict"],
        "attribution": cell["attribution"],
        "model_ratio_p50": eff["p50"]["ratio"], "model_ratio_p50_ci_low": eff["p50"]["ci_low"],
        "model_ratio_p50_ci_high": eff["p50"]["ci_high"], "model_ratio_p99": eff["p99"]["ratio"],
        "model_ratio_p99_ci_low": eff["p99"]["ci_low"], "model_ratio_p99_ci_high": eff["p99"]["ci_high"],
    }


def _arm_fields(arm: Mapping[str, Any]) -> dict:
    lat = arm["latency_ms"]
    return {
        "model_role": arm["model"], "inputs": arm["inputs"], "requests": arm["requests"],
        "p50_ms": lat["p50"], "p90_ms": lat["p90"], "p95_ms": lat["p95"], "p99_ms": lat["p99"],
        "p999_ms": lat["p99_9"], "mean_ms": lat["mean"], "samples_per_s": arm["throughput"]["samples_per_s"],
        "j_per_sample": (arm["energy"] or {}).get("j_per_sample"),
    }
