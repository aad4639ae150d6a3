"""Small helpers for tests that talk to the real Kafka broker."""

from __future__ import annotations

from typing import Iterable

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int = 2, client: dict | None = None) -> None:
    """Create a topic and wait until the broker confirms it (``client``: librdkafka settings of a secured
    listener, :func:`secure_client_config`, instead of the plain ``bootstrap``)."""
    admin = AdminClient(client or {"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, values: Iterable[bytes | dict], partitions: Iterable[int] | None = None,
            client: dict | None = None) -> int:
    """Produce values (dicts are JSON-encoded) and flush; return how many were sent.

    ``partitions``: each value's partition (default: the producer's partitioner picks); ``client``: as for
    :func:`create_topic`."""
    producer = Producer({**(client or {"bootstrap.servers": bootstrap}), "linger.ms": 10, "enable.idempotence": True})
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


def sasl_ssl_security(kafka, **override: str) -> dict:
    """``source.security`` for the broker's SASL_SSL listener (``kafka``: the ``secure_kafka`` fixture); the
    password from its file unless ``override`` says otherwise (e.g. ``password_env="X", password_file=None``)."""
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": kafka.user,
                "password_file": str(kafka.password_file), "ca_file": str(kafka.ca_file), **override}
    return {k: v for k, v in security.items() if v is not None}


def mtls_security(kafka, **override: str) -> dict:
    """``source.security`` for the broker's mutual-TLS listener (the ``secure_kafka`` fixture's files)."""
    security = {"protocol": "SSL", "ca_file": str(kafka.ca_file), "cert_file": str(kafka.cert_file),
                "key_file": str(kafka.key_file), **override}
    return {k: v for k, v in security.items() if v is not None}


def secure_client_config(bootstrap: str, security: dict) -> dict:
    """librdkafka's settings for a test client, through driftwarden's own translation."""
    from driftwarden.core.kafka_security import librdkafka_config
    from driftwarden.schemas.config import SourceConfig

    return librdkafka_config(SourceConfig(bootstrap_servers=bootstrap, security=security))
