"""The Kafka source table: raw JSON values, their Kafka coordinates, event time and watermark.

Event time is computed in Java (``DW_EVENT_MILLIS``, one streaming pass over the bytes) so that Flink pushes
the watermark into the Kafka source and keeps one watermark per partition; a Python UDF here
would force one watermark after the source and drop the slower partition's events as late.
Events whose time cannot be parsed get epoch 0 (they are rejected by validation downstream).
The value stays BYTES: a record that is not UTF-8 must reach validation (and the dead letters)
intact instead of breaking the Arrow transfer to Python.
"""

from __future__ import annotations

from schemas.config import SourceConfig
from schemas.events import parse_event_time

STARTUP_MODES = {"earliest": "earliest-offset", "latest": "latest-offset", "committed": "group-offsets"}


def kafka_source_ddl(
    table: str,
    source: SourceConfig,
    out_of_orderness_ms: int,
    bounded: bool = False,
    watermark_emit: str = "on-periodic",
) -> str:
    """CREATE TABLE statement of the Kafka source named ``table``."""
    options = {
        "connector": "kafka",
        "properties.bootstrap.servers": source.bootstrap_servers,
        "properties.group.id": source.group_id,
        "properties.auto.offset.reset": "earliest",
        "format": "raw",
        "scan.watermark.emit.strategy": watermark_emit,
    }
    if source.topic_pattern:
        options["topic-pattern"] = source.topic_pattern
    else:
        options["topic"] = ";".join(source.topics)
    options.update(_startup_options(source.start))
    if bounded:
        options["scan.bounded.mode"] = "latest-offset"
    with_clause = ",\n  ".join(f"'{k}' = '{_escape(v)}'" for k, v in options.items())
    return f"""CREATE TABLE {table} (
  `value` BYTES,
  `topic` STRING METADATA VIRTUAL,
  `partition` INT METADATA VIRTUAL,
  `offset` BIGINT METADATA VIRTUAL,
  `et` AS TO_TIMESTAMP_LTZ(COALESCE(DW_EVENT_MILLIS(`value`), 0), 3),
  WATERMARK FOR `et` AS `et` - INTERVAL '{out_of_orderness_ms / 1000:.3f}' SECOND
) WITH (
  {with_clause}
)"""


def _startup_options(start: str) -> dict[str, str]:
    if start in STARTUP_MODES:
        return {"scan.startup.mode": STARTUP_MODES[start]}
    return {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(parse_event_time(start))}


def _escape(value: str) -> str:
    return str(value).replace("'", "''")
