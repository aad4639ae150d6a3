"""Dead letters: rejected and late events kept with their reason, as the store keeps them.

Rows are keyed by (topic, partition, offset) and inserted with "insert or ignore", so a window
replayed after a restart never stores a record twice. The live job also publishes them to a Kafka
topic (``jobs/dead_letter_topic.py``).

Whatever a producer sent can be stored: the payload is kept as text (:func:`payload_text`: UTF-8,
with undecodable bytes and NUL as ``\\xNN`` escapes; the DLQ record then also carries the exact
bytes as ``payload_base64``), names and reasons as the store can keep them
(``core.store.store_text``), and on PostgreSQL each batch is written under a savepoint, so
a row the store still refuses is kept in a reduced form instead of failing the caller's
transaction (a window's results and its other rows).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import Connection
from sqlalchemy.exc import DataError, IntegrityError

from driftwarden.core.store import insert_ignore
from driftwarden.core.totals import add_totals, dead_letter_totals
from driftwarden.pipeline.validation import REASON_SEPARATOR
from driftwarden.schemas.events import utc_from_ms
from driftwarden.schemas.tables import dead_letters

#: Reason of a row the store refused even after sanitising (kept with its coordinates and payload).
UNSTORABLE = "unstorable"
#: Errors of one row's content (not of the store's availability, which the caller retries).
ROW_ERRORS = (DataError, IntegrityError)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rejected:
    """One record that failed validation, with its Kafka coordinates."""

    topic: str
    partition: int
    offset: int
    reason: str  # "code | detail"
    payload: bytes


def dead_letter_row(record: Rejected, model: str | None = None, event_ms: int | None = None) -> dict:
    """The ``dead_letters`` row of a rejected or late record."""
    code, _, detail = record.reason.partition(REASON_SEPARATOR)
    return {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "reason": code[:200], "detail": detail, "model": model,
        "event_time": utc_from_ms(event_ms) if event_ms else None,
        "payload": payload_text(record.payload),
        "seen_at": datetime.now(timezone.utc),
    }


def payload_text(payload: bytes) -> str:
    """A raw record as storable text: UTF-8, undecodable bytes and NUL as ``\\xNN`` escapes.

    >>> payload_text(b'{"model": "m"}')
    '{"model": "m"}'
    >>> payload_text(bytes([0x00, 0x78, 0xff]))
    '\\\\x00x\\\\xff'
    """
    return payload.decode("utf-8", errors="backslashreplace").replace("\x00", "\\x00")


def store_dead_letters(conn: Connection, rows: list[dict]) -> None:
    """Insert the rows (a row already stored is left alone); a row the store refuses is kept reduced.

    On PostgreSQL the batch runs under a savepoint; if the store refuses it, each row is retried
    under its own savepoint and a refused row is stored as :data:`UNSTORABLE` with its coordinates
    and payload only. Errors of the store itself (connection lost) reach the caller.
    """
    try:
        with _savepoint(conn):
            _insert_new(conn, rows)
        return
    except ROW_ERRORS:
        if conn.dialect.name != "postgresql":
            raise
    for row in rows:
        try:
            with _savepoint(conn):
                _insert_new(conn, [row])
        except ROW_ERRORS as exc:
            log.warning("dead letter %s:%s:%s refused by the store (%s); kept as %r",
                        row["topic"][:80], row["partition"], row["offset"], type(exc).__name__, UNSTORABLE)
            _insert_new(conn, [_reduced(row, exc)])


def _insert_new(conn: Connection, rows: list[dict]) -> None:
    """Insert the rows not stored yet and add those to the running totals (``core.totals``)."""
    inserted = insert_ignore(conn, dead_letters, rows, ("topic", "partition", "offset"),
                             returning=(dead_letters.c.reason, dead_letters.c.model))
    add_totals(conn, dead_letter_totals(inserted))


def _savepoint(conn: Connection):
    """A savepoint on PostgreSQL; none on SQLite (pysqlite's savepoints break the outer transaction,
    and SQLite takes any text the sanitising lets through)."""
    return conn.begin_nested() if conn.dialect.name == "postgresql" else nullcontext()


def _reduced(row: dict, exc: Exception) -> dict:
    """The row with only what cannot be refused: coordinates, reason, payload."""
    return {**row, "reason": UNSTORABLE, "detail": f"{row['reason']}{REASON_SEPARATOR}{type(exc).__name__}",
            "model": None, "event_time": None, "payload": row["payload"].encode("ascii", "backslashreplace").decode()}
