"""The two translations of ``source.security`` say the same thing, for every combination.

librdkafka's settings (``librdkafka_config``, secrets read in Python) against what the Flink connector's Java
client makes of ``java_properties`` (secrets as references): the Java side is resolved by the Java client
itself (``KafkaClientCheck`` in the job's jar: its config providers, its JAAS parser, its PEM key loader), in
a JVM of its own started with the secrets' variables in its environment, as a TaskManager is; librdkafka
loads the same certificate and key. Secrets hold what breaks naive quoting: double quotes,
backslashes, ``${...}``, ``}``, a tab, non-ASCII. Then, on the real broker's secured listeners, both clients
connect with what the translations give, and both are refused with a wrong password or a host name the
certificate does not list.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import pytest

from driftwarden.core.errors import KafkaSecurityError
from driftwarden.core.kafka_check import check_kafka
from driftwarden.core.kafka_security import JAVA_KAFKA_PACKAGE, java_properties, librdkafka_config
from driftwarden.schemas.config import KafkaSecurity, SourceConfig
from tests.kafka_helpers import mtls_security, sasl_ssl_security
from tests.tls_helpers import ClientTls, make_client_tls

PASSWORD = 'p"w\\d ${dwsecret:env:HOME} }:\t\u00e9 end'
KEY_PASSWORD = 'k"p\\w ${x} }:'  # ASCII: PBE turns the characters of a key password into bytes its own way
PASSWORD_ENV, KEY_PASSWORD_ENV = "DW_AGREEMENT_PASSWORD", "DW_AGREEMENT_KEY_PASSWORD"
LOGIN_MODULE = {"PLAIN": "common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "common.security.scram.ScramLoginModule"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> ClientTls:
    return make_client_tls(tmp_path_factory.mktemp("tls"), KEY_PASSWORD)


@pytest.fixture(scope="module")
def password_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "password"
    path.write_text(PASSWORD + "\n")  # the final line break is not part of the secret, in either client
    return path


class JavaKafkaClient:
    """``KafkaClientCheck`` (jobs/java) in a JVM of its own, with Flink's class path and the job's jars."""

    def __init__(self, env: dict[str, str]) -> None:
        import pyflink

        from driftwarden.jobs.flink_env import CONNECTOR_JAR, JAR_DIR, UDF_JAR

        classpath = [f"{Path(pyflink.__file__).parent / 'lib'}/*", str(JAR_DIR / CONNECTOR_JAR), str(JAR_DIR / UDF_JAR)]
        self.process = subprocess.Popen(["java", "-cp", ":".join(classpath), "dev.driftwarden.flink.KafkaClientCheck"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, env={**os.environ, **env})

    def _ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:  # log lines may come first
            if line.startswith("{"):
                return json.loads(line)
        raise AssertionError(f"the Java client ended (exit {self.process.wait()})")

    def resolve(self, properties: dict) -> dict:
        """What the Java client makes of the properties (or ``{"error": ...}``)."""
        return self._ask({"op": "resolve", "properties": properties})

    def list_topics(self, properties: dict, bootstrap: str) -> str:
        """"ok: N topics", or the exception the Java admin client met."""
        return self._ask({"op": "list_topics", "properties": properties, "bootstrap": bootstrap,
                          "timeout_ms": 20_000})["result"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def java_client():
    """The Java client, its environment holding the secrets the configs name by variable."""
    client = JavaKafkaClient({PASSWORD_ENV: PASSWORD, KEY_PASSWORD_ENV: KEY_PASSWORD})
    yield client
    client.close()


def combinations(tls: ClientTls, password_file: Path) -> list[dict]:
    """Every protocol; for SASL every mechanism and both password sources; for TLS with and without a CA,
    without a client certificate, and with one whose key is plain or encrypted (key password from the
    environment or a file)."""
    clients = [{}, {"cert_file": str(tls.cert_file), "key_file": str(tls.key_pkcs8)},
               {"cert_file": str(tls.cert_file), "key_file": str(tls.key_pbes1), "key_password_env": KEY_PASSWORD_ENV},
               {"cert_file": str(tls.cert_file), "key_file": str(tls.key_pbes1),
                "key_password_file": str(tls.key_password_file)}]
    tls_options = [{**ca, **client} for ca, client in itertools.product([{}, {"ca_file": str(tls.ca_file)}], clients)]
    sasl = [{"sasl_mechanism": mechanism, "username": 'dw "user"', **password}
            for mechanism, password in itertools.product(LOGIN_MODULE, [{"password_env": PASSWORD_ENV},
                                                                        {"password_file": str(password_file)}])]
    found = [{"protocol": "PLAINTEXT"}]
    found += [{"protocol": "SSL", **option} for option in tls_options]
    found += [{"protocol": "SASL_PLAINTEXT", **s} for s in sasl]
    found += [{"protocol": "SASL_SSL", **s, **option} for s, option in itertools.product(sasl, tls_options)]
    return found


def test_both_translations_agree_for_every_combination(tls, password_file, java_client, monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.setenv(KEY_PASSWORD_ENV, KEY_PASSWORD)
    cases = combinations(tls, password_file)
    assert len(cases) == 63
    for case in cases:
        security = KafkaSecurity(**case)
        rdkafka = librdkafka_config(SourceConfig(bootstrap_servers="127.0.0.1:1", security=security))
        java = java_client.resolve(java_properties(security))
        assert _meaning_of_librdkafka(rdkafka) == _meaning_of_java(java), case
        if security.tls:
            assert java["ssl_engine"] == "ok", case  # the Java client loaded the CA, certificate and key
            _librdkafka_loads(rdkafka)  # and so did librdkafka


def _meaning_of_librdkafka(conf: dict) -> dict:
    """What librdkafka's settings say, in terms both clients share (files read as the Java provider reads)."""
    meaning = {"protocol": conf["security.protocol"]}
    if "sasl.mechanism" in conf:
        meaning.update({"mechanism": conf["sasl.mechanism"], "username": conf["sasl.username"],
                        "password": conf["sasl.password"],
                        "login_module": f"{JAVA_KAFKA_PACKAGE}.{LOGIN_MODULE[conf['sasl.mechanism']]}"})
    if conf["security.protocol"].endswith("SSL"):
        meaning.update({"endpoint_identification": conf["ssl.endpoint.identification.algorithm"],
                        "ca_file": conf.get("ssl.ca.location"), "key_password": conf.get("ssl.key.password")})
        for field, key in (("certificate", "ssl.certificate.location"), ("key", "ssl.key.location")):
            meaning[field] = Path(conf[key]).read_text().rstrip("\r\n") if key in conf else None
    return meaning


