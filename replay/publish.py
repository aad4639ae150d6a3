"""Re-publish replayed records to another topic, keeping their event times and timestamps.

Values are sent byte for byte (the event time inside them is untouched), with the original
key and record timestamp (for a file, the event time). Valid events go out in the replay's
merged event-time order, so ``--pace original`` can sleep by event-time gaps; ``xN`` sleeps N
times less; ``max`` never sleeps. Rejected records are re-published too, unpaced: an incident's
malformed traffic is part of what a staging job must see.
"""

from __future__ import annotations

import re
import time

from confluent_kafka import KafkaException, Producer

from driftwarden.core.errors import ConfigError, ServiceError
from driftwarden.core.kafka_security import librdkafka_config
from driftwarden.replay.records import RawRecord
from driftwarden.schemas.config import SourceConfig

_PACE = re.compile(r"^x(\d+(?:\.\d+)?)$")
#: Serve delivery callbacks every this many records.
POLL_EVERY = 5000


def parse_pace(text: str) -> float:
    """Speed-up factor of a ``--pace`` value: original = 1, xN = N, max = infinity."""
    if text == "original":
        return 1.0
    if text == "max":
        return float("inf")
    match = _PACE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"--pace {text!r}: use original, max or xN with N > 0 (e.g. x10)")
    return float(match.group(1))


class Republisher:
    """A record sink that produces every record it is handed to ``topic`` of ``source``'s brokers."""

    def __init__(self, source: SourceConfig, topic: str, speedup: float, partitions: int | None = None,
                 sleep=time.sleep) -> None:
        self.topic = topic
        self.speedup = speedup
        self._producer = Producer({**librdkafka_config(source), "linger.ms": 20, "enable.idempotence": True})
        self._partitions = partitions
        self._sleep = sleep
        self._last_ms: int | None = None
        self.sent = 0

    def __call__(self, record: RawRecord, event_ms: int | None) -> None:
        """Pace by the event-time gap to the previous event, then produce the record."""
        if event_ms is not None:
            self._pace(event_ms)
        kwargs = {"timestamp": record.timestamp_ms or event_ms or 0}
        if self._partitions and record.partition < self._partitions:
            kwargs["partition"] = record.partition
        try:
            self._producer.produce(self.topic, record.value, key=record.key, **kwargs)
        except BufferError:
            self._producer.poll(1.0)
            self._producer.produce(self.topic, record.value, key=record.key, **kwargs)
        except KafkaException as exc:
            raise ServiceError(f"cannot publish to {self.topic!r}: {exc}") from exc
        self.sent += 1
        if self.sent % POLL_EVERY == 0:
            self._producer.poll(0)

    def _pace(self, event_ms: int) -> None:
        if self._last_ms is not None and event_ms > self._last_ms and self.speedup != float("inf"):
            self._sleep((event_ms - self._last_ms) / 1000 / self.speedup)
        if self._last_ms is None or event_ms > self._last_ms:
            self._last_ms = event_ms

    def close(self) -> None:
        """Deliver everything still queued; ServiceError if some records could not be."""
        remaining = self._producer.flush(60)
        if remaining:
            raise ServiceError(f"{remaining} records could not be delivered to {self.topic!r} within 60 s")


def target_partitions(source: SourceConfig, topic: str) -> int:
    """Partition count of the target topic; ConfigError when it does not exist."""
    from driftwarden.core.kafka_check import check_kafka
    from driftwarden.replay.kafka_range import replay_consumer

    check_kafka(source)
    consumer = replay_consumer(source)
    try:
        found = consumer.list_topics(timeout=10).topics.get(topic)
    except KafkaException as exc:
        raise ServiceError(f"cannot reach Kafka at {source.bootstrap_servers}: {exc}") from exc
    finally:
        consumer.close()
    if found is None or found.error is not None:
        raise ConfigError(f"--to-topic {topic!r} does not exist: create it first (same partition count "
                          "as the source keeps records in their partitions)")
    return len(found.partitions)
