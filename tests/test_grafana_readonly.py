"""Grafana's PostgreSQL datasource logs in as a read-only role (deploy/postgres/grafana-readonly.sql, docs/deploy.md):
created by the script on the real PostgreSQL, it runs every SQL panel and variable of every dashboard and returns
their rows, and cannot write, create or drop anything, even with its sessions' read-only default turned off."""

from __future__ import annotations

import os
import secrets
import subprocess
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from driftwarden.alerting.dashboards.definitions import SEGMENT_VARIABLE, all_dashboards
from driftwarden.alerting.dashboards.macros import expand_sql, substitute
from driftwarden.alerting.dashboards.model import SqlQuery
from tests.conftest import REPO
from tests.test_alerting_services import filled_store  # noqa: F401 (the fixture: 40 minutes of results and alerts)

SCRIPT = REPO / "deploy" / "postgres" / "grafana-readonly.sql"
WRITES = ["INSERT INTO dead_letters (topic, partition, \"offset\", reason, payload, seen_at) "
          "VALUES ('t', 0, 1, 'x', 'p', now())",
          "UPDATE alerts SET acked_by = 'grafana'",
          "DELETE FROM window_counts",
          "CREATE TABLE grafana_was_here (i int)",
          "DROP TABLE alerts"]


def create_role(admin_url: str, role: str, schema: str, password: str) -> subprocess.CompletedProcess:
    """Run the script as the tables' owner, as docs/deploy.md says; the password only in the environment."""
    return subprocess.run(["psql", admin_url, "-v", f"role={role}", "-v", f"schema={schema}", "-f", str(SCRIPT)],
                          env={**os.environ, "DRIFTWARDEN_GRAFANA_PG_PASSWORD": password},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.services
def test_grafana_reads_every_panel_as_a_read_only_role(filled_store, pg_url) -> None:  # noqa: F811
    engine, model, *_ = filled_store
    schema = engine.url.query["options"].split("=", 1)[1]  # pg_engine's: -csearch_path=<schema>
    role, password = f"grafana_{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(16)
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    done = create_role(pg_url, role, schema, password)
    assert done.returncode == 0, done.stdout + done.stderr
    assert password not in done.stdout + done.stderr
    url = make_url(engine.url.render_as_string(hide_password=False)).set(username=role, password=password)
    grafana = create_engine(url)
    try:
        now = datetime.now(timezone.utc)
        ran = 0
        with grafana.connect() as conn:
            for dashboard in all_dashboards():
                for var in dashboard.to_json()["templating"]["list"]:
                    assert conn.execute(text(substitute(var["query"], {"model": model}))).all(), var["name"]
                for title, query in dashboard.queries():
                    if isinstance(query, SqlQuery):
                        sql = expand_sql(query.sql, {"model": model, "segment": SEGMENT_VARIABLE.all_value},
                                         now - timedelta(hours=6), now + timedelta(minutes=5))
                        assert conn.execute(text(sql)).all(), f"panel {title!r} returned no rows as {role}"
                        ran += 1
        assert ran >= 11
        for statement in WRITES:
            for session in ("", "SET TRANSACTION READ WRITE"):  # the read-only default undone: the grants forbid it
                with grafana.connect() as conn, pytest.raises(DBAPIError, match="read-only transaction|permission denied|must be owner"):
                    if session:
                        conn.execute(text(session))
                    conn.execute(text(statement))
        with admin.begin() as conn:  # a table the owner creates later (a newer driftwarden) is readable too
            conn.execute(text(f'CREATE TABLE "{schema}".added_later (i int)'))
        with grafana.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM added_later")).scalar_one() == 0
        assert create_role(pg_url, role, schema, password).returncode == 0  # running it twice is fine
    finally:
        grafana.dispose()
        with admin.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        admin.dispose()

