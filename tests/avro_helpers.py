"""Avro topics for the tests: the registry started by scripts/services.sh, schemas, Confluent-framed values.

Values are framed by Confluent's own serializer (``confluent_kafka.schema_registry.avro.AvroSerializer``)
registering the schemas through the running registry, so the wire format is checked against a real client.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
from pathlib import Path

import fastavro
import pytest

from driftwarden.core.confluent_avro import frame
from tests.conftest import PORT_OFFSET, RUN_DIR

REGISTRY_URL = os.environ.get("DRIFTWARDEN_REGISTRY_URL", f"http://127.0.0.1:{59098 + PORT_OFFSET}")
#: The registry's password file (scripts/schema_registry.py writes it at its first start).
REGISTRY_PASSWORD_FILE = Path(os.environ.get("DRIFTWARDEN_REGISTRY_PASSWORD_FILE", RUN_DIR / "registry" / "password"))
REGISTRY_USER = "driftwarden"


def require_registry() -> dict:
    """The config's ``schema_registry`` section for the running registry; fails with the command to start it."""
    host, port = REGISTRY_URL.split("//", 1)[1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        pytest.fail(f"the schema registry is not listening on {REGISTRY_URL}: run `scripts/services.sh start registry`")
    return {"url": REGISTRY_URL, "username": REGISTRY_USER, "password_file": str(REGISTRY_PASSWORD_FILE)}


def registry_client():
    """Confluent's own registry client, logged in to the running registry."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    require_registry()
    password = REGISTRY_PASSWORD_FILE.read_text().strip()
    return SchemaRegistryClient({"url": REGISTRY_URL, "basic.auth.user.info": f"{REGISTRY_USER}:{password}"})


def confluent_values(topic: str, schema: dict, records: list[dict]) -> list[bytes]:
    """Each record framed by Confluent's AvroSerializer under ``schema`` (registered as subject ``<topic>-value``)."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(registry_client(), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(record, context) for record in records]


def register(subject: str, schema: dict) -> int:
    """Register ``schema`` under ``subject`` (Confluent's client); its id."""
    from confluent_kafka.schema_registry import Schema

    return registry_client().register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def schemaless(schema: dict, record: dict) -> bytes:
    """``record``'s Avro binary under ``schema`` (fastavro), without a frame."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def framed(schema_id: int, schema: dict, record: dict) -> bytes:
    """``record`` in the Confluent wire format under a registered schema id."""
    return frame(schema_id, schemaless(schema, record))


def java_json(values: list[bytes], url: str = REGISTRY_URL,
              password_file: Path = REGISTRY_PASSWORD_FILE) -> list[bytes | None]:
    """What the job's Java side reads each value as (``ConfluentAvro``'s JSON, None: not decodable), with the
    registry at ``url``; AssertionError with Java's error output when the harness fails."""
    return [None if line == "null" else line.encode() for line in _harness(values, url, password_file)]


def java_columns(values: list[bytes], spec_json: str, folder: Path) -> list[list | None]:
    """The values the job's source task takes from each value's envelope, by column (``FeatureColumnSpec``'s
    ``spec_json``), None where Java does not vouch for the record."""
    spec = folder / "columns.json"
    spec.write_text(spec_json)
    return [json.loads(line) for line in _harness(values, REGISTRY_URL, REGISTRY_PASSWORD_FILE, str(spec))]


def _harness(values: list[bytes], url: str, password_file: Path, *extra: str) -> list[str]:
    from driftwarden.jobs.java_summary import flink_classpath, udf_jar

    classpath = os.pathsep.join(str(p) for p in [udf_jar(), *flink_classpath()])
    done = subprocess.run(["java", "-cp", classpath, "dev.driftwarden.flink.ConfluentAvro", url, REGISTRY_USER,
                           str(password_file), *extra], input="".join(v.hex() + "\n" for v in values),
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("\n")[:-1]
