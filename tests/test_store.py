"""The results store: schema creation (also by racing processes), version check, idempotent upserts."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import OperationalError

from driftwarden.core.errors import ConfigError
from driftwarden.core.store import make_engine, upsert
from driftwarden.schemas.tables import schema_info, window_counts


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
        conn.execute(text("DROP TABLE alembic_version"))  # made before migrations
    with pytest.raises(ConfigError, match="schema version 1"):
        make_engine(url)


def test_processes_creating_the_schema_at_once_all_succeed(tmp_path):
    url = f"sqlite:///{tmp_path}/race.db"
    code = f"from core.store import make_engine; make_engine({url!r})"
    racers = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(4)]
    errors = [p.communicate(timeout=60)[1] for p in racers]
    assert [p.returncode for p in racers] == [0, 0, 0, 0], errors


def test_a_postgresql_server_that_never_answers_is_an_error_within_the_connect_timeout():
    """A port that accepts connections and never answers (a hung server): connecting fails after the
    connect timeout (core.store.PG_CONNECT_ARGS) instead of waiting forever, so the sinks' retries go on."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshakes; nothing ever reads or writes
        port = silent.getsockname()[1]
        engine = make_engine(f"postgresql://driftwarden@127.0.0.1:{port}/driftwarden", create=False)
        outcome: list[BaseException | None] = []

        def connect() -> None:
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 (handed to the test thread)
                outcome.append(exc)

        started = time.monotonic()
        worker = threading.Thread(target=connect, daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), "connecting to a server that never answers still waits after 30 s"
        assert isinstance(outcome[0], OperationalError) and time.monotonic() - started < 30
        engine.dispose()


def test_postgresql_connections_get_keepalives_and_a_connect_timeout_the_url_can_override():
    from driftwarden.core.store import PG_CONNECT_ARGS, _connect_args

    assert _connect_args("postgresql+psycopg://u@h/db") == PG_CONNECT_ARGS
    assert _connect_args("postgresql+psycopg://u@h/db?connect_timeout=3")["keepalives"] == 1
    assert "connect_timeout" not in _connect_args("postgresql+psycopg://u@h/db?connect_timeout=3")
    assert _connect_args("sqlite:///x.db") == {}
