"""The Confluent wire format through the real schema registry: Java and Python read every value alike.

The live job reads an Avro topic's records in Java (``ConfluentAvro``: the envelope, the features it
vouches for) and Python reads the rest, replay and the dead letters' reasons (``core/confluent_avro.py``).
Both must make the same JSON object of every value, and agree on which values cannot be read at all:
compared record by record on random records of every Avro type and logical type the envelope maps,
and on corrupted frames. Also: the reasons of the values that cannot be read, the registry briefly
unreachable (delayed, then read), and refused credentials (a clear error without the password).
"""

from __future__ import annotations

import decimal
import json
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest

from driftwarden.core.confluent_avro import ConfluentAvroDecoder, frame
from driftwarden.core.errors import InvalidEventError, ServiceError
from driftwarden.core.schema_registry import RegistryClient
from driftwarden.schemas.config import SchemaRegistryConfig
from tests.avro_helpers import (REGISTRY_PASSWORD_FILE, REGISTRY_URL, REGISTRY_USER, framed, java_columns, java_json,
                                register, require_registry)
from tests.conftest import REPO

pytestmark = [pytest.mark.services]

RICH = {"type": "record", "name": "Rich", "namespace": "t", "fields": [
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "d", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tmu", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "model", "type": "string"},
    {"name": "x", "type": "double"}, {"name": "f", "type": "float"}, {"name": "i", "type": "int"},
    {"name": "l", "type": "long"}, {"name": "n", "type": ["null", "double"]},
    {"name": "u", "type": ["null", "string", "long", "boolean"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "b", "type": "boolean"}, {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "arr", "type": {"type": "array", "items": "int"}}, {"name": "m", "type": {"type": "map", "values": "string"}},
    {"name": "nest", "type": {"type": "record", "name": "N", "fields": [{"name": "score", "type": ["null", "float"]}]}},
]}


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(["a", "é", "\n", '"', "\\", "😀", "z", "\u0000", "\u2028"]) for _ in range(rng.randint(0, 6)))


def _double(rng: random.Random) -> float:
    return rng.choice([0.0, -0.0, 1e308, 5e-324, float("nan"), float("inf"), -float("inf"), rng.gauss(0, 1e3), 0.1,
                       1 / 3, 12345678901234567.0])


def _record(rng: random.Random) -> dict:
    return {"ts": datetime.fromtimestamp(rng.randint(-10**10, 4 * 10**12) / 1000, tz=timezone.utc),
            "tu": rng.randint(-10**15, 4 * 10**15), "lt": rng.randint(0, 4 * 10**12), "d": rng.randint(-1000, 30000),
            "tm": rng.randint(0, 86_399_999), "tmu": rng.randint(0, 86_399_999_999), "model": _text(rng),
            "x": _double(rng), "f": _double(rng), "i": rng.randint(-2**31, 2**31 - 1), "l": rng.randint(-2**63, 2**63 - 1),
            "n": rng.choice([None, _double(rng)]), "u": rng.choice([None, _text(rng), rng.randint(-5, 5), True]),
            "e": rng.choice("ABC"), "b": rng.random() < .5, "by": bytes(rng.randrange(256) for _ in range(rng.randint(0, 4))),
            "fx": bytes(rng.randrange(256) for _ in range(3)),
            "dec": decimal.Decimal(rng.randint(-10**11, 10**11)).scaleb(-3),
            "id": str(uuid.UUID(int=rng.getrandbits(128))), "arr": [rng.randint(-9, 9) for _ in range(rng.randint(0, 3))],
            "m": {_text(rng): _text(rng) for _ in range(rng.randint(0, 2))}, "nest": {"score": rng.choice([None, _double(rng)])}}


@pytest.fixture(scope="module")
def decoder() -> ConfluentAvroDecoder:
    """Python's decoder of the running registry (the config's ``source.schema_registry``)."""
    return ConfluentAvroDecoder(SchemaRegistryConfig(**require_registry()))


def _python(decoder: ConfluentAvroDecoder, value: bytes):
    try:
        return decoder(value)
    except InvalidEventError:
        return None


