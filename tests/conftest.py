"""Shared fixtures: where the real services started by scripts/services.sh listen.

Tests marked ``services`` need them running (``make test`` starts them first). A fixture whose
service is not up fails with the command to start it; it never skips silently.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("DRIFTWARDEN_RUN_DIR", REPO / ".run"))

#: scripts/services.sh shifts every port by $DRIFTWARDEN_PORT_OFFSET (a private set of services): so do the tests.
PORT_OFFSET = int(os.environ.get("DRIFTWARDEN_PORT_OFFSET", "0"))
KAFKA_BOOTSTRAP = os.environ.get("DRIFTWARDEN_KAFKA_BOOTSTRAP", f"127.0.0.1:{59092 + PORT_OFFSET}")
#: The same broker's SASL_SSL (SCRAM-SHA-512) and mutual-TLS listeners, and the folder of its CA, client
#: certificate and SCRAM password (scripts/services.sh makes them at first start).
KAFKA_SASL_SSL = f"127.0.0.1:{59093 + PORT_OFFSET}"
KAFKA_MTLS = f"127.0.0.1:{59094 + PORT_OFFSET}"
KAFKA_SECRETS = Path(os.environ.get("DRIFTWARDEN_KAFKA_SECRETS", RUN_DIR / "kafka"))
#: scripts/services.sh runs PostgreSQL with scram-sha-256 authentication; the password it generated at first init.
PG_PASSWORD_FILE = RUN_DIR / "postgres" / "password"
PG_ADDRESS = f"127.0.0.1:{55432 + PORT_OFFSET}"
PROMETHEUS_URL = os.environ.get("DRIFTWARDEN_PROMETHEUS_URL", f"http://127.0.0.1:{59090 + PORT_OFFSET}")
FLINK_REST = os.environ.get("DRIFTWARDEN_FLINK_REST", f"127.0.0.1:{58081 + PORT_OFFSET}")


def _require_port(hostport: str, service: str) -> None:
    host, port = hostport.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        pytest.fail(f"{service} is not listening on {hostport}: run `scripts/services.sh start {service}`")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap servers of the real single-broker KRaft Kafka."""
    _require_port(KAFKA_BOOTSTRAP, "kafka")
    return KAFKA_BOOTSTRAP


@dataclass(frozen=True)
class SecureKafka:
    """The broker's secured listeners and what a client needs for them (files of scripts/services.sh)."""

    sasl_ssl: str
    mtls: str
    user: str
    password_file: Path
    ca_file: Path
    cert_file: Path
    key_file: Path

    @property
    def password(self) -> str:
        """The SCRAM user's password (tests that must handle the secret itself)."""
        return self.password_file.read_text()


@pytest.fixture(scope="session")
def secure_kafka(kafka_bootstrap) -> SecureKafka:
    """The broker's SASL_SSL listener (SCRAM-SHA-512, user driftwarden) and mutual-TLS listener."""
    _require_port(KAFKA_SASL_SSL, "kafka")
    _require_port(KAFKA_MTLS, "kafka")
    found = SecureKafka(KAFKA_SASL_SSL, KAFKA_MTLS, "driftwarden", KAFKA_SECRETS / "client.password",
                        KAFKA_SECRETS / "ca.pem", KAFKA_SECRETS / "client.pem", KAFKA_SECRETS / "client.key")
    missing = [str(p) for p in (found.password_file, found.ca_file, found.cert_file, found.key_file) if not p.is_file()]
    if missing:
        pytest.fail(f"the broker's TLS material or password is missing ({', '.join(missing)}): restart Kafka with "
                    "`scripts/services.sh stop kafka && scripts/services.sh start kafka`")
    return found


def pg_password() -> str:
    """The password of the test PostgreSQL's roles (``.run/postgres/password``, written by scripts/services.sh)."""
    try:
        return PG_PASSWORD_FILE.read_text().strip()
    except FileNotFoundError:
        pytest.fail(f"no PostgreSQL password at {PG_PASSWORD_FILE}: run `scripts/services.sh start postgres` (a server "
                    "initialised before it had one: stop it, remove its data folder and start it again)")


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of the real PostgreSQL, with its password (a fresh database per test session is not needed:
    tables are per test); ``$DRIFTWARDEN_TEST_PG_URL`` names another server."""
    if "DRIFTWARDEN_TEST_PG_URL" in os.environ:
        url = os.environ["DRIFTWARDEN_TEST_PG_URL"]
        _require_port(url.rsplit("@", 1)[1].split("/")[0], "postgres")
        return url
    _require_port(PG_ADDRESS, "postgres")
    return f"postgresql://driftwarden:{pg_password()}@{PG_ADDRESS}/driftwarden"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def store_url(request, tmp_path) -> str:
    """URL of an empty store: a SQLite file, or a fresh schema of the real PostgreSQL (``pg_engine``'s)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_engine").url.render_as_string(hide_password=False)


def load_bench(name: str):
    """A script of bench/ (outside the package) imported as a module, e.g. ``load_bench("run_all")``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def pg_engine(pg_url: str):
    """A SQLAlchemy engine on a fresh, empty PostgreSQL schema of its own, dropped afterwards."""
    from sqlalchemy import create_engine, text

    from driftwarden.core.store import make_engine

    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine = make_engine(f"{pg_url}?options=-csearch_path%3D{schema}")
    yield engine
    engine.dispose()
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture(scope="session")
def prometheus_url() -> str:
    """Base URL of the real Prometheus; it scrapes every target listed in ``prometheus_targets_dir``."""
    _require_port(PROMETHEUS_URL.split("//", 1)[1], "prometheus")
    return PROMETHEUS_URL


@pytest.fixture(scope="session")
def prometheus_targets_dir() -> Path:
    """Folder of Prometheus file_sd JSON files: write ``[{"targets": ["127.0.0.1:PORT"]}]`` to add a target."""
    path = RUN_DIR / "prometheus" / "targets"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def flink_rest() -> str:
    """host:port of the standalone Flink cluster's JobManager REST endpoint."""
    _require_port(FLINK_REST, "flink")
    return FLINK_REST


@pytest.fixture()
def topic_name() -> str:
    """A fresh topic name for one test."""
    return f"test-{uuid.uuid4().hex[:12]}"
