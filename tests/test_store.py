"""The results store: schema creation (also by racing processes), version check, idempotent upserts."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select, update

from core.errors import ConfigError
from core.store import make_engine, upsert
from schemas.tables import schema_info, window_counts


def _row(events: int) -> dict:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return {"model": "m", "window_start": start, "window_end": start, "events": events, "late": 0,
            "unknown_features": 0, "deep_checked": False, "computed_at": start}


def test_upsert_replaces_instead_of_duplicating(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.begin() as conn:
        upsert(conn, window_counts, [_row(5)], ("model", "window_start"))
        upsert(conn, window_counts, [_row(7)], ("model", "window_start"))
        assert conn.execute(select(func.count(), func.max(window_counts.c.events))).one() == (1, 7)


def test_a_store_of_another_schema_version_is_refused_clearly(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    with make_engine(url).begin() as conn:
        conn.execute(update(schema_info).values(version=1))
    with pytest.raises(ConfigError, match="schema version 1"):
        make_engine(url)


def test_processes_creating_the_schema_at_once_all_succeed(tmp_path):
    url = f"sqlite:///{tmp_path}/race.db"
    code = f"from core.store import make_engine; make_engine({url!r})"
    racers = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(4)]
    errors = [p.communicate(timeout=60)[1] for p in racers]
    assert [p.returncode for p in racers] == [0, 0, 0, 0], errors
