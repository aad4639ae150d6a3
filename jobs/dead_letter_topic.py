"""The job's dead letters on their Kafka topic (``<topic>.dlq``), beside the rows the store keeps.

The DLQ topic is written at least once, after the store's transaction committed; its key is
``topic:partition:offset`` for consumers that deduplicate. The rows are
:func:`pipeline.dead_letters.dead_letter_row`'s.
"""

from __future__ import annotations

import base64

import orjson
from sqlalchemy import Connection

from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.pipeline.dead_letters import store_dead_letters
from driftwarden.schemas.config import SourceConfig


class DeadLetterWriter:
    """Writes dead-letter rows to the store (in the caller's transaction) and to the DLQ topic, on the source's
    brokers with its ``security`` (its secrets read where the writer runs: a TaskManager's Python worker)."""

    def __init__(self, source: SourceConfig, dlq_topic: str | None) -> None:
        from confluent_kafka import Producer

        self.dlq_topic = dlq_topic
        self.producer = Producer({**librdkafka_config(source), "linger.ms": 50}) if dlq_topic else None

    def store(self, conn: Connection, rows: list[dict]) -> None:
        """Insert the rows (see :func:`store_dead_letters`)."""
        store_dead_letters(conn, rows)

    def publish(self, rows: list[dict], payloads: list[bytes] | None = None) -> None:
        """Send the rows to the DLQ topic (call after the store transaction committed).

        ``payloads``: the rows' raw records; one whose stored text is not its exact bytes also goes
        out as ``payload_base64``.
        """
        if self.producer is None:
            return
        for row, raw in zip(rows, payloads or [None] * len(rows)):
            record = {**row, "event_time": row["event_time"].isoformat() if row["event_time"] else None,
                      "seen_at": row["seen_at"].isoformat()}
            if raw is not None and row["payload"].encode("utf-8") != raw:
                record["payload_base64"] = base64.b64encode(raw).decode("ascii")
            key = f"{row['topic']}:{row['partition']}:{row['offset']}"
            self.producer.produce(self.dlq_topic, orjson.dumps(record), key=key)
        self.producer.poll(0)

    def close(self) -> None:
        """Flush what is still queued for the DLQ topic."""
        if self.producer is not None:
            self.producer.flush(10)