def test_java_and_python_read_every_value_alike(decoder):
    rng = random.Random(5)
    schema_id = register(f"parity-{uuid.uuid4().hex[:8]}-value", RICH)
    values = [framed(schema_id, RICH, _record(rng)) for _ in range(2000)]
    corrupted = [b"", b"\x00", b"\x01" + values[0][1:], frame(987_654, values[0][5:]), values[0] + b"\x00", values[0][:-1],
                 frame(schema_id, b"\x7f" * 30), frame(schema_id, b"\xfe\xff\xff\xff\x0f" + b"a" * 10)]
    for value in values[:300]:  # one byte changed, one byte dropped
        k = rng.randrange(5, len(value))
        corrupted.append(value[:k] + bytes([rng.randrange(256)]) + value[k + 1:])
        k = rng.randrange(5, len(value))
        corrupted.append(value[:k] + value[k + 1:])
    java = java_json(values + corrupted)
    python = [_python(decoder, v) for v in values + corrupted]
    differing = [(k, p, j) for k, (p, j) in enumerate(zip(python, java))
                 if p != (None if j is None else orjson.loads(j)) and not _same_json(p, j)]
    assert not differing, differing[:3]
    assert all(p is not None for p in python[:len(values)])
    unreadable = sum(p is None for p in python[len(values):])
    assert 100 < unreadable < len(corrupted)  # both kinds are among the corrupted values


def _same_json(python, java: bytes | None) -> bool:
    """Equal as JSON (a NaN-free object compares equal; -0.0 == 0.0 either way)."""
    return python is not None and java is not None and json.dumps(python, sort_keys=True) == json.dumps(
        orjson.loads(java), sort_keys=True)


SCORED = {"type": "record", "name": "Scored", "fields": [
    {"name": "ts", "type": [{"type": "long", "logicalType": "timestamp-millis"}, "string", "double", "null"]},
    {"name": "model", "type": ["string", "null", "long"]},
    {"name": "x", "type": ["null", "double", "string", "boolean", "long", {"type": "array", "items": "int"}]},
    {"name": "c", "type": ["null", {"type": "enum", "name": "C", "symbols": ["a", "b", "z"]}, "string", "long"]},
    {"name": "flag", "type": ["null", "boolean", "string"]},
    {"name": "extra", "type": ["null", {"type": "map", "values": "string"}, "float"]},
    {"name": "score", "type": ["null", "float", "string"]},
]}
SCORED_CONFIG = {"envelope": {"event_time": {"field": "ts"}, "features": {"root": True, "exclude": ["ts", "model"]},
                              "prediction": {"field": "score"}}}


def _scored(rng: random.Random) -> dict:
    pick = rng.random
    return {"ts": rng.choice([T_MS + rng.randrange(10**6), "2026-01-01T00:00:00.5Z", "2026-01-01 00:00:00Z",
                              (T_MS + 0.5) / 1, None, 17]) if pick() < 0.2 else T_MS + rng.randrange(10**6),
            "model": rng.choice(["m", "n", "", None, 3]) if pick() < 0.1 else "m",
            "x": rng.choice([None, "1.5", True, 7, [1], float("nan"), 1e308]) if pick() < 0.2 else rng.gauss(0, 1),
            "c": rng.choice([None, "é", "z", 4]) if pick() < 0.2 else rng.choice("ab"),
            "flag": rng.choice([None, "yes"]) if pick() < 0.2 else pick() < 0.5,
            "extra": rng.choice([None, {"k": "v"}, 1.5]), "score": rng.choice([None, float("inf"), "0.3", pick()])}


T_MS = 1_767_225_600_000


def test_java_vouches_only_for_records_python_reads_with_the_same_values(tmp_path):
    """The job's source task summarizes the Avro records it vouches for from the record itself (no JSON on the
    way): each must be one Python's validation accepts with exactly those values (the rule of
    tests/test_feature_columns.py for JSON)."""
    from driftwarden.jobs.feature_spec import FeatureColumnSpec
    from driftwarden.pipeline.columns import configured_values
    from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
    from driftwarden.schemas.events import EventRules, validate_event

    config = MonitorConfig.model_validate({
        "source": {"format": "avro", "schema_registry": require_registry(), **SCORED_CONFIG},
        "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical", "flag": "boolean"}},
                   {"name": "n", "features": {"x": "numeric"}, "monitor_prediction": False}]})
    spec, rules, kinds_of = FeatureColumnSpec.from_config(config), EventRules.of(config.source), feature_kinds_lookup(config)
    rng = random.Random(3)
    schema_id = register(f"vouch-{uuid.uuid4().hex[:8]}-value", SCORED)
    values = [framed(schema_id, SCORED, _scored(rng)) for _ in range(3000)]
    values += [v[:-1] for v in values[:50]] + [v + b"\x00" for v in values[50:100]]
    vouched = 0
    for value, java in zip(values, java_columns(values, spec.to_json(), tmp_path)):
        if java is None:
            continue
        vouched += 1
        event = validate_event(value, kinds_of, rules)  # raises if Python rejects what Java vouched for
        assert not event.invalid, (event, java)
        by_kind, _ = configured_values(event.features, kinds_of(event.model), event.by_kind, event.prediction)
        assert java == spec.row_values(event.model, by_kind), (event, java)
    assert 1200 < vouched < 3000  # the wrong-typed, the unreadable and the other model's events are left to Python


