"""Decode Kafka values in the Confluent wire format: magic byte 0, a 4-byte big-endian schema id, Avro binary.

The writer schema comes from the schema registry by id (:class:`core.schema_registry.RegistryClient`,
cached), the bytes are decoded with fastavro, and the record comes back as the JSON object it reads
as (:func:`core.event_files.avro_as_json`), for the envelope rules to map like any JSON event. The
job's Java side does the same (``ConfluentAvro``); ``tests/test_avro_registry.py`` compares them.

A value that is not such a frame, names a schema id the registry does not know, or whose bytes do
not decode under its schema exactly (with nothing left over) raises :class:`InvalidEventError`
(``not_avro_frame``, ``avro_unknown_schema``, ``avro_undecodable``): a dead letter with that reason.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import orjson

from driftwarden.core.errors import InvalidEventError
from driftwarden.core.event_files import avro_as_json
from driftwarden.core.schema_registry import RegistryClient

MAGIC = 0
HEADER = struct.Struct(">bI")


def frame(schema_id: int, payload: bytes) -> bytes:
    """A Confluent wire-format value: the magic byte, the schema id, the Avro binary ``payload``."""
    return HEADER.pack(MAGIC, schema_id) + payload


class ConfluentAvroDecoder:
    """Kafka values in the Confluent wire format -> JSON-like dicts; writer schemas parsed once per id.

    Built from a config's ``source.schema_registry``; the registry client (and its password) is made
    on first use, so the decoder travels (pickled) to the job's workers without the secret.
    """

    def __init__(self, registry_config: Any, client: RegistryClient | None = None) -> None:
        self.registry_config = registry_config
        self._client = client
        self._schemas: dict[int, Any] = {}

    def __reduce__(self) -> tuple:
        return ConfluentAvroDecoder, (self.registry_config,)

    @property
    def client(self) -> RegistryClient:
        """The registry client (made on first use)."""
        if self._client is None:
            self._client = RegistryClient.of(self.registry_config)
        return self._client

    def __call__(self, value: bytes) -> Any:
        """The record in ``value`` as JSON holds it; InvalidEventError when it cannot be read."""
        if len(value) < HEADER.size or value[0] != MAGIC:
            raise InvalidEventError("not_avro_frame", f"{bytes(value[:5]).hex()!r}: not magic byte 0 and a 4-byte "
                                                      "schema id (the Confluent wire format)")
        schema_id = HEADER.unpack_from(value)[1]
        schema = self.writer_schema(schema_id)
        body = io.BytesIO(value)
        body.seek(HEADER.size)
        try:
            record = fastavro.schemaless_reader(body, schema, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, IndexError...
            raise InvalidEventError("avro_undecodable", f"schema id {schema_id}: the bytes do not decode under its "
                                                        f"schema ({type(exc).__name__})") from exc
        if body.tell() != len(value):
            raise InvalidEventError("avro_undecodable", f"schema id {schema_id}: {len(value) - body.tell()} bytes "
                                                        "left after the record")
        return avro_as_json(record)

    def as_json(self, value: bytes) -> bytes:
        """The record in ``value`` as JSON bytes (what the job's Java side hands on, for comparison)."""
        return orjson.dumps(self(value))

    def writer_schema(self, schema_id: int) -> Any:
        """The parsed writer schema of ``schema_id``; InvalidEventError ``avro_unknown_schema`` when the registry lacks it."""
        schema = self._schemas.get(schema_id)
        if schema is None:
            text = self.client.schema_text(schema_id)
            if text is None:
                raise InvalidEventError("avro_unknown_schema",
                                        f"schema id {schema_id} is not in the registry {self.client.url}")
            schema = self._schemas[schema_id] = fastavro.parse_schema(orjson.loads(text))
        return schema
