"""Dead letters: rejected and late events kept with their reason, in the store and on a Kafka topic.

Rows are keyed by (topic, partition, offset) and inserted with "insert or ignore", so a window
replayed after a restart never stores a record twice; the DLQ topic is written at least once
(its key is ``topic:partition:offset`` for consumers that deduplicate).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import orjson
from sqlalchemy import Connection

from driftwarden.store import insert_ignore
from schemas.events import utc_from_ms
from schemas.tables import dead_letters

#: Between a reason code and its human detail in a reason string.
REASON_SEPARATOR = " | "


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
        "payload": record.payload.decode("utf-8", errors="backslashreplace"),
        "seen_at": datetime.now(timezone.utc),
    }


class DeadLetterWriter:
    """Writes dead-letter rows to the store (in the caller's transaction) and to the DLQ topic."""

    def __init__(self, bootstrap: str, dlq_topic: str | None) -> None:
        from confluent_kafka import Producer

        self.dlq_topic = dlq_topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50}) if dlq_topic else None

    def store(self, conn: Connection, rows: list[dict]) -> None:
        """Insert the rows (a row already stored is left alone)."""
        insert_ignore(conn, dead_letters, rows, ("topic", "partition", "offset"))

    def publish(self, rows: list[dict]) -> None:
        """Send the rows to the DLQ topic (call after the store transaction committed)."""
        if self.producer is None:
            return
        for row in rows:
            record = {**row, "event_time": row["event_time"].isoformat() if row["event_time"] else None,
                      "seen_at": row["seen_at"].isoformat()}
            key = f"{row['topic']}:{row['partition']}:{row['offset']}"
            self.producer.produce(self.dlq_topic, orjson.dumps(record), key=key)
        self.producer.poll(0)

    def close(self) -> None:
        """Flush what is still queued for the DLQ topic."""
        if self.producer is not None:
            self.producer.flush(10)
