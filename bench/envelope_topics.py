"""The bench events in other shapes, for ``bench_job.py --envelopes``: the same events on topics of their own.

* ``avro``: Confluent-framed Avro, the schema registered in the running registry (scripts/services.sh
  ``registry``), one flat record per event: ``event_time`` (timestamp-millis), ``model``, the 20
  numeric features (double) and the 5 categorical ones (string) at the top level;
* ``flat``: the same flat record as JSON, its time in epoch seconds under ``ts`` and the model under
  ``model_id`` (the mapped envelope of docs/your-events.md);
* ``wrong``: the contract's JSON envelope with one numeric feature a text (``"oops"``) in ``share`` of the
  events: a monitored value of the wrong type, counted invalid, the rest of the event kept.

Each config is :func:`bench_job.config_for`'s, with the envelope (and format) the shape needs.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Callable, Iterator

import fastavro
import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
REGISTRY_URL = os.environ.get("DRIFTWARDEN_REGISTRY_URL",
                              f"http://127.0.0.1:{59098 + int(os.environ.get('DRIFTWARDEN_PORT_OFFSET', '0'))}")
REGISTRY_PASSWORD_FILE = os.environ.get("DRIFTWARDEN_REGISTRY_PASSWORD_FILE",
                                        str(Path(os.environ.get("DRIFTWARDEN_RUN_DIR", REPO / ".run")) / "registry" / "password"))
REGISTRY = {"url": REGISTRY_URL, "username": "driftwarden", "password_file": REGISTRY_PASSWORD_FILE}
SHAPES = ("json", "avro", "flat", "wrong")


def avro_schema(numeric: list[str], categorical: list[str]) -> dict:
    """The flat Avro record of a bench event."""
    return {"type": "record", "name": "BenchEvent", "namespace": "bench", "fields": [
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "model", "type": "string"},
        *({"name": n, "type": "double"} for n in numeric),
        *({"name": c, "type": "string"} for c in categorical)]}


def register(subject: str, schema: dict) -> int:
    """Register ``schema`` under ``subject`` in the running registry; its id."""
    password = Path(REGISTRY_PASSWORD_FILE).read_text().strip()
    answer = httpx.post(f"{REGISTRY_URL}/subjects/{subject}/versions", json={"schema": json.dumps(schema)},
                        auth=("driftwarden", password), timeout=10)
    answer.raise_for_status()
    return answer.json()["id"]


def encoder(shape: str, topic: str, numeric: list[str], categorical: list[str],
            share: float) -> Callable[[int, int, dict], bytes]:
    """``(i, event_ms, features) -> value`` of the event in ``shape``."""
    if shape == "json":
        return lambda i, ms, features: orjson.dumps({"event_time": ms, "model": "bench", "features": features})
    if shape == "flat":
        return lambda i, ms, features: orjson.dumps({"ts": ms / 1000, "model_id": "bench", **features})
    if shape == "wrong":
        every = max(round(1 / share), 1)
        return lambda i, ms, features: orjson.dumps({"event_time": ms, "model": "bench", "features": (
            {**features, numeric[0]: "oops"} if i % every == every // 2 else features)})
    schema = avro_schema(numeric, categorical)
    parsed, header = fastavro.parse_schema(schema), b"\x00" + register(f"{topic}-value", schema).to_bytes(4, "big")

    def avro(i: int, ms: int, features: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"event_time": ms, "model": "bench", **features})
        return header + out.getvalue()
    return avro


def source_section(shape: str) -> dict:
    """The config's ``source`` keys a shape needs beside the topic (format, registry, envelope)."""
    if shape == "avro":
        return {"format": "avro", "schema_registry": REGISTRY,
                "envelope": {"features": {"root": True, "exclude": ["event_time", "model"]}}}
    if shape == "flat":
        return {"envelope": {"event_time": {"field": "ts", "unit": "s"}, "model": {"field": "model_id"},
                             "features": {"root": True, "exclude": ["ts", "model_id"]}}}
    return {}


def values(shape: str, topic: str, events: Iterator[tuple[int, int, dict]], numeric: list[str],
           categorical: list[str], share: float) -> Iterator[bytes]:
    """The values of ``events`` (``(i, event_ms, features)``) in ``shape``."""
    encode = encoder(shape, topic, numeric, categorical, share)
    for i, ms, features in events:
        yield encode(i, ms, features)
