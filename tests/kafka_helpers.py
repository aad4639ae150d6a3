"""Small helpers for tests that talk to the real Kafka broker."""

from __future__ import annotations

from typing import Iterable

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    """Create a topic and wait until the broker confirms it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, values: Iterable[bytes | dict], partitions: Iterable[int] | None = None) -> int:
    """Produce values (dicts are JSON-encoded) and flush; return how many were sent.

    ``partitions``: each value's partition (default: the producer's partitioner picks)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True})
    sent = 0
    for value, partition in zip(values, partitions if partitions is not None else iter(lambda: -1, None)):
        producer.produce(topic, value if isinstance(value, bytes) else orjson.dumps(value), partition=partition)
        sent += 1
        if sent % 5000 == 0:
            producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered to {topic}"
    return sent


def produce_to_partitions(bootstrap: str, topic: str, partitions: list[list[bytes | dict]]) -> None:
    """Each list of values to its partition (the list's index)."""
    for partition, values in enumerate(partitions):
        produce(bootstrap, topic, values, [partition] * len(values))
