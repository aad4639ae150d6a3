"""Read a Kafka topic between two times, partition by partition, and stop: never read forever.

Each partition is read from the first offset whose timestamp is at or after ``--from``
(``offsets_for_times``) up to the first offset at or after ``--to``, or the partition's end
offset as it was when the replay started, whichever comes first. The consumer uses a throwaway
group id, never commits (``enable.auto.commit`` false, no ``commit()`` call) and is assigned
partitions directly, so no consumer group, least of all production's, is touched.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from driftwarden.core.errors import ReplayError, ServiceError
from driftwarden.core.kafka_check import check_kafka
from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.replay.records import RawRecord
from driftwarden.schemas.config import SourceConfig
from driftwarden.schemas.events import rfc3339

#: Seconds without a single record, while offsets remain, after which the read gives up.
STALL_TIMEOUT_S = 30.0
BATCH = 2000


@dataclass(frozen=True)
class PartitionRange:
    """Offsets ``[start, end)`` of one partition inside the time range."""

    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of offsets in the range."""
        return max(self.end - self.start, 0)


def replay_consumer(source: SourceConfig) -> Consumer:
    """A consumer of the source's brokers (with its ``security``) that cannot commit: a throwaway group id,
    auto-commit and offset store off."""
    return Consumer({
        **librdkafka_config(source),
        "group.id": f"driftwarden-replay-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # never skip silently to another offset
        "enable.partition.eof": True,
        "allow.auto.create.topics": False,
    })


def topic_partitions(consumer: Consumer, topic: str, bootstrap: str) -> list[int]:
    """The partition ids of ``topic``; ReplayError when it does not exist."""
    try:
        metadata = consumer.list_topics(timeout=10)
    except KafkaException as exc:
        raise ServiceError(f"cannot reach Kafka at {bootstrap}: {exc}; is it running "
                           "(scripts/services.sh start kafka)?") from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        close = sorted(t for t in metadata.topics if not t.startswith("__"))[:10]
        raise ReplayError(f"topic {topic!r} does not exist on {bootstrap}; existing topics: "
                          f"{', '.join(close) or '(none)'}")
    return sorted(found.partitions)


def plan_ranges(consumer: Consumer, topic: str, partitions: list[int], start_ms: int,
                end_ms: int) -> list[PartitionRange]:
    """Offsets of every partition between the two times (the end offset frozen now)."""
    starts = _offsets_at(consumer, topic, partitions, start_ms)
    ends = _offsets_at(consumer, topic, partitions, end_ms)
    ranges = []
    for p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        start = high if starts[p] < 0 else max(starts[p], low)
        end = high if ends[p] < 0 else min(ends[p], high)
        ranges.append(PartitionRange(p, start, max(end, start)))
    return ranges


def _offsets_at(consumer: Consumer, topic: str, partitions: list[int], ms: int) -> dict[int, int]:
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in partitions], timeout=10)
    except KafkaException as exc:
        raise ServiceError(f"cannot look up offsets of {topic!r} at {rfc3339(ms)}: {exc}") from exc
    return {tp.partition: tp.offset for tp in found}


def read_ranges(consumer: Consumer, topic: str, ranges: list[PartitionRange]) -> Iterator[list[RawRecord]]:
    """Batches of records inside the ranges; stops once every partition reached its end."""
    todo = {r.partition: r for r in ranges if r.size}
    consumer.assign([TopicPartition(topic, r.partition, r.start) for r in todo.values()])
    last_progress = time.monotonic()
    while todo:
        batch = _poll(consumer, topic, todo)
        if batch:
            last_progress = time.monotonic()
            yield batch
        elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
            left = ", ".join(f"partition {p} from {r.start}" for p, r in todo.items())
            raise ReplayError(f"no record of {topic!r} arrived for {STALL_TIMEOUT_S:.0f} s while offsets "
                              f"remained ({left}); were they deleted by retention?")


def _poll(consumer: Consumer, topic: str, todo: dict[int, PartitionRange]) -> list[RawRecord]:
    batch = []
    try:
        messages = consumer.consume(BATCH, timeout=0.5)
    except KafkaException as exc:
        raise ServiceError(f"reading {topic!r} failed: {exc}; is Kafka still running?") from exc
    for msg in messages:
        p = msg.partition()
        if p not in todo:
            continue
        if msg.error() is not None:
            _check_error(msg.error(), topic, p)
            _finish(consumer, topic, todo, p)
            continue
        if msg.offset() >= todo[p].end:
            _finish(consumer, topic, todo, p)
            continue
        batch.append(RawRecord((topic, p, msg.offset()), p, msg.value() or b"", msg.timestamp()[1], msg.key()))
        if msg.offset() + 1 >= todo[p].end:
            _finish(consumer, topic, todo, p)
    return batch


def _check_error(error: KafkaError, topic: str, partition: int) -> None:
    """Return on the end of a partition; raise a clear error for anything else."""
    if error.code() == KafkaError._PARTITION_EOF:
        return
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        raise ReplayError(f"{topic!r} partition {partition}: records of the range were deleted while "
                          f"replaying (retention?); replay a later range or raise the topic's retention.ms")
    raise ServiceError(f"reading {topic!r} partition {partition} failed: {error}")


def _finish(consumer: Consumer, topic: str, todo: dict[int, PartitionRange], partition: int) -> None:
    todo.pop(partition, None)
    consumer.pause([TopicPartition(topic, partition)])


def read_topic(source: SourceConfig, topic: str, start_ms: int, end_ms: int,
               on_plan=None) -> Iterator[list[RawRecord]]:
    """Batches of the topic's records between the times; ``on_plan(ranges)`` is told the plan first.

    The source's brokers are checked first (:func:`check_kafka`): a refused connection ends the replay
    with one line that says why, instead of librdkafka's retries."""
    check_kafka(source)
    consumer = replay_consumer(source)
    try:
        partitions = topic_partitions(consumer, topic, source.bootstrap_servers)
        ranges = plan_ranges(consumer, topic, partitions, start_ms, end_ms)
        if not sum(r.size for r in ranges):
            raise ReplayError(f"topic {topic!r} holds no record between {rfc3339(start_ms)} and "
                              f"{rfc3339(end_ms)}: widen the range (the topic's record timestamps decide)")
        if on_plan is not None:
            on_plan(ranges)
        yield from read_ranges(consumer, topic, ranges)
    finally:
        consumer.close()
