"""A refused Kafka connection ends ``run``, ``replay`` and ``status`` quickly, in one line that says why.

Each of the five ways a secured connection fails (a wrong password, an unknown user, a CA the client does not
trust, a host name the broker's certificate does not list, plaintext spoken to a TLS listener), against the
real broker's SASL_SSL listener, through each command as a user runs it: the command exits within 30 s (1, an
error, from ``run`` and ``replay``; 4, unknown, from ``status``) and prints exactly one line, which names the
broker, the mechanism and the cause (no hang, no retry storm of client log lines).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
import yaml

from driftwarden.core.errors import EXIT_ERROR, EXIT_UNKNOWN
from tests.conftest import REPO
from tests.job_helpers import FEATURES, T0, stream
from tests.kafka_helpers import sasl_ssl_security

pytestmark = pytest.mark.services

WRONG_ENV = "DW_TEST_WRONG_KAFKA_PASSWORD"
#: command -> its exit code on a refused connection (driftwarden.core.errors)
EXIT_CODES = {"run": EXIT_ERROR, "replay": EXIT_ERROR, "status": EXIT_UNKNOWN}
#: failure -> (how the config differs from a working SASL_SSL one, what the line must say)
FAILURES = {
    "wrong password": ({"password_env": WRONG_ENV, "password_file": None},
                       ["SASL_SSL, SCRAM-SHA-512, user 'driftwarden'", "authentication failed: wrong password",
                        f"the password came from ${WRONG_ENV}"]),
    "unknown user": ({"username": "nobody"}, ["user 'nobody'", "authentication failed", "no user 'nobody'"]),
    "untrusted CA": ({"ca_file": None}, ["SASL_SSL, SCRAM-SHA-512", "certificate is not trusted", "set ca_file"]),
    "host name mismatch": ({}, ["SASL_SSL, SCRAM-SHA-512", "certificate is not valid for localhost"]),
    "plaintext to TLS": (None, ["(PLAINTEXT)", "the listener speaks TLS", "set protocol SSL"]),
}


def _config(folder: Path, secure_kafka, failure: str) -> tuple[Path, str]:
    """The failing config and the broker it names."""
    override, _ = FAILURES[failure]
    port = secure_kafka.sasl_ssl.rsplit(":", 1)[1]
    broker = f"localhost:{port}" if failure == "host name mismatch" else secure_kafka.sasl_ssl
    source = {"topics": ["events"], "bootstrap_servers": broker}
    if override is not None:
        source["security"] = sasl_ssl_security(secure_kafka, **override)
    path = folder / f"{failure.replace(' ', '-')}.yaml"
    path.write_text(yaml.safe_dump({"source": source, "window": {"size": "10s"},
                                    "models": [{"name": "m", "features": FEATURES}]}))
    return path, broker


def _commands(config: Path, folder: Path) -> dict[str, list[str]]:
    reference = folder / "ref.jsonl"
    if not reference.exists():
        reference.write_bytes(b"\n".join(orjson.dumps(e) for e in stream(3, 100, start_ms=T0 - 3_600_000)))
    store = f"sqlite:///{folder / 'store.db'}"
    return {
        "run": ["run", "--config", str(config), "--bounded", "--store-url", store,
                "--checkpoint-dir", str(folder / "chk")],
        "replay": ["replay", "--topic", "events", "--from", str(T0), "--to", str(T0 + 60_000), "--config", str(config),
                   "--reference", str(reference), "--no-progress"],
        "status": ["status", "--config", str(config), "--store-url", store, "--prometheus", ""],
    }


@pytest.mark.parametrize("failure", list(FAILURES))
def test_each_command_ends_within_30_s_with_one_line_naming_broker_mechanism_and_cause(failure, secure_kafka,
                                                                                       tmp_path):
    config, broker = _config(tmp_path, secure_kafka, failure)
    env = {**os.environ, WRONG_ENV: f"not-{uuid.uuid4().hex}", "DRIFTWARDEN_RUN_DIR": str(tmp_path / "run"),
           "COLUMNS": "500"}
    for command, args in _commands(config, tmp_path).items():
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "driftwarden.cli", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        assert done.returncode == EXIT_CODES[command], (command, done.returncode, lines)
        assert elapsed <= 30, (command, elapsed)
        assert len(lines) == 1, (command, lines)
        assert lines[0].startswith(f"KafkaSecurityError: Kafka {broker} ("), (command, lines)
        for part in FAILURES[failure][1]:
            assert part in lines[0], (command, part, lines[0])
