"""The read-only role docs/store.md gives Grafana, run as written on the real PostgreSQL: it reads every
table of the store and cannot write."""

from __future__ import annotations

import re
import secrets
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from driftwarden.schemas.tables import window_counts

pytestmark = pytest.mark.services
DOC = Path(__file__).resolve().parent.parent / "docs" / "store.md"


def _documented_sql() -> str:
    """The SQL block of the page's read-only role section."""
    section = DOC.read_text().split("## A read-only role for Grafana", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def test_the_documented_read_only_role_reads_and_cannot_write(pg_engine) -> None:
    schema = pg_engine.url.query["options"].split("=", 1)[1]
    role, password = f"grafana_reader_{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(16)
    sql = _documented_sql().replace("driftwarden_grafana", role).replace("SCHEMA public", f"SCHEMA {schema}")
    with pg_engine.begin() as conn:
        for statement in (s for s in sql.split(";") if s.strip() and not s.strip().startswith("--")):
            conn.execute(text(statement))
        conn.execute(text(f"ALTER ROLE {role} PASSWORD '{password}'"))  # the page: psql's \password
    url = make_url(pg_engine.url.render_as_string(hide_password=False))._replace(username=role, password=password)
    reader = create_engine(url)
    try:
        with reader.connect() as conn:
            assert conn.execute(select(func.count()).select_from(window_counts)).scalar_one() == 0
        with pytest.raises(ProgrammingError, match="permission denied"), reader.begin() as conn:
            conn.execute(text("DELETE FROM window_counts"))
    finally:
        reader.dispose()
        with pg_engine.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE {role}"))