def _meaning_of_java(java: dict) -> dict:
    """What the Java client made of its properties, in the same terms."""
    meaning = {"protocol": java["protocol"]}
    if "login_module" in java:
        meaning.update({k: java[k] for k in ("mechanism", "username", "password", "login_module")})
    if java["protocol"].endswith("SSL"):
        pem_trust = java["truststore_type"] == "PEM"
        assert java["keystore_type"] == ("PEM" if java["keystore_key"] else "JKS")
        meaning.update({"endpoint_identification": java["endpoint_identification"],
                        "ca_file": java["truststore_location"] if pem_trust else None,
                        "key_password": java["key_password"], "certificate": java["keystore_chain"],
                        "key": java["keystore_key"]})
    return meaning


def _librdkafka_loads(conf: dict) -> None:
    """librdkafka builds its TLS context (CA, certificate, key with its password) when a client is made."""
    from confluent_kafka import Producer

    Producer(conf).flush(0)


# ---------------------------------------------------------------- on the real broker


def _java_lists_topics(java_client: JavaKafkaClient, bootstrap: str, security: dict) -> str:
    return java_client.list_topics(java_properties(KafkaSecurity(**security)), bootstrap)


BROKER_PASSWORD_ENV, WRONG_PASSWORD_ENV = "DW_AGREEMENT_BROKER_PASSWORD", "DW_AGREEMENT_WRONG_PASSWORD"


@pytest.fixture(scope="module")
def broker_java_client(secure_kafka):
    """The Java client, its environment holding the broker's password, a wrong one and the key password."""
    client = JavaKafkaClient({BROKER_PASSWORD_ENV: secure_kafka.password,
                              WRONG_PASSWORD_ENV: "not-" + secure_kafka.password, KEY_PASSWORD_ENV: KEY_PASSWORD})
    yield client
    client.close()


@pytest.fixture(scope="module")
def broker_signed_tls(secure_kafka, tmp_path_factory) -> ClientTls:
    """A client certificate signed by the broker's CA, with its key plain and PBES1-encrypted."""
    ca = (secure_kafka.ca_file, secure_kafka.ca_file.parent / "ca.key")
    return make_client_tls(tmp_path_factory.mktemp("broker-tls"), KEY_PASSWORD, ca)


@pytest.mark.services
@pytest.mark.parametrize("listener, form", [("sasl_ssl", "password_file"), ("sasl_ssl", "password_env"),
                                            ("mtls", "plain key"), ("mtls", "encrypted key")])
def test_both_clients_connect_with_what_the_translations_give(listener, form, secure_kafka, broker_signed_tls,
                                                              broker_java_client, monkeypatch):
    monkeypatch.setenv(BROKER_PASSWORD_ENV, secure_kafka.password)
    monkeypatch.setenv(KEY_PASSWORD_ENV, KEY_PASSWORD)
    if listener == "sasl_ssl":
        override = {"password_env": BROKER_PASSWORD_ENV, "password_file": None} if form == "password_env" else {}
        bootstrap, security = secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka, **override)
    else:
        override = ({"key_file": str(broker_signed_tls.key_pbes1), "key_password_env": KEY_PASSWORD_ENV}
                    if form == "encrypted key" else {"key_file": str(broker_signed_tls.key_pkcs8)})
        bootstrap = secure_kafka.mtls
        security = mtls_security(secure_kafka, cert_file=str(broker_signed_tls.cert_file), **override)
    check_kafka(SourceConfig(bootstrap_servers=bootstrap, security=security))  # librdkafka
    assert _java_lists_topics(broker_java_client, bootstrap, security).startswith("ok: "), security


@pytest.mark.services
def test_both_clients_are_refused_a_wrong_password_and_a_host_name_the_certificate_does_not_list(
        secure_kafka, broker_java_client, monkeypatch):
    monkeypatch.setenv(WRONG_PASSWORD_ENV, "not-" + secure_kafka.password)
    wrong = sasl_ssl_security(secure_kafka, password_env=WRONG_PASSWORD_ENV, password_file=None)
    with pytest.raises(KafkaSecurityError, match="authentication failed"):
        check_kafka(SourceConfig(bootstrap_servers=secure_kafka.sasl_ssl, security=wrong))
    assert _java_lists_topics(broker_java_client, secure_kafka.sasl_ssl, wrong).startswith(
        "SaslAuthenticationException")
    by_name = "localhost:" + secure_kafka.sasl_ssl.rsplit(":", 1)[1]  # the certificate lists 127.0.0.1 only
    with pytest.raises(KafkaSecurityError, match="not valid for localhost"):
        check_kafka(SourceConfig(bootstrap_servers=by_name, security=sasl_ssl_security(secure_kafka)))
    assert _java_lists_topics(broker_java_client, by_name, sasl_ssl_security(secure_kafka)).startswith(
        "SslAuthenticationException")