def test_values_that_cannot_be_read_name_their_reason(decoder):
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}, {"name": "s", "type": "string"}]}
    schema_id = register(f"reasons-{uuid.uuid4().hex[:8]}-value", schema)
    good = framed(schema_id, schema, {"a": 7, "s": "x"})
    assert decoder(good) == {"a": 7, "s": "x"}
    cases = {b'{"a": 7}': "not_avro_frame", b"\x00\x00": "not_avro_frame",
             frame(2**31 - 1, good[5:]): "avro_unknown_schema",
             good + b"\x00": "avro_undecodable", good[:-1]: "avro_undecodable",
             frame(schema_id, b"\x0e\x04\xff\xfe"): "avro_undecodable"}  # a string that is not UTF-8
    for value, reason in cases.items():
        with pytest.raises(InvalidEventError) as caught:
            decoder(value)
        assert caught.value.reason == reason, value


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _registry_later(port: int, folder: Path, after_s: float) -> threading.Thread:
    """A second registry with the running one's schemas and password, started on ``port`` after ``after_s``."""
    shutil.copy(REGISTRY_PASSWORD_FILE, folder / "password")
    shutil.copy(REGISTRY_PASSWORD_FILE.parent / "schemas.jsonl", folder / "schemas.jsonl")
    procs = []

    def start() -> None:
        time.sleep(after_s)
        procs.append(subprocess.Popen([sys.executable, str(REPO / "scripts" / "schema_registry.py"), "--port", str(port),
                                       "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    thread = threading.Thread(target=start)
    thread.procs = procs
    thread.start()
    return thread


def _stop(thread: threading.Thread) -> None:
    thread.join()
    for proc in thread.procs:
        proc.terminate()
        proc.wait(10)


def test_an_unreachable_registry_delays_python_then_reads(tmp_path, caplog):
    schema = {"type": "record", "name": "Late", "fields": [{"name": "a", "type": "long"}]}
    schema_id = register(f"late-{uuid.uuid4().hex[:8]}-value", schema)
    port = _free_port()
    later = _registry_later(port, tmp_path, after_s=1.0)
    try:
        client = RegistryClient(f"http://127.0.0.1:{port}", REGISTRY_USER, REGISTRY_PASSWORD_FILE.read_text().strip(),
                                retry_delays_s=(0.5, 0.5, 1.0, 1.0, 2.0, 2.0))
        decoder = ConfluentAvroDecoder(None, client)
        started = time.monotonic()
        assert decoder(framed(schema_id, schema, {"a": 3})) == {"a": 3}
        assert time.monotonic() - started >= 0.9
        assert "unreachable" in caplog.text and "retry 1 of 6" in caplog.text
    finally:
        _stop(later)
    gone = RegistryClient(f"http://127.0.0.1:{_free_port()}", retry_delays_s=(0.05, 0.05))
    with pytest.raises(ServiceError, match="unreachable for schema id 5 after 2 retries"):
        gone.schema_text(5)


def test_an_unreachable_registry_delays_java_then_reads(tmp_path):
    schema = {"type": "record", "name": "LateJ", "fields": [{"name": "a", "type": "long"}]}
    schema_id = register(f"late-java-{uuid.uuid4().hex[:8]}-value", schema)
    port = _free_port()
    later = _registry_later(port, tmp_path, after_s=1.5)
    try:
        started = time.monotonic()
        java = java_json([framed(schema_id, schema, {"a": 3})], url=f"http://127.0.0.1:{port}")
        assert java == [b'{"a":3}'] and time.monotonic() - started >= 1.5
    finally:
        _stop(later)


def test_refused_credentials_are_a_clear_error_without_the_password(tmp_path):
    client = RegistryClient(REGISTRY_URL, REGISTRY_USER, "not-the-password-42")
    with pytest.raises(ServiceError) as caught:
        client.schema_text(1)
    assert "refused the credentials" in str(caught.value) and "not-the-password-42" not in str(caught.value)
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password-42")
    with pytest.raises(AssertionError) as failed:
        java_json([frame(1, b"")], password_file=wrong)
    assert "refused the credentials" in str(failed.value) and "not-the-password-42" not in str(failed.value)
