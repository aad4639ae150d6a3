"""Kafka consumer lag of the job's group, per partition, in records and in seconds.

Flink reports where its source reads (``currentOffset``) but not where each partition ends, so the
lag is measured the way Kafka's own tools do: the partition's end offset minus the group's
committed offset (the job commits on every completed checkpoint). Lag in seconds is the age of
the oldest record not yet committed (now minus its Kafka timestamp; 0 when there is no lag).
Works the same for the embedded MiniCluster and a cluster: it reads Kafka, not Flink.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.schemas.config import SourceConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionLag:
    """The group's position in one partition."""

    topic: str
    partition: int
    committed: int | None  # None: the group has committed nothing yet
    end: int
    records: int
    seconds: float


def consumer_lags(source: SourceConfig, timeout_s: float = 10.0, now_s: float | None = None) -> list[PartitionLag]:
    """Lag of ``source.group_id`` on every partition of the source's topics."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**librdkafka_config(source), "group.id": source.group_id,
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        partitions = [TopicPartition(t, p) for t, p in _partitions(consumer, source, timeout_s)]
        committed = consumer.committed(partitions, timeout=timeout_s) if partitions else []
        now_s = time.time() if now_s is None else now_s
        return [_lag(consumer, tp, timeout_s, now_s) for tp in committed]
    finally:
        consumer.close()


def _partitions(consumer, source: SourceConfig, timeout_s: float) -> list[tuple[str, int]]:
    topics = consumer.list_topics(timeout=timeout_s).topics
    if source.topic_pattern:
        wanted = [t for t in topics if re.fullmatch(source.topic_pattern, t)]
    else:
        wanted = [t for t in source.topics if t in topics]
    return sorted((t, p) for t in wanted for p in topics[t].partitions)


def _lag(consumer, tp, timeout_s: float, now_s: float) -> PartitionLag:
    low, end = consumer.get_watermark_offsets(tp, timeout=timeout_s)
    committed = tp.offset if tp.offset >= 0 else None
    position = max(committed if committed is not None else low, low)
    records = max(end - position, 0)
    seconds = max(now_s - _timestamp_s(consumer, tp.topic, tp.partition, position, timeout_s), 0.0) if records else 0.0
    return PartitionLag(tp.topic, tp.partition, committed, end, records, seconds)


def _timestamp_s(consumer, topic: str, partition: int, offset: int, timeout_s: float) -> float:
    """Kafka timestamp (seconds) of the record at ``offset``."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, partition, offset)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            return msg.timestamp()[1] / 1000
    return time.time()  # unreadable within the timeout: report no age rather than a made-up one


class ConsumerLagCollector(Collector):
    """``driftwarden_consumer_lag_records`` / ``_seconds`` per topic and partition, read on scrape."""

    def __init__(self, source: SourceConfig, min_interval_s: float = 5.0) -> None:
        self.source = source
        self.min_interval_s = min_interval_s
        self._cached: tuple[float, list[PartitionLag]] | None = None

    def describe(self) -> list[Metric]:
        """Return no descriptions, so registering does not read Kafka."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield the lag gauges (reusing a reading younger than ``min_interval_s``)."""
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] >= self.min_interval_s:
            from confluent_kafka import KafkaException

            try:
                self._cached = (now, consumer_lags(self.source))
            except KafkaException as exc:  # Kafka away: no lag series this scrape (the rules see them vanish)
                log.warning("consumer lag scrape could not read Kafka: %s", exc)
                self._cached = (now, [])
        records = GaugeMetricFamily("driftwarden_consumer_lag_records",
                                    "Records after the job's committed offset", labels=["topic", "partition"])
        seconds = GaugeMetricFamily("driftwarden_consumer_lag_seconds",
                                    "Age of the oldest record after the job's committed offset",
                                    labels=["topic", "partition"])
        for lag in self._cached[1]:
            records.add_metric([lag.topic, str(lag.partition)], lag.records)
            seconds.add_metric([lag.topic, str(lag.partition)], lag.seconds)
        yield from (records, seconds)
