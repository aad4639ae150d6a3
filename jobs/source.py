"""The Kafka source as a SQL table (the smoke job's): raw JSON values, their Kafka coordinates, event time and watermark.

The drift job reads Kafka in Java instead (``SummarySource``: the per-event work chained to the source, by the
same event-time rules); :data:`STARTUP_MODES`, :func:`sql_literal` and :func:`interval_sql` serve both.

Event time is computed in Java (``DW_EVENT_MILLIS``, one streaming pass over the bytes) so that Flink pushes
the watermark into the Kafka source and keeps one watermark per partition; a Python UDF here
would force one watermark after the source and drop the slower partition's events as late.
Events whose time cannot be parsed get epoch 0 (they are rejected by validation downstream), and
so do events whose time is too far ahead of their Kafka record's timestamp (``future``, see
:func:`future_sql`): neither moves the watermark.
The value stays BYTES: a record that is not UTF-8 must reach validation (and the dead letters)
intact instead of breaking the Arrow transfer to Python.
"""

from __future__ import annotations

from driftwarden.core.kafka_security import java_properties
from driftwarden.schemas.config import MAX_DURATION_MS, SourceConfig
from driftwarden.schemas.events import parse_event_time

STARTUP_MODES = {"earliest": "earliest-offset", "latest": "latest-offset", "committed": "group-offsets"}


def interval_sql(ms: int) -> str:
    """A duration of ``ms`` milliseconds (0 up to 100 days) as a Flink SQL interval literal, exact to the
    millisecond. ``INTERVAL 'n' SECOND`` is not: its leading field holds 2 digits (a window of 100 s or more
    fails to plan), and a float's text can round the duration. Days are 2 digits too (Flink's watermark
    code accepts no other precision), so the config keeps its durations below ``MAX_DURATION_MS``.

    >>> interval_sql(3_600_000), interval_sql(1_500)
    ("INTERVAL '0 01:00:00.000' DAY(2) TO SECOND(3)", "INTERVAL '0 00:00:01.500' DAY(2) TO SECOND(3)")
    """
    if not 0 <= ms < MAX_DURATION_MS:
        raise ValueError(f"a duration of {ms} ms cannot be a Flink SQL interval (0 up to 100 days)")
    seconds, millis = divmod(int(ms), 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY(2) TO SECOND(3)"


def future_sql(max_skew_ms: int) -> str:
    """SQL twin of :func:`pipeline.event_time.is_future` over the source's columns (TRUE: a bad clock)."""
    skew = interval_sql(max_skew_ms)
    return (f"COALESCE(`kafka_ts` > TO_TIMESTAMP_LTZ(0, 3) AND "
            f"TO_TIMESTAMP_LTZ(DW_EVENT_MILLIS(`value`), 3) > `kafka_ts` + {skew}, FALSE)")


def kafka_source_ddl(
    table: str,
    source: SourceConfig,
    out_of_orderness_ms: int,
    bounded: bool = False,
    watermark_emit: str = "on-periodic",
    max_future_skew_ms: int = 900_000,
) -> str:
    """CREATE TABLE statement of the Kafka source named ``table`` (its ``future`` column: see :func:`future_sql`)."""
    options = {
        "connector": "kafka",
        "properties.bootstrap.servers": source.bootstrap_servers,
        "properties.group.id": source.group_id,
        "properties.auto.offset.reset": "earliest",
        "format": "raw",
        "scan.watermark.emit.strategy": watermark_emit,
        # source.security: secrets only as references, resolved by the Kafka client (core/kafka_security.py)
        **{f"properties.{key}": value for key, value in java_properties(source.security).items()},
    }
    if source.topic_pattern:
        options["topic-pattern"] = source.topic_pattern
    else:
        options["topic"] = ";".join(source.topics)
    options.update(_startup_options(source.start))
    if bounded:
        options["scan.bounded.mode"] = "latest-offset"
    with_clause = ",\n  ".join(f"'{k}' = {sql_literal(v)}" for k, v in options.items())
    future = future_sql(max_future_skew_ms)
    return f"""CREATE TABLE {table} (
  `value` BYTES,
  `topic` STRING METADATA VIRTUAL,
  `partition` INT METADATA VIRTUAL,
  `offset` BIGINT METADATA VIRTUAL,
  `kafka_ts` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  `future` AS {future},
  `pt` AS PROCTIME(),
  `et` AS TO_TIMESTAMP_LTZ(CASE WHEN {future} THEN 0 ELSE COALESCE(DW_EVENT_MILLIS(`value`), 0) END, 3),
  WATERMARK FOR `et` AS `et` - {interval_sql(out_of_orderness_ms)}
) WITH (
  {with_clause}
)"""


def _startup_options(start: str) -> dict[str, str]:
    if start in STARTUP_MODES:
        return {"scan.startup.mode": STARTUP_MODES[start]}
    return {"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(parse_event_time(start))}


def sql_literal(value: str) -> str:
    """``value`` as a Flink SQL string literal: quoted, each quote doubled (names from events are data)."""
    return "'" + str(value).replace("'", "''") + "'"
